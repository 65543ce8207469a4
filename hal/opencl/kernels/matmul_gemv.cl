// SPDX-License-Identifier: Apache-2.0
// GEMV: y[t] = W x[t] for a few tokens (decode), weights read once for all of them.
//
// A work-group of LX x LY work-items covers LY * NR rows: the LX items of one line walk the
// blocks of NR rows side by side, so one read of x serves NR rows, and their partial sums meet
// in local memory at the end (no sub-groups on the target drivers). Up to T tokens are unrolled
// with a guard, so a weight's codes are loaded once for every token.
//
// The 4-bit layouts have their own geometry (GEMV_LX, _LY, _NR) and split each 32-element block
// over 32 / GEMV_S items, each taking S consecutive elements. That is for x: with one item per
// block (S = 32) the 32 items of a warp read x 128 bytes apart, 32 cache lines per load; with
// S = 16 a warp's loads of x cover 2 KB in half as many lines, and on an H200 the one-token
// Q4_0 GEMV ran 1.3-1.5x faster for that alone. Items load the codes of GEMV_U steps before
// using any (a knob: U = 2 measured no better than 1 there).
// Every other layout keeps one 8-element group per item and the fixed GEMVA_* geometry.
// Lines and their reduction: gemv_lines.cl (built before this file).

#ifndef GEMV_LX
#define GEMV_LX 64
#endif
#ifndef GEMV_LY
#define GEMV_LY 2
#endif
#ifndef GEMV_NR
#define GEMV_NR 2
#endif
#ifndef GEMV_S
#define GEMV_S 16
#endif
#ifndef GEMV_U
#define GEMV_U 1
#endif
#ifndef GEMV_MAGIC
#define GEMV_MAGIC 1
#endif
#define GEMVA_LX 32
#define GEMVA_LY 4
#define GEMVA_NR 2
// Words of codes an item reads per block and row: S nibbles, from S / 4 words (S = 32: all 8
// nibbles of 4 words).
#define GEMV_WORDS (GEMV_S == 32 ? 4 : GEMV_S / 4)

// The 4-bit layouts: per 32-element block, sum(w * x) = a * sum(q * x) + b * sum(x) with (a, b)
// the block's (d, -8d) for Q4_0, (d, m) for Q4_1, its 128-group's (d, m) for E0M4 and
// (d*sc, -dmin*mn) for Q4_K; sum(x) is shared by every row of the work-item.
inline float2 q4_ab(const int L, const Weight w, size_t blk) {
  if (L == L_Q4_0) {
    const float d = vload_half(blk, (__global const half*)w.p1);
    return (float2)(d, -8.0f * d);
  }
  if (L == L_Q4_1) return vload_half2(blk, (__global const half*)w.p1);
  if (L == L_E0M4) return vload_half2(blk >> 2, (__global const half*)w.p1);  // a pair per 128
  const uchar2 sm = vload2(blk, w.p1);
  const float2 dd = vload_half2(blk >> 3, (__global const half*)w.p2);
  return (float2)(dd.x * (float)sm.x, -(dd.y * (float)sm.y));
}

// Four nibbles, one in the low bits of each byte of a word (elements in byte order), and the
// high ones of the same word, as floats.
#if GEMV_MAGIC
// Each nibble goes into the top mantissa bits of 1.0f (1 + q/16: a shift and a mask, no int to
// float conversion, which runs at a quarter of the FMA rate on NVIDIA), so the dot product is
// sum(x) + sum(q * x) / 16.
#define Q4_F(w, s) as_float((((s) >= 0 ? (w) << (s) : (w) >> -(s)) & 0x00780000u) | 0x3F800000u)
#define Q4_LO(w) (float4)(Q4_F(w, 19), Q4_F(w, 11), Q4_F(w, 3), Q4_F(w, -5))
#define Q4_HI(w) (float4)(Q4_F(w, 15), Q4_F(w, 7), Q4_F(w, -1), Q4_F(w, -9))
#define Q4_FIX(s, sx) (((s) - (sx)) * 16.0f)
#else
#define Q4_LO(w) convert_float4(as_uchar4((w) & 0x0F0F0F0Fu))
#define Q4_HI(w) convert_float4(as_uchar4(((w) >> 4) & 0x0F0F0F0Fu))
#define Q4_FIX(s, sx) (s)
#endif

// The item's S codes of a block: words of the block's 16 bytes, shifted so its nibbles are the
// low ones of each byte. In Q4_0's order byte j holds elements j (low) and j + 16 (high), so
// part p's S consecutive elements S p .. are nibble half (S p) / 16 of bytes (S p) % 16 ...
typedef struct {
  uint v[GEMV_WORDS];
} Q4Codes;

inline Q4Codes q4_load(const Weight w, size_t blk, uint part) {
  Q4Codes c;
  __global const uint* p = (__global const uint*)(w.p0 + blk * 16);
#if GEMV_S == 32
  const uint4 q = *(__global const uint4*)p;
  c.v[0] = q.s0;
  c.v[1] = q.s1;
  c.v[2] = q.s2;
  c.v[3] = q.s3;
#else
  const uint first = (GEMV_S * part) % 16, shift = (GEMV_S * part) / 16 * 4;
#if GEMV_S == 16
  const uint4 q = *(__global const uint4*)p >> shift;
  c.v[0] = q.s0;
  c.v[1] = q.s1;
  c.v[2] = q.s2;
  c.v[3] = q.s3;
#elif GEMV_S == 8
  const uint2 q = *(__global const uint2*)(p + first / 4) >> shift;
  c.v[0] = q.s0;
  c.v[1] = q.s1;
#else
  c.v[0] = p[first / 4] >> shift;
#endif
#endif
  return c;
}

// sum(q * x) over the item's S elements of a block, x[k] its k-th 4 of them (S = 32: low
// nibbles of word k are elements 4k .., the high ones 16 + 4k ..).
inline float q4_dot(const Q4Codes c, const float4* x, float sx) {
  float s = 0.0f;
#if GEMV_S == 32
  for (int k = 0; k < 4; ++k) s += dot(Q4_LO(c.v[k]), x[k]) + dot(Q4_HI(c.v[k]), x[4 + k]);
#else
  for (int k = 0; k < GEMV_WORDS; ++k) s += dot(Q4_LO(c.v[k]), x[k]);
#endif
  return Q4_FIX(s, sx);
}

// x must be 16-byte aligned (the host checks): rows of x are whole blocks of 32 floats.
inline void gemv_q4(const int L, const int T, const Weight w, uint grp, __global const float* x, uint n,
                    __global float* y, __local float* red, float alpha, int add) {
  float acc[GEMV_NR * GEMV_MAXT];
  uint rr[GEMV_NR];
  const uint lx = gemv_start(GEMV_LX, GEMV_NR, w, grp, rr, acc);
  // A line's step covers LX * S / 32 consecutive blocks; this item takes part `part` of one.
  const uint per_block = 32 / GEMV_S, step = GEMV_LX / per_block;
  const uint part = lx % per_block, first = lx / per_block;
  const uint nb = w.cols >> 5, stride = w.kp >> 5;  // blocks computed, blocks a row holds
  for (uint b0 = first; b0 < nb; b0 += step * GEMV_U) {
    // Every load of the U steps first, then the arithmetic: the loads overlap in DRAM.
    Q4Codes c[GEMV_U][GEMV_NR];
    float2 ab[GEMV_U][GEMV_NR];
#pragma unroll
    for (int u = 0; u < GEMV_U; ++u) {
      const uint b = min(b0 + u * step, nb - 1);  // past the end: read, never summed
#pragma unroll
      for (int i = 0; i < GEMV_NR; ++i) {
        const size_t blk = (size_t)rr[i] * stride + b;
        c[u][i] = q4_load(w, blk, part);
        ab[u][i] = q4_ab(L, w, blk);
      }
    }
#pragma unroll
    for (int u = 0; u < GEMV_U; ++u) {
      const uint b = b0 + u * step;
      if (b >= nb) break;
      for (int t = 0; t < T; ++t) {
        if (t >= (int)n) break;
        const __global float4* xp =
            (__global const float4*)(x + (size_t)t * w.cols + (size_t)b * 32 + part * GEMV_S);
        float4 xv[GEMV_S / 4];
        float4 s4 = (float4)(0.0f);
        for (int k = 0; k < GEMV_S / 4; ++k) {
          xv[k] = xp[k];
          s4 += xv[k];
        }
        const float sx = (s4.x + s4.y) + (s4.z + s4.w);
        for (int i = 0; i < GEMV_NR; ++i)
          acc[i * T + t] += ab[u][i].x * q4_dot(c[u][i], xv, sx) + ab[u][i].y * sx;
      }
    }
  }
  gemv_finish(GEMV_LX, GEMV_NR, T, acc, w, grp, n, y, red, alpha, add);
}

// Every other layout: 8 dequantized elements per item and row at a time.
inline void gemv_any(const int L, const int T, const Weight w, uint grp, __global const float* x, uint n,
                     __global float* y, __local float* red, float alpha, int add) {
  float acc[GEMVA_NR * GEMV_MAXT];
  uint rr[GEMVA_NR];
  const uint lx = gemv_start(GEMVA_LX, GEMVA_NR, w, grp, rr, acc);
  const uint groups = w_groups(w);
  for (uint g = lx; g < groups; g += GEMVA_LX) {
    float8 wv[GEMVA_NR];
    for (int i = 0; i < GEMVA_NR; ++i) wv[i] = deq8(L, w, rr[i], g);
    for (int t = 0; t < T; ++t) {
      if (t >= (int)n) break;
      const float8 xv = x_load8(x + (size_t)t * w.cols, g * 8, w.cols);
      for (int i = 0; i < GEMVA_NR; ++i) acc[i * T + t] += dot8(wv[i], xv);
    }
  }
  gemv_finish(GEMVA_LX, GEMVA_NR, T, acc, w, grp, n, y, red, alpha, add);
}

// gemv_NAME_T: up to T tokens (n <= T), over work-groups of LX x LY items.
#define GEMV(name, L, T, body, LX, LY, NR)                                                           \
  __kernel __attribute__((reqd_work_group_size(LX * LY, 1, 1))) void gemv_##name##_##T(              \
      WARGS, __global const float* x, ulong x_off, uint n, __global float* y, ulong y_off) {         \
    __local float red[LY * NR * T * LX];                                                             \
    WMAKE(w);                                                                                        \
    body(L, T, w, get_group_id(0), CVIEW(float, x, x_off), n, VIEW(float, y, y_off), red, 1.0f, 0); \
  }

// gemvm_NAME_T: up to three weights of one layout and width that share x (Q, K and V; gate and
// up) in one launch, so a decode step pays one launch's fixed cost for them, not three. Groups
// [0, g1) run weight 0's rows, [g1, g2) weight 1's, [g2, ..) weight 2's; a group's weight is
// uniform across its items, and it runs the single-weight body on it, so each row's sums are
// the single GEMV's bit for bit. A two-weight launch passes g2 past its last group (WARGS_M,
// WPICK_M: gemv_lines.cl).
#define GEMV_MULTI(name, L, T, body, LX, LY, NR)                                                     \
  __kernel __attribute__((reqd_work_group_size(LX * LY, 1, 1))) void gemvm_##name##_##T(             \
      WARGS_M(0), WARGS_M(1), WARGS_M(2), uint cols, uint kp, uint gs, __global const float* x,      \
      ulong x_off, uint n, uint g1, uint g2) {                                                       \
    __local float red[LY * NR * T * LX];                                                             \
    Weight w;                                                                                        \
    __global float* y;                                                                               \
    uint grp = get_group_id(0);                                                                      \
    WPICK_GROUP(grp, g1, g2, cols, kp, gs);                                                          \
    body(L, T, w, grp, CVIEW(float, x, x_off), n, y, red, 1.0f, 0);                                  \
  }

#define GEMV_ANY(name, L)                                       \
  GEMV(name, L, 1, gemv_any, GEMVA_LX, GEMVA_LY, GEMVA_NR)       \
  GEMV(name, L, 4, gemv_any, GEMVA_LX, GEMVA_LY, GEMVA_NR)       \
  GEMV_MULTI(name, L, 1, gemv_any, GEMVA_LX, GEMVA_LY, GEMVA_NR) \
  GEMV_MULTI(name, L, 4, gemv_any, GEMVA_LX, GEMVA_LY, GEMVA_NR)
#define GEMV_Q4(name, L)                                      \
  GEMV(name, L, 1, gemv_q4, GEMV_LX, GEMV_LY, GEMV_NR)       \
  GEMV(name, L, 4, gemv_q4, GEMV_LX, GEMV_LY, GEMV_NR)       \
  GEMV_MULTI(name, L, 1, gemv_q4, GEMV_LX, GEMV_LY, GEMV_NR) \
  GEMV_MULTI(name, L, 4, gemv_q4, GEMV_LX, GEMV_LY, GEMV_NR)

GEMV_ANY(f32, L_F32)
GEMV_ANY(f16, L_F16)
GEMV_ANY(bf16, L_BF16)

// gemva_NAME_T: y += alpha * (w x) for the float layouts, each sum as gemv_NAME_T makes it: a
// LoRA branch's B product, scaled and added to its base matmul's output in the one launch.
#define GEMV_ADD(name, L, T)                                                                          \
  __kernel __attribute__((reqd_work_group_size(GEMVA_LX * GEMVA_LY, 1, 1))) void gemva_##name##_##T(  \
      WARGS, __global const float* x, ulong x_off, uint n, __global float* y, ulong y_off, float alpha) { \
    __local float red[GEMVA_LY * GEMVA_NR * T * GEMVA_LX];                                            \
    WMAKE(w);                                                                                         \
    gemv_any(L, T, w, get_group_id(0), CVIEW(float, x, x_off), n, VIEW(float, y, y_off), red, alpha, 1); \
  }
GEMV_ADD(f32, L_F32, 1)
GEMV_ADD(f32, L_F32, 4)
GEMV_ADD(f16, L_F16, 1)
GEMV_ADD(f16, L_F16, 4)
GEMV_ADD(bf16, L_BF16, 1)
GEMV_ADD(bf16, L_BF16, 4)

// y += alpha * p over n floats, rounded as the scale and add ops round: a LoRA branch's B
// product (made by the GEMM) scaled and added to its base matmul's output.
__kernel void scaled_add(__global float* yb, ulong yo, __global const float* pb, ulong po, ulong n, float alpha) {
  const size_t i = get_global_id(0);
  if (i >= n) return;
  volatile float s = alpha * CVIEW(float, pb, po)[i];  // no mad
  VIEW(float, yb, yo)[i] = VIEW(float, yb, yo)[i] + s;
}
GEMV_Q4(q4_0, L_Q4_0)
GEMV_Q4(q4_1, L_Q4_1)
GEMV_Q4(q4_k, L_Q4_K)
GEMV_ANY(i8, L_I8)
GEMV_ANY(i8m, L_I8M)
GEMV_Q4(e0m4, L_E0M4)
