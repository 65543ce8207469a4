// SPDX-License-Identifier: Apache-2.0
// GEMV: y[t] = W x[t] for a few tokens (decode), weights read once for all of them.
//
// A work-group of GEMV_LX x GEMV_LY work-items covers GEMV_LY * GEMV_NR rows: the GEMV_LX items
// of one line walk a row's blocks side by side (consecutive items read consecutive 16 bytes of
// codes: coalesced), each for GEMV_NR rows at once so one read of x serves several rows; their
// partial sums meet in local memory (no sub-groups on the target drivers). Up to T tokens are
// unrolled with a guard, so a block's codes are loaded once for every token.

#ifndef GEMV_LX
#define GEMV_LX 32
#endif
#ifndef GEMV_LY
#define GEMV_LY 4
#endif
#ifndef GEMV_NR
#define GEMV_NR 2
#endif
#ifndef GEMV_MAGIC
#define GEMV_MAGIC 0
#endif
#define GEMV_WG (GEMV_LX * GEMV_LY)
#define GEMV_MAXT 4

// The item's rows (past the last: read, never written), its partial sums zeroed; returns its
// place in its line.
inline uint gemv_start(const Weight w, uint* rr, float* acc) {
  const uint ly = get_local_id(0) / GEMV_LX;
  const uint row0 = (get_group_id(0) * GEMV_LY + ly) * GEMV_NR;
  for (int i = 0; i < GEMV_NR; ++i) rr[i] = min(row0 + i, w.rows - 1);
  for (int o = 0; o < GEMV_NR * GEMV_MAXT; ++o) acc[o] = 0.0f;
  return get_local_id(0) % GEMV_LX;
}

// Sums each (row, token) partial over the line's items; item 0 of the line writes y.
inline void gemv_finish(const int T, const float* acc, const Weight w, uint n, __global float* y,
                        __local float* red) {
  const uint lx = get_local_id(0) % GEMV_LX, ly = get_local_id(0) / GEMV_LX;
  const uint row0 = (get_group_id(0) * GEMV_LY + ly) * GEMV_NR;
  __local float* mine = red + ly * GEMV_NR * T * GEMV_LX;
  for (int o = 0; o < GEMV_NR * T; ++o) mine[o * GEMV_LX + lx] = acc[o];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = GEMV_LX / 2; s > 0; s >>= 1) {
    if (lx < s) {
      for (int o = 0; o < GEMV_NR * T; ++o) mine[o * GEMV_LX + lx] += mine[o * GEMV_LX + lx + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lx == 0) {
    for (int i = 0; i < GEMV_NR; ++i) {
      const uint r = row0 + i;
      if (r >= w.rows) break;
      for (int t = 0; t < T; ++t) {
        if (t < (int)n) y[(size_t)t * w.rows + r] = mine[(i * T + t) * GEMV_LX];
      }
    }
  }
}

// The 4-bit layouts: per 32-element block, sum(w * x) = a * sum(q * x) + b * sum(x) with (a, b)
// the block's (d, -8d) for Q4_0, (d, m) for Q4_1 and (d*sc, -dmin*mn) for Q4_K; sum(x) is shared
// by every row of the work-item.
inline float2 q4_ab(const int L, const Weight w, size_t blk) {
  if (L == L_Q4_0) {
    const float d = vload_half(blk, (__global const half*)w.p1);
    return (float2)(d, -8.0f * d);
  }
  if (L == L_Q4_1) return vload_half2(blk, (__global const half*)w.p1);
  const uchar2 sm = vload2(blk, w.p1);
  const float2 dd = vload_half2(blk >> 3, (__global const half*)w.p2);
  return (float2)(dd.x * (float)sm.x, -(dd.y * (float)sm.y));
}

// sum(q * x) over a block: word k of the codes holds elements 4k .. 4k+3 (low nibbles) and
// 16 + 4k .. (high nibbles).
#if GEMV_MAGIC
// Each nibble goes into the top mantissa bits of 1.0f (1 + q/16: a shift and a mask, no int to
// float conversion, which runs at a quarter of the FMA rate on NVIDIA), so the dot product is
// sum(x) + sum(q * x) / 16.
#define Q4_F(w, s) as_float((((s) >= 0 ? (w) << (s) : (w) >> -(s)) & 0x00780000u) | 0x3F800000u)
#define Q4_LO(w) (float4)(Q4_F(w, 19), Q4_F(w, 11), Q4_F(w, 3), Q4_F(w, -5))
#define Q4_HI(w) (float4)(Q4_F(w, 15), Q4_F(w, 7), Q4_F(w, -1), Q4_F(w, -9))
inline float q4_dot(uint4 c, const float4* x, float sx) {
  float s = dot(Q4_LO(c.s0), x[0]) + dot(Q4_HI(c.s0), x[4]);
  s += dot(Q4_LO(c.s1), x[1]) + dot(Q4_HI(c.s1), x[5]);
  s += dot(Q4_LO(c.s2), x[2]) + dot(Q4_HI(c.s2), x[6]);
  s += dot(Q4_LO(c.s3), x[3]) + dot(Q4_HI(c.s3), x[7]);
  return (s - sx) * 16.0f;
}
#else
inline float q4_dot(uint4 c, const float4* x, float sx) {
  const uint m = 0x0F0F0F0Fu;
  (void)sx;
  float s = dot(convert_float4(as_uchar4(c.s0 & m)), x[0]) + dot(convert_float4(as_uchar4((c.s0 >> 4) & m)), x[4]);
  s += dot(convert_float4(as_uchar4(c.s1 & m)), x[1]) + dot(convert_float4(as_uchar4((c.s1 >> 4) & m)), x[5]);
  s += dot(convert_float4(as_uchar4(c.s2 & m)), x[2]) + dot(convert_float4(as_uchar4((c.s2 >> 4) & m)), x[6]);
  s += dot(convert_float4(as_uchar4(c.s3 & m)), x[3]) + dot(convert_float4(as_uchar4((c.s3 >> 4) & m)), x[7]);
  return s;
}
#endif

// x must be 16-byte aligned (the host checks): rows of x are whole blocks of 32 floats.
inline void gemv_q4(const int L, const int T, const Weight w, __global const float* x, uint n, __global float* y,
                    __local float* red) {
  float acc[GEMV_NR * GEMV_MAXT];
  uint rr[GEMV_NR];
  const uint lx = gemv_start(w, rr, acc);
  const uint nb = w.cols >> 5;
  for (uint b = lx; b < nb; b += GEMV_LX) {
    uint4 c[GEMV_NR];
    float2 ab[GEMV_NR];
    for (int i = 0; i < GEMV_NR; ++i) {
      const size_t blk = (size_t)rr[i] * nb + b;
      c[i] = ((__global const uint4*)w.p0)[blk];
      ab[i] = q4_ab(L, w, blk);
    }
    for (int t = 0; t < T; ++t) {
      if (t >= (int)n) break;
      const __global float4* xp = (__global const float4*)(x + (size_t)t * w.cols) + (size_t)b * 8;
      float4 xv[8];
      for (int k = 0; k < 8; ++k) xv[k] = xp[k];
      const float4 s4 = ((xv[0] + xv[1]) + (xv[2] + xv[3])) + ((xv[4] + xv[5]) + (xv[6] + xv[7]));
      const float sx = (s4.x + s4.y) + (s4.z + s4.w);
      for (int i = 0; i < GEMV_NR; ++i) acc[i * T + t] += ab[i].x * q4_dot(c[i], xv, sx) + ab[i].y * sx;
    }
  }
  gemv_finish(T, acc, w, n, y, red);
}

// Every other layout: 8 dequantized elements per item and row at a time.
inline void gemv_any(const int L, const int T, const Weight w, __global const float* x, uint n, __global float* y,
                     __local float* red) {
  float acc[GEMV_NR * GEMV_MAXT];
  uint rr[GEMV_NR];
  const uint lx = gemv_start(w, rr, acc);
  const uint groups = w.kp >> 3;
  for (uint g = lx; g < groups; g += GEMV_LX) {
    float8 wv[GEMV_NR];
    for (int i = 0; i < GEMV_NR; ++i) wv[i] = deq8(L, w, rr[i], g);
    for (int t = 0; t < T; ++t) {
      if (t >= (int)n) break;
      const float8 xv = x_load8(x + (size_t)t * w.cols, g * 8, w.cols);
      for (int i = 0; i < GEMV_NR; ++i) acc[i * T + t] += dot8(wv[i], xv);
    }
  }
  gemv_finish(T, acc, w, n, y, red);
}

// gemv_NAME_T: up to T tokens (n <= T).
#define GEMV(name, L, T, body)                                                                         \
  __kernel __attribute__((reqd_work_group_size(GEMV_WG, 1, 1))) void gemv_##name##_##T(                \
      WARGS, __global const float* x, ulong x_off, uint n, __global float* y, ulong y_off) {           \
    __local float red[GEMV_LY * GEMV_NR * T * GEMV_LX];                                                \
    WMAKE(w);                                                                                          \
    body(L, T, w, CVIEW(float, x, x_off), n, VIEW(float, y, y_off), red);                              \
  }
#define GEMV_BOTH(name, L, body) \
  GEMV(name, L, 1, body)         \
  GEMV(name, L, 4, body)

GEMV_BOTH(f32, L_F32, gemv_any)
GEMV_BOTH(f16, L_F16, gemv_any)
GEMV_BOTH(bf16, L_BF16, gemv_any)
GEMV_BOTH(q4_0, L_Q4_0, gemv_q4)
GEMV_BOTH(q4_1, L_Q4_1, gemv_q4)
GEMV_BOTH(q4_k, L_Q4_K, gemv_q4)
GEMV_BOTH(i8, L_I8, gemv_any)
GEMV_BOTH(i8m, L_I8M, gemv_any)
