// SPDX-License-Identifier: Apache-2.0
// The decode GEMV on int8 activations (llama.cpp's mmvq idea): y[t] = W x[t] for up to
// GEMV_MAXT tokens, x in the int8 form of the CPU's quantization (act_quant.cl's
// wg_quant_q8: codes, and per 32 elements the scale d and the code sums of the two halves),
// every block's products summed as integers with dp4a, as the CPU's integer dot products do.
// The float GEMV (matmul_gemv.cl) decodes each 4-bit code to a float and multiplies floats:
// several instructions a weight, which left an H100 at ~25 % of its memory bandwidth.
//
// An item takes half a block (16 elements: 4 words of codes, 4 dp4a per row and token) of
// DP_NR rows per step; with w's block value a q + b (its codes q), per (row, token):
//   Q4_0 (b = -8 a):  y += (a d_x) * float(sum q q_x - 8 sum q_x)   (one exact integer)
//   with a min:       y += (a d_x) * float(sum q q_x) + b (d_x sum q_x)
//   int8, no min:     y += (a d_x) * float(sum q q_x)
// where Q4_1, E0M4 and Q4_K (a = d sc, b = -dmin mn) have a min, as Q5_1 and Q5_K (I8M) do;
// Q5_0, Q8_0 (a scale per 32) and Q6_K (a scale per 16) are I8. The sums over the half's 16
// elements are exact integers; everything else is rounded in f32 as the float GEMV's sums are.
//
// dp4a is an inline-PTX instruction on NVIDIA's platform (the host builds this program with
// DP4A_PTX there, and without it where that build fails); elsewhere (PoCL in CI) the same
// integer sums come from four products of chars.

#ifndef DP_LX
#define DP_LX 64  // items per row line (a power of two, at least 2)
#endif
#ifndef DP_LY
#define DP_LY 2  // lines per work-group
#endif
#ifndef DP_NR
#define DP_NR 2  // rows per item
#endif

#ifdef DP4A_PTX
inline int dp4a(uint a, uint b, int c) {
  int r;
  asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
#else
inline int dp4a(uint a, uint b, int c) {
  const char4 x = as_char4(a), y = as_char4(b);
  return c + x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
}
#endif

// An integer sum as a float without a conversion instruction (a quarter of the FMA rate on
// NVIDIA): |c| < 2^22 (16 products of at most 128 x 127) sits in the mantissa of 1.5 * 2^23.
inline float dp_i2f(int c) { return as_float(c + 0x4B400000) - 12582912.0f; }

// The 16 codes of half `part` of block b of row r as 4 words of int8 in element order, and the
// half's (a, b). The 4-bit layouts' byte j holds element j (low nibble) and j + 16 (high): half
// p is nibble p of all 16 bytes, both halves read the same 16 bytes. The int8 layouts hold codes
// in element order, a scale (and min) per 2^gs elements (16 or 32).
typedef struct {
  uint4 q;
  float2 ab;
} DpHalf;

inline DpHalf dp_load(const int L, const Weight w, uint r, uint b, uint part) {
  DpHalf h;
  const size_t blk = (size_t)r * (w.kp >> 5) + b;  // a row holds kp / 32 blocks
  if (L == L_I8 || L == L_I8M) {
    const size_t e = blk * 32 + part * 16;
    h.q = vload4(0, (__global const uint*)(w.p0 + e));
    h.ab = (float2)(as_float(((__global const uint*)w.p1)[e >> w.gs]),
                    L == L_I8M ? as_float(((__global const uint*)w.p2)[e >> w.gs]) : 0.0f);
    return h;
  }
  h.q = (vload4(0, (__global const uint*)(w.p0 + blk * 16)) >> (part * 4)) & 0x0F0F0F0Fu;
  if (L == L_Q4_0) {
    const float d = half_bits(((__global const ushort*)w.p1)[blk]);
    h.ab = (float2)(d, 0.0f);  // the zero point goes into the integer sum
  } else if (L == L_Q4_1 || L == L_E0M4) {
    const uint dm = ((__global const uint*)w.p1)[L == L_E0M4 ? blk >> 2 : blk];  // d | m << 16 (E0M4: per 128)
    h.ab = (float2)(half_bits(dm & 0xFFFFu), half_bits(dm >> 16));
  } else {  // L_Q4_K: (sc, mn) bytes per 32, (d, dmin) per 256, as the CPU forms them
    const uint sm = ((__global const ushort*)w.p1)[blk];
    const uint dd = ((__global const uint*)w.p2)[blk >> 3];
    h.ab = (float2)(half_bits(dd & 0xFFFFu) * (float)(sm & 0xFFu), -(half_bits(dd >> 16) * (float)(sm >> 8)));
  }
  return h;
}

// x: codes xc (row t at t * cols, 16-byte aligned) and block params xp (row t at t * cols / 32).
inline void gemv_dp4a(const int L, const int T, const Weight w, uint grp, __global const uchar* xc,
                      __global const uint2* xp, uint n, __global float* y, __local float* red) {
  const bool has_min = L == L_Q4_1 || L == L_E0M4 || L == L_Q4_K || L == L_I8M;
  float acc[DP_NR * GEMV_MAXT];
  uint rr[DP_NR];
  const uint lx = gemv_start(DP_LX, DP_NR, w, grp, rr, acc);
  const uint part = lx & 1, nb = w.cols >> 5;
  for (uint b = lx >> 1; b < nb; b += DP_LX / 2) {
    DpHalf h[DP_NR];
#pragma unroll
    for (int i = 0; i < DP_NR; ++i) h[i] = dp_load(L, w, rr[i], b, part);
    for (int t = 0; t < T; ++t) {
      if (t >= (int)n) break;
      const uint4 xq = vload4(0, (__global const uint*)(xc + (size_t)t * w.cols + (size_t)b * 32 + part * 16));
      const uint2 pr = xp[(size_t)t * nb + b];
      const float dx = as_float(pr.x);
      const int sx = as_int(pr.y << (16 - 16 * part)) >> 16;  // this half's code sum, sign-extended
      const float msx = dx * dp_i2f(sx);
#pragma unroll
      for (int i = 0; i < DP_NR; ++i) {
        int s = L == L_Q4_0 ? -8 * sx : 0;
        s = dp4a(h[i].q.x, xq.x, s);
        s = dp4a(h[i].q.y, xq.y, s);
        s = dp4a(h[i].q.z, xq.z, s);
        s = dp4a(h[i].q.w, xq.w, s);
        float a = acc[i * T + t] + (h[i].ab.x * dx) * dp_i2f(s);
        if (has_min) a += h[i].ab.y * msx;
        acc[i * T + t] = a;
      }
    }
  }
  gemv_finish(DP_LX, DP_NR, T, acc, w, grp, n, y, red, 1.0f, 0);
}

// gemvq_NAME_T: one weight; gemvqm_NAME_T: up to three sharing x, as matmul_gemv.cl's gemvm_*
// (groups [0, g1) weight 0's, [g1, g2) weight 1's, the rest weight 2's: each row's sums are the
// single launch's bit for bit). x: codes at (xc, xc_off), block params at (xp, xp_off).
#define GEMVQ(name, L, T)                                                                                  \
  __kernel __attribute__((reqd_work_group_size(DP_LX * DP_LY, 1, 1))) void gemvq_##name##_##T(               \
      WARGS, __global const uchar* xc, ulong xc_off, __global const uint2* xp, ulong xp_off, uint n,          \
      __global float* y, ulong y_off) {                                                                       \
    __local float red[DP_LY * DP_NR * T * DP_LX];                                                             \
    WMAKE(w);                                                                                                 \
    gemv_dp4a(L, T, w, get_group_id(0), CVIEW(uchar, xc, xc_off), CVIEW(uint2, xp, xp_off), n,                \
              VIEW(float, y, y_off), red);                                                                    \
  }
#define GEMVQ_MULTI(name, L, T)                                                                            \
  __kernel __attribute__((reqd_work_group_size(DP_LX * DP_LY, 1, 1))) void gemvqm_##name##_##T(              \
      WARGS_M(0), WARGS_M(1), WARGS_M(2), uint cols, uint kp, uint gs, __global const uchar* xc,              \
      ulong xc_off, __global const uint2* xp, ulong xp_off, uint n, uint g1, uint g2) {                       \
    __local float red[DP_LY * DP_NR * T * DP_LX];                                                             \
    Weight w;                                                                                                 \
    __global float* y;                                                                                        \
    uint grp = get_group_id(0);                                                                      \
    WPICK_GROUP(grp, g1, g2, cols, kp, gs);                                                          \
    gemv_dp4a(L, T, w, grp, CVIEW(uchar, xc, xc_off), CVIEW(uint2, xp, xp_off), n, y, red);                  \
  }
#define GEMVQ_ALL(name, L) GEMVQ(name, L, 1) GEMVQ(name, L, 4) GEMVQ_MULTI(name, L, 1) GEMVQ_MULTI(name, L, 4)

GEMVQ_ALL(q4_0, L_Q4_0)
GEMVQ_ALL(q4_1, L_Q4_1)
GEMVQ_ALL(q4_k, L_Q4_K)
GEMVQ_ALL(i8, L_I8)
GEMVQ_ALL(i8m, L_I8M)
GEMVQ_ALL(e0m4, L_E0M4)
