// SPDX-License-Identifier: Apache-2.0
// GEMM for prefill: y = x W^T over 64 rows x 64 tokens per work-group of 16 x 16 items.
//
// Each step dequantizes a 64 x 32 tile of W (one 8-element group per item: the same exact
// dequantization as get_rows) and loads the matching 64 x 32 tile of x into local memory, both
// stored k-major with one float of padding so the transposing writes hit distinct banks; each
// item then accumulates a 4 x 4 block. Rows of an item are tx + 16 i, so consecutive items read
// consecutive floats of the W tile and write consecutive floats of y.

#define GEMM_TM 64
#define GEMM_TN 64
#define GEMM_TK 32

inline void gemm(const int L, const Weight w, __global const float* x, uint n, __global float* y,
                 __local float* ws, __local float* xs) {
  const uint tx = get_local_id(0), ty = get_local_id(1);
  const uint lid = ty * 16 + tx;
  const uint r0 = get_group_id(0) * GEMM_TM, t0 = get_group_id(1) * GEMM_TN;
  // What this item loads: group lg of row (and token) lr of the tiles.
  const uint lr = lid >> 2, lg = lid & 3;
  const uint wr = min(r0 + lr, w.rows - 1), xt = min(t0 + lr, n - 1);  // past the end: read, never written
  __global const float* xrow = x + (size_t)xt * w.cols;
  const uint groups = w_groups(w);
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

  for (uint k0 = 0; k0 < groups * 8; k0 += GEMM_TK) {
    const uint g = (k0 >> 3) + lg;
    const float8 wv = g < groups ? deq8(L, w, wr, g) : (float8)(0.0f);
    const float8 xv = x_load8(xrow, g * 8, w.cols);
    const float wa[8] = {wv.s0, wv.s1, wv.s2, wv.s3, wv.s4, wv.s5, wv.s6, wv.s7};
    const float xa[8] = {xv.s0, xv.s1, xv.s2, xv.s3, xv.s4, xv.s5, xv.s6, xv.s7};
    for (int e = 0; e < 8; ++e) {
      ws[(lg * 8 + e) * (GEMM_TM + 1) + lr] = wa[e];
      xs[(lg * 8 + e) * (GEMM_TN + 1) + lr] = xa[e];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < GEMM_TK; ++k) {
      float a[4], b[4];
      for (int i = 0; i < 4; ++i) a[i] = ws[k * (GEMM_TM + 1) + tx + 16 * i];
      for (int j = 0; j < 4; ++j) b[j] = xs[k * (GEMM_TN + 1) + ty + 16 * j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int j = 0; j < 4; ++j) {
    const uint t = t0 + ty + 16 * j;
    if (t >= n) break;
    for (int i = 0; i < 4; ++i) {
      const uint r = r0 + tx + 16 * i;
      if (r < w.rows) y[(size_t)t * w.rows + r] = acc[i][j];
    }
  }
}

#define GEMM(name, L)                                                                                \
  __kernel __attribute__((reqd_work_group_size(16, 16, 1))) void gemm_##name(                        \
      WARGS, __global const float* x, ulong x_off, uint n, __global float* y, ulong y_off) {         \
    __local float ws[GEMM_TK * (GEMM_TM + 1)];                                                       \
    __local float xs[GEMM_TK * (GEMM_TN + 1)];                                                       \
    WMAKE(w);                                                                                        \
    gemm(L, w, CVIEW(float, x, x_off), n, VIEW(float, y, y_off), ws, xs);                            \
  }

GEMM(f32, L_F32)
GEMM(f16, L_F16)
GEMM(bf16, L_BF16)
GEMM(q4_0, L_Q4_0)
GEMM(q4_1, L_Q4_1)
GEMM(q4_k, L_Q4_K)
GEMM(i8, L_I8)
GEMM(i8m, L_I8M)
GEMM(e0m4, L_E0M4)
