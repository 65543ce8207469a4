// SPDX-License-Identifier: Apache-2.0
// Int8 GEMM for prefill on quantized activations (llama.cpp's MMQ idea): y = x W^T where x is
// the CPU's Q8 quantization of the input (act_quant.cl's act_q8i: int8 codes, a scale d and
// s = d * sum(q) per 32) and W a layout whose 32-element blocks are integer codes with a scale
// a and a min b (value = a q + b): Q4_0 (codes q - 8, b = 0), Q4_1, Q4_K (a = d sc, b = -dmin
// mn per 32), int8 with a scale (Q8_0, Q5_0) or a scale and min (Q5_1, Q5_K) per 32. Per block
// and (row, token), as the CPU's integer dot products:
//   y += float(sum q_w q_x) * (a * d_x) + b * s_x,
// the integer sum exact (one mma.sync.m16n8k32 s8 per 16 x 8 tile and block on NVIDIA, or the
// same sums per item elsewhere). Against the f16 tensor-core GEMM (matmul_mma.cl) it reads a
// quarter of the activation bytes, needs no conversion to f16 per tile, and multiplies exactly
// what the CPU multiplies.
//
// A work-group of 8 warps computes a 128 rows x 128 tokens tile of y; warp (wm, wn) a 64 x 32
// block of 4 x 4 tiles of 16 rows x 8 tokens. Per K-step of MQ_NB blocks the group stages W's
// and x's codes in local memory as int8 words in element order (a row's block: 8 words), with
// the blocks' a, b, d_x, s_x; the next step's bytes are in flight in registers while the current
// one is multiplied (two local buffers, one barrier a step).
//
// mma.sync.m16n8k32.row.col.s32.s8.s8.s32 fragments (lane = 4 g + t): A {row g, k 4t..},
// {row g + 8, k 4t..}, {row g, k 16 + 4t..}, {row g + 8, k 16 + 4t..}; B {k 4t.., col g},
// {k 16 + 4t.., col g}; C {row g, cols 2t, 2t + 1}, {row g + 8, cols 2t, 2t + 1}. The order of k
// in a dot product is free while A and B agree, so lane t's "k 4t.." word is a row's word 2t and
// its "k 16 + 4t.." word is word 2t + 1: one 64-bit load each, all 32 banks per phase.

#ifndef MQ_NB
#define MQ_NB 4  // 32-element blocks per K-step: 2 or 4 (4: 80 KB of local memory, ~10 % faster on an H100)
#endif
#define MQ_BM 128
#define MQ_BN 128
#define MQ_NT 256
#define MQ_LOADS (MQ_NB * MQ_BM / MQ_NT)  // (row or token, block) pairs an item stages per step

typedef struct {
  uint w[MQ_NB][MQ_BM][8];  // codes, int8 words
  uint x[MQ_NB][MQ_BN][8];
  float wa[MQ_NB][MQ_BM], wb[MQ_NB][MQ_BM];  // a weight block's scale and min
  float xd[MQ_NB][MQ_BN], xs[MQ_NB][MQ_BN];  // an input block's d and s
} MqTile;

// One (row, block) of W or (token, block) of x as loaded: 32 code bytes (16 for 4 bits) and the
// scale bits, decoded only when stored (a use would wait on the load).
typedef struct {
  uint4 c0, c1;
  uint s, m;
} MqRaw;

inline MqRaw mq_fetch_w(const int L, const Weight w, uint r, uint b) {
  MqRaw v;
  v.c0 = v.c1 = (uint4)(0u);
  v.s = v.m = 0u;
  if (b >= (w.cols >> 5)) return v;  // past the computed columns: zero codes and scales
  const size_t blk = (size_t)r * (w.kp >> 5) + b;
  if (L == L_Q4_0 || L == L_Q4_1 || L == L_Q4_K) {
    v.c0 = vload4(0, (__global const uint*)(w.p0 + blk * 16));
    if (L == L_Q4_0) v.s = ((__global const ushort*)w.p1)[blk];
    if (L == L_Q4_1) v.s = ((__global const uint*)w.p1)[blk];  // d | m << 16
    if (L == L_Q4_K) {
      v.s = ((__global const ushort*)w.p1)[blk];     // sc | mn << 8
      v.m = ((__global const uint*)w.p2)[blk >> 3];  // d | dmin << 16
    }
    return v;
  }
  // L_I8 / L_I8M with a scale per 32 (gs 5): the codes of block blk are bytes 32 blk ..
  __global const uint* p = (__global const uint*)(w.p0 + blk * 32);
  v.c0 = vload4(0, p);
  v.c1 = vload4(1, p);
  v.s = ((__global const uint*)w.p1)[blk];
  if (L == L_I8M) v.m = ((__global const uint*)w.p2)[blk];
  return v;
}

inline MqRaw mq_fetch_x(__global const uchar* xc, __global const float* xd, __global const float* xs, uint cols,
                        uint tok, uint b) {
  MqRaw v;
  v.c0 = v.c1 = (uint4)(0u);
  v.s = v.m = 0u;
  const uint nb = cols >> 5;
  if (b >= nb) return v;
  __global const uint* p = (__global const uint*)(xc + (size_t)tok * cols + (size_t)b * 32);
  v.c0 = vload4(0, p);
  v.c1 = vload4(1, p);
  v.s = as_uint(xd[(size_t)tok * nb + b]);
  v.m = as_uint(xs[(size_t)tok * nb + b]);
  return v;
}

// A weight block's codes as int8 words in element order, and its (a, b).
inline void mq_store_w(const int L, const MqRaw v, __local uint* codes, __local float* a, __local float* b) {
  if (L == L_Q4_0 || L == L_Q4_1 || L == L_Q4_K) {
    // Byte j holds element j in its low nibble and j + 16 in its high one.
    uint4 lo = v.c0 & 0x0F0F0F0Fu, hi = (v.c0 >> 4) & 0x0F0F0F0Fu;
    if (L == L_Q4_0) {  // q - 8 in every byte at once, no borrow between bytes
      lo = ((lo | 0x80808080u) - 0x08080808u) ^ 0x80808080u;
      hi = ((hi | 0x80808080u) - 0x08080808u) ^ 0x80808080u;
    }
    vstore4(lo, 0, codes);
    vstore4(hi, 1, codes);
  } else {
    vstore4(v.c0, 0, codes);
    vstore4(v.c1, 1, codes);
  }
  if (L == L_Q4_0) {
    *a = half_bits(v.s);
    *b = 0.0f;
  }
  if (L == L_Q4_1) {
    *a = half_bits(v.s & 0xFFFFu);
    *b = half_bits(v.s >> 16);
  }
  if (L == L_Q4_K) {
    *a = half_bits(v.m & 0xFFFFu) * (float)(v.s & 0xFFu);
    *b = -(half_bits(v.m >> 16) * (float)(v.s >> 8));
  }
  if (L == L_I8) {
    *a = as_float(v.s);
    *b = 0.0f;
  }
  if (L == L_I8M) {
    *a = as_float(v.s);
    *b = as_float(v.m);
  }
}

#ifdef LLMSVC_PTX_MMA
// Fragments: A {row g word 2t, row g + 8 word 2t, row g word 2t + 1, row g + 8 word 2t + 1}, B
// {token g word 2t, word 2t + 1}.
typedef uint4 MqA;
typedef uint2 MqB;
inline MqA mq_load_a(__local const uint* A, uint g, uint t) {
  const uint2 lo = vload2(0, A + g * 8 + 2 * t), hi = vload2(0, A + (g + 8) * 8 + 2 * t);
  return (uint4)(lo.x, hi.x, lo.y, hi.y);
}
inline MqB mq_load_b(__local const uint* B, uint g, uint t) { return vload2(0, B + g * 8 + 2 * t); }
#define MQ_MMA(c, a, b, g, t)                                                                        \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "     \
               "{%8,%9}, {%0,%1,%2,%3};"                                                           \
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])                                     \
               : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y))
#else
// Elsewhere each item sums its own four C elements from the staged tiles (the same integers).
typedef __local const uint* MqA;
typedef __local const uint* MqB;
inline MqA mq_load_a(__local const uint* A, uint g, uint t) { return A; }
inline MqB mq_load_b(__local const uint* B, uint g, uint t) { return B; }
inline int mq_dot32(__local const uint* a, __local const uint* b) {
  int s = 0;
  for (int u = 0; u < 8; ++u) {
    const char4 x = as_char4(a[u]), y = as_char4(b[u]);
    s += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
  }
  return s;
}
#define MQ_MMA(c, a, b, g, t)                                   \
  do {                                                          \
    c[0] += mq_dot32(a + (g) * 8, b + 2 * (t) * 8);             \
    c[1] += mq_dot32(a + (g) * 8, b + (2 * (t) + 1) * 8);       \
    c[2] += mq_dot32(a + ((g) + 8) * 8, b + 2 * (t) * 8);       \
    c[3] += mq_dot32(a + ((g) + 8) * 8, b + (2 * (t) + 1) * 8); \
  } while (0)
#endif

// An int32 block sum as a float without a conversion instruction: |c| < 2^22 (32 products of
// at most 128 x 127) sits in the mantissa of 1.5 * 2^23.
inline float mq_i2f(int c) { return as_float(c + 0x4B400000) - 12582912.0f; }

// One K-step's products from one staged tile into the warp's accumulators.
__attribute__((always_inline)) inline void mq_step(const int L, __local const MqTile* T, uint wm, uint wn, uint g,
                                                   uint t, float acc[4][4][4]) {
  const bool has_min = L == L_Q4_1 || L == L_Q4_K || L == L_I8M;
#pragma unroll
  for (int kb = 0; kb < MQ_NB; ++kb) {
    __local const uint* A = &T->w[kb][wm * 64][0];
    __local const uint* B = &T->x[kb][wn * 32][0];
    float xd[4][2], xs[4][2];
    MqB bf[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint tok = wn * 32 + 8 * j + 2 * t;
      xd[j][0] = T->xd[kb][tok];
      xd[j][1] = T->xd[kb][tok + 1];
      xs[j][0] = has_min ? T->xs[kb][tok] : 0.0f;
      xs[j][1] = has_min ? T->xs[kb][tok + 1] : 0.0f;
      bf[j] = mq_load_b(B + 64 * j, g, t);
    }
    // Each tile row's mma, then the scaling of its sums. (Issuing every row's mma first, or
    // the next row's before this one's scaling, measured the same on an H100.)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const MqA af = mq_load_a(A + 128 * i, g, t);
      int c[4][4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0;
        MQ_MMA(c[j], af, bf[j], g, t);
      }
      const uint row = wm * 64 + 16 * i + g;
      const float wa[2] = {T->wa[kb][row], T->wa[kb][row + 8]};
      const float wb[2] = {has_min ? T->wb[kb][row] : 0.0f, has_min ? T->wb[kb][row + 8] : 0.0f};
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int rr = e >> 1, cc = e & 1;
          float v = fma(mq_i2f(c[j][e]), wa[rr] * xd[j][cc], acc[i][j][e]);
          if (has_min) v = fma(wb[rr], xs[j][cc], v);
          acc[i][j][e] = v;
        }
    }
  }
}

// The tile's loads of step s: item lid stages pairs p = lid + MQ_NT k (row or token p / MQ_NB,
// block p % MQ_NB), rows and tokens past the end clamped (never written).
__attribute__((always_inline)) inline void mq_fetch(const int L, const Weight w, __global const uchar* xc,
                                                    __global const float* xd, __global const float* xs, uint n,
                                                    uint r0, uint t0, uint s, uint lid, MqRaw* rw, MqRaw* rx) {
#pragma unroll
  for (int k = 0; k < MQ_LOADS; ++k) {
    const uint p = lid + MQ_NT * k, b = s * MQ_NB + p % MQ_NB;
    rw[k] = mq_fetch_w(L, w, min(r0 + p / MQ_NB, w.rows - 1), b);
    rx[k] = mq_fetch_x(xc, xd, xs, w.cols, min(t0 + p / MQ_NB, n - 1), b);
  }
}

__attribute__((always_inline)) inline void mq_store(const int L, const MqRaw* rw, const MqRaw* rx, uint lid,
                                                    __local MqTile* T) {
#pragma unroll
  for (int k = 0; k < MQ_LOADS; ++k) {
    const uint p = lid + MQ_NT * k, i = p / MQ_NB, kb = p % MQ_NB;
    mq_store_w(L, rw[k], &T->w[kb][i][0], &T->wa[kb][i], &T->wb[kb][i]);
    vstore4(rx[k].c0, 0, &T->x[kb][i][0]);
    vstore4(rx[k].c1, 1, &T->x[kb][i][0]);
    T->xd[kb][i] = as_float(rx[k].s);
    T->xs[kb][i] = as_float(rx[k].m);
  }
}

// Work-group (i, j, z) computes the tile at rows 128 i, tokens 128 j over K-steps
// [z split_steps, (z + 1) split_steps): with one split into y, with several into y's z-th
// partial (n x rows floats each; mmq_sum_splits adds them).
__attribute__((always_inline)) inline void gemm_mmq(const int L, const Weight w, __global const uchar* xc,
                                                    __global const float* xd, __global const float* xs, uint n,
                                                    uint split_steps, __global float* y, __local MqTile* tiles) {
  const uint lid = get_local_id(0);
  const uint r0 = get_group_id(0) * MQ_BM, t0 = get_group_id(1) * MQ_BN;
  const uint s0 = get_group_id(2) * split_steps;
  const uint steps = min(((w.cols >> 5) + MQ_NB - 1) / MQ_NB, s0 + split_steps);
  y += (size_t)get_group_id(2) * n * w.rows;
  const uint lane = lid & 31, warp = lid >> 5;
  const uint g = lane >> 2, t = lane & 3;
  const uint wm = warp % 2, wn = warp / 2;
  // A warp whose 32 tokens or 64 rows all lie past the end skips its products (their sums are
  // never stored): the same for a whole warp on a GPU; on a CPU device (PoCL), where a group's
  // items run as loops, a prompt of 32 tokens or fewer then costs a quarter of a full tile.
  const bool live = t0 + wn * 32 < n && r0 + wm * 64 < w.rows;
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  MqRaw rw[MQ_LOADS], rx[MQ_LOADS];
  mq_fetch(L, w, xc, xd, xs, n, r0, t0, s0, lid, rw, rx);
  mq_store(L, rw, rx, lid, &tiles[0]);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = s0; s < steps; ++s) {
    const bool more = s + 1 < steps;
    if (more) mq_fetch(L, w, xc, xd, xs, n, r0, t0, s + 1, lid, rw, rx);
    if (live) mq_step(L, &tiles[(s - s0) & 1], wm, wn, g, t, acc);
    // The other buffer was last read in step s - 1, before the barrier that ended it.
    if (more) mq_store(L, rw, rx, lid, &tiles[(s - s0 + 1) & 1]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  store_warp_tiles(acc, r0 + wm * 64, t0 + wn * 32, g, t, w.rows, n, y);
}

// gemm_mmq_NAME: x given as act_q8i's codes (xc), scales (xd) and sums (xs).
#define GEMM_MMQ(name, L)                                                                              \
  __kernel __attribute__((reqd_work_group_size(MQ_NT, 1, 1))) void gemm_mmq_##name(                   \
      WARGS, __global const uchar* xc, ulong xc_off, __global const float* xd, ulong xd_off,            \
      __global const float* xs, ulong xs_off, uint n, uint split_steps, __global float* y, ulong y_off) { \
    __local MqTile tiles[2];                                                                           \
    WMAKE(w);                                                                                          \
    gemm_mmq(L, w, CVIEW(uchar, xc, xc_off), CVIEW(float, xd, xd_off), CVIEW(float, xs, xs_off), n,    \
             split_steps, VIEW(float, y, y_off), tiles);                                               \
  }

GEMM_MMQ(q4_0, L_Q4_0)
GEMM_MMQ(q4_1, L_Q4_1)
GEMM_MMQ(q4_k, L_Q4_K)
GEMM_MMQ(i8, L_I8)
GEMM_MMQ(i8m, L_I8M)

// y[i] = the sum of the splits' partials p[z][i], z = 0 .. splits - 1 in order (the same bits
// at every launch), for i < count.
__kernel void mmq_sum_splits(__global const float* p, uint splits, uint count, __global float* yb, ulong yo) {
  const uint i = get_global_id(0);
  if (i >= count) return;
  float v = p[i];
  for (uint z = 1; z < splits; ++z) v += p[(size_t)z * count + i];
  VIEW(float, yb, yo)[i] = v;
}
