// SPDX-License-Identifier: Apache-2.0
// Tensor-core GEMM for prefill on NVIDIA GPUs: y = x W^T through inline PTX (ptx.cl)
// mma.sync.aligned.m16n8k16 (f16 inputs, f32 accumulation; sm_80 and later). Built only where
// ClMatmul finds NVIDIA's platform and this program compiles (cl_matmul.cpp); elsewhere the f32
// GEMM of matmul_gemm.cl runs.
//
// Why f16 and not int8 (llama.cpp's MMQ): the weight tiles come from the same exact 8-element
// dequantization as get_rows and the f32 GEMM (deq8), so every layout works unchanged; beyond the
// order of the f32 sums, only the rounding of weights and activations to f16 (relative 2^-11
// each) separates the result from the f32 GEMM's. int8 would need activations quantized per 32 and a per-layout integer path.
//
// A work-group of WM x WN warps computes a (64 WM) rows x (32 WN) tokens tile of y; each warp a
// 64 x 32 block: 4 x 4 mma tiles of 16 rows x 8 tokens. Per K-step of 32, the group dequantizes
// its W tile and converts its x tile to f16 pairs (cvt.rn.f16x2.f32) into local memory, both
// k-contiguous, 32 halves (16 uints) per row, no padding: a warp's 128-bit fragment loads then
// read 8 lanes = 2 whole rows = all 32 banks per phase. The bytes of the next two steps' tiles
// are in flight in registers while the tensor cores work (gemm_mma says how).
//
// The fragments follow the PTX ISA's m16n8k16 layout (ptx.cl, MMA_16816). The order of k
// inside a dot product is free as long as A and B agree, so lane t takes the f16 pairs 4t ..
// 4t + 3 of a 32-wide row with one 128-bit load: pairs 4t and 4t + 1 stand for ISA k-pairs 2t and 2t + 8 of the first mma, pairs
// 4t + 2 and 4t + 3 for those of the second.

#define MMA_BK 32
#define MMA_ROW_U4 4  // uint4 per tile row: 32 halves

inline uint4 mma_h8(float8 v) {
  return (uint4)(mma_h2(v.s0, v.s1), mma_h2(v.s2, v.s3), mma_h2(v.s4, v.s5), mma_h2(v.s6, v.s7));
}

// One K-step's tile bytes, as loaded: group lg of the step's four for the nw W rows wrow and the
// nx x tokens xtok. Nothing here uses the loaded values, so the loads stay in flight while the
// tensor cores work.
typedef struct {
  WRaw w[4];
  float8 x[4];
} MmaRaw;

__attribute__((always_inline)) inline void mma_fetch(const int L, const int nw, const int nx, const Weight w,
                                                     __global const float* x, uint step, uint lg, const uint* wrow,
                                                     const uint* xtok, MmaRaw* raw) {
  const uint g = step * (MMA_BK / 8) + lg, groups = w_groups(w);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (j < nw) {
      if (g < groups) {
        raw->w[j] = deq8_fetch(L, w, wrow[j], g);
      } else {  // the float layouts' last step: zeros (as stored past cols)
        raw->w[j].lo = raw->w[j].hi = (uint4)(0u);
        raw->w[j].s = raw->w[j].m = 0u;
      }
    }
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (j < nx) raw->x[j] = x_load8(x + (size_t)xtok[j] * w.cols, g * 8, w.cols);
}

// The fetched bytes dequantized, rounded to f16 pairs and stored into one local buffer: item
// lid's j-th group is uint4 lid + nt j (tile row (lid + nt j) >> 2, group lg), so a warp writes
// 512 consecutive bytes.
__attribute__((always_inline)) inline void mma_store(const int L, const int nw, const int nx, const int nt, uint lid,
                                                     uint step, uint lg, const uint groups, const MmaRaw* raw,
                                                     __local uint4* ws, __local uint4* xs) {
  const uint g = step * (MMA_BK / 8) + lg;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (j < nw) ws[lid + nt * j] = mma_h8(g < groups ? deq8_decode(L, raw->w[j], g) : (float8)(0.0f));
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (j < nx) xs[lid + nt * j] = mma_h8(raw->x[j]);
}

// The tensor-core work of one K-step on one local buffer pair: a warp's 4 x 4 tiles, k 32.
__attribute__((always_inline)) inline void mma_step(__local const uint4* A, __local const uint4* B,
                                                    float acc[4][4][4]) {
  uint4 alo[4], ahi[4], b[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    alo[i] = A[(16 * i) * MMA_ROW_U4];
    ahi[i] = A[(16 * i + 8) * MMA_ROW_U4];
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) b[j] = B[(8 * j) * MMA_ROW_U4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      MMA_16816(acc[i][j], alo[i].x, ahi[i].x, alo[i].y, ahi[i].y, b[j].x, b[j].y);
      MMA_16816(acc[i][j], alo[i].z, ahi[i].z, alo[i].w, ahi[i].w, b[j].z, b[j].w);
    }
}

// WM, WN: literals at every call (the kernel's tile). ws, xs: two buffers each of
// 64 WM and 32 WN tile rows. The per-item arrays are sized for the largest tile and their loops
// run to that constant with a guard, so they unroll into registers whatever the tile.
//
// The pipeline: K-step s is computed from local buffer s & 1 while the bytes of steps s + 1
// and s + 2 are in flight in two register sets (r0: even steps, r1: odd); after the tensor
// cores finish step s, the set of step s + 1 is decoded into the other buffer. A load thus has
// two steps of tensor-core work to arrive in, not one.
__attribute__((always_inline)) inline void gemm_mma(const int L, const int WM, const int WN, const Weight w,
                                                    __global const float* x, uint n, __global float* y,
                                                    __local uint4* ws, __local uint4* xs) {
  const int BM = 64 * WM, BN = 32 * WN, NT = 32 * WM * WN;
  const int NWL = BM * 4 / NT, NXL = BN * 4 / NT;  // 8-element groups each item loads per step
  const uint lid = get_local_id(0);
  const uint r0 = get_group_id(0) * BM, t0 = get_group_id(1) * BN;
  const uint steps = (w_groups(w) * 8 + MMA_BK - 1) / MMA_BK;

  // The items' loads: item lid + NT j takes group (its & 3) of tile row (its >> 2). Rows and
  // tokens past the end are read clamped, never written.
  uint wrow[4], xtok[4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (j < NWL) wrow[j] = min(r0 + ((lid + NT * j) >> 2), w.rows - 1);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (j < NXL) xtok[j] = min(t0 + ((lid + NT * j) >> 2), n - 1);
  const uint lg = lid & 3;  // NT is a multiple of 4: the same group for every j

  const uint lane = lid & 31, warp = lid >> 5;
  const uint g = lane >> 2, t = lane & 3;
  const uint wm = warp % WM, wn = warp / WM;
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  __local uint4* ws1 = ws + BM * MMA_ROW_U4;
  __local uint4* xs1 = xs + BN * MMA_ROW_U4;
  const uint a_off = (wm * 64 + g) * MMA_ROW_U4 + t, b_off = (wn * 32 + g) * MMA_ROW_U4 + t;
  MmaRaw ra, rb;
  mma_fetch(L, NWL, NXL, w, x, 0, lg, wrow, xtok, &ra);
  if (steps > 1) mma_fetch(L, NWL, NXL, w, x, 1, lg, wrow, xtok, &rb);
  mma_store(L, NWL, NXL, NT, lid, 0, lg, w_groups(w), &ra, ws, xs);
  barrier(CLK_LOCAL_MEM_FENCE);
  // Two steps a turn, so each register set keeps its name: at the top, buffer 0 holds step s
  // and rb step s + 1 (in flight).
  for (uint s = 0; s < steps; s += 2) {
    if (s + 2 < steps) mma_fetch(L, NWL, NXL, w, x, s + 2, lg, wrow, xtok, &ra);
    mma_step(ws + a_off, xs + b_off, acc);
    if (s + 1 >= steps) break;
    mma_store(L, NWL, NXL, NT, lid, s + 1, lg, w_groups(w), &rb, ws1, xs1);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (s + 3 < steps) mma_fetch(L, NWL, NXL, w, x, s + 3, lg, wrow, xtok, &rb);
    mma_step(ws1 + a_off, xs1 + b_off, acc);
    if (s + 2 >= steps) break;
    mma_store(L, NWL, NXL, NT, lid, s + 2, lg, w_groups(w), &ra, ws, xs);
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  store_warp_tiles(acc, r0 + wm * 64, t0 + wn * 32, g, t, w.rows, n, y);
}

// gemm_mma_NAME: 128 rows x 128 tokens, 8 warps. (A 64 x 64 tile of 2 warps, in a first version
// of this kernel without the two-step prefetch, ran slower on an H200 at 16 to 512 tokens on all
// 7B shapes but one, 5 % faster there, though big tiles leave SMs idle at few tokens.)
#define GEMM_MMA(name, L)                                                                          \
  __kernel __attribute__((reqd_work_group_size(256, 1, 1))) void gemm_mma_##name(                 \
      WARGS, __global const float* x, ulong x_off, uint n, __global float* y, ulong y_off) {       \
    __local uint4 ws[2 * 128 * MMA_ROW_U4];                                                        \
    __local uint4 xs[2 * 128 * MMA_ROW_U4];                                                        \
    WMAKE(w);                                                                                      \
    gemm_mma(L, 2, 4, w, CVIEW(float, x, x_off), n, VIEW(float, y, y_off), ws, xs);                \
  }

GEMM_MMA(f32, L_F32)
GEMM_MMA(f16, L_F16)
GEMM_MMA(bf16, L_BF16)
GEMM_MMA(q4_0, L_Q4_0)
GEMM_MMA(q4_1, L_Q4_1)
GEMM_MMA(q4_k, L_Q4_K)
GEMM_MMA(i8, L_I8)
GEMM_MMA(i8m, L_I8M)
GEMM_MMA(e0m4, L_E0M4)
