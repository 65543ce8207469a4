// SPDX-License-Identifier: Apache-2.0
// Prefill attention on tensor cores (NVIDIA, inline PTX mma.sync m16n8k16: ptx.cl), with the
// numerics of attention.cl's split path: q rounded to f16, s = scale * (q . k) summed in f32,
// each row's max and sum of exp_ggml(s - max), weights rounded to f16 after normalization,
// out = sum_j p_j v_j in f32, and the exact key mass (attention.cl's attn_mass_parts: per key, the
// rows' f16 weights summed in units of 2^-24). Built after attention.cl (its KV loaders) and
// ptx.cl.
//
// It reads f16 chunks only (ClOps sends compressed ones to the split path): straight copies
// where chunks are 1 << c_shift tokens (a GPU's KV), else through attention.cl's loaders (which
// also read compressed chunks, rounded to f16 here: the CPU keeps those in f32).
// Rounding the weights needs a row's final max and sum before any weight meets V, and the
// split path pays for that with a score matrix in global memory (7B at 2,048 tokens: half the
// prefill's time). Here the scores never leave registers: a first pass over the keys finds each
// row's max and sum (Q.K^T on tensor cores, the sum rescaled as the max grows, as the split
// path combines its blocks' sums), a second computes Q.K^T again and multiplies the f16
// weights by V, also on tensor cores.
//
// A work-group of 4 warps takes AM_ROWS = 64 query rows of one kv head (row i: token i / G,
// query head hk G + i % G, as attention.cl's tiles), a warp 16 of them, with its q fragments in
// registers. Per block of AM_KEYS keys the group stages K as rows of f16 pairs and V
// transposed (channels as rows, keys as f16 pairs: the B fragments of P.V pair keys), both
// padded by 4 words a row so that a fragment load's 32 lanes hit 32 banks. A warp skips the
// tensor-core work of a block none of its rows sees (causal prefill: the blocks past the
// diagonal).

#define AM_ROWS 64
#define AM_KEYS 64
#define AM_WG 128
#define AM_KS(AD) ((AD) / 2 + 4)  // words per staged K row
#define AM_VS (AM_KEYS / 2 + 4)   // words per staged V^T row
#define AM_MAX_AD 128             // head_dim at most (the register arrays' size: AD is a literal at
                                  // every call, so their loops' guards fold away)

// Keys [lo, hi) seen by a query at position pos (attention.cl's visible_keys).
inline int2 am_visible(int pos, int n_valid, int window) {
  return (int2)(window > 0 ? max(0, pos - window + 1) : 0, min(pos + 1, n_valid));
}

// The keys some row of [r0, r1) (rows of one kv head, G a token) sees: their union's bounds.
inline int2 am_span(__global const int* positions, int r0, int r1, int G, int n_valid, int window) {
  int2 span = (int2)(INT_MAX, 0);
  for (int t = r0 / G; t <= (r1 - 1) / G; ++t) {
    const int2 v = am_visible(positions[t], n_valid, window);
    if (v.x < v.y) span = (int2)(min(span.x, v.x), max(span.y, v.y));
  }
  return span;
}

// The channels of key j from ch0 on in the K (v = 0) or V (v = 1) block of `layer`, as words.
inline __global const uint* am_row(__global const uchar* arena, __global const ulong* table, int c_shift, int layer,
                                   int kv_dim, int ch0, int j, int v) {
  const int C = 1 << c_shift;
  const size_t at = ((size_t)(2 * layer + v) * C + (j & (C - 1))) * kv_dim + ch0;
  return (__global const uint*)(arena + (table[j >> c_shift] & KV_OFFSET_MASK) + 2 * at);
}

// Channels ch .. ch + 7 of key j's K (v = 0) or V (v = 1) row of kv head hk as f16 pairs.
inline uint4 am_load8(__global const uchar* arena, __global const ulong* table, int C, int c_shift, int layer,
                      int kv_dim, int n_head_kv, int hk, int ch, int j, int v) {
  if (c_shift >= 0) return vload4(0, am_row(arena, table, c_shift, layer, kv_dim, ch, j, v));
  const ulong e = table[j / C];
  const int r = j % C;
  const float4 a = v ? load_value4(arena, e, layer, C, -1, kv_dim, n_head_kv, hk, r, ch)
                     : load_key4(arena, e, layer, C, -1, kv_dim, n_head_kv, r, ch);
  const float4 b = v ? load_value4(arena, e, layer, C, -1, kv_dim, n_head_kv, hk, r, ch + 4)
                     : load_key4(arena, e, layer, C, -1, kv_dim, n_head_kv, r, ch + 4);
  return (uint4)(mma_h2(a.x, a.y), mma_h2(a.z, a.w), mma_h2(b.x, b.y), mma_h2(b.z, b.w));
}

// Stages the K block of keys [j0, j0 + AM_KEYS) of kv head hk as rows of AD / 2 words (zeros
// past n_valid), and with V its transpose: vt[channel][key pair].
__attribute__((always_inline)) inline void am_stage(const int AD, bool with_v, __global const uchar* arena,
                                                    __global const ulong* table, int C, int c_shift, int layer,
                                                    int kv_dim, int n_head_kv, int hk, int n_valid, int j0,
                                                    __local uint* ks, __local ushort* vt) {
  const int lid = get_local_id(0), Q4 = AD / 8;  // uint4 per row
  for (int e = lid; e < AM_KEYS * Q4; e += AM_WG) {
    const int k = e / Q4, q = e % Q4, j = j0 + k;
    uint4 v = (uint4)(0u);
    if (j < n_valid) v = am_load8(arena, table, C, c_shift, layer, kv_dim, n_head_kv, hk, hk * AD + 8 * q, j, 0);
    vstore4(v, 0, ks + k * AM_KS(AD) + 4 * q);
  }
  if (!with_v) return;
  // V: item e takes key e % AM_KEYS (a warp's 32 lanes 32 consecutive keys, so each of its 8
  // stores fills 16 consecutive words of one vt row) and channels 8 (e / AM_KEYS) ...
  for (int e = lid; e < AM_KEYS * Q4; e += AM_WG) {
    const int k = e % AM_KEYS, q = e / AM_KEYS, j = j0 + k;
    uint4 v = (uint4)(0u);
    if (j < n_valid) v = am_load8(arena, table, C, c_shift, layer, kv_dim, n_head_kv, hk, hk * AD + 8 * q, j, 1);
    __local ushort* col = vt + (8 * q) * (2 * AM_VS) + k;
    col[0 * 2 * AM_VS] = (ushort)v.x;
    col[1 * 2 * AM_VS] = (ushort)(v.x >> 16);
    col[2 * 2 * AM_VS] = (ushort)v.y;
    col[3 * 2 * AM_VS] = (ushort)(v.y >> 16);
    col[4 * 2 * AM_VS] = (ushort)v.z;
    col[5 * 2 * AM_VS] = (ushort)(v.z >> 16);
    col[6 * 2 * AM_VS] = (ushort)v.w;
    col[7 * 2 * AM_VS] = (ushort)(v.w >> 16);
  }
}

// s = Q K^T for the warp's 16 rows and the block's 8 x 8 keys: s[n] the C fragment of keys 8n ..
__attribute__((always_inline)) inline void am_scores(const int AD, const uint qa[AM_MAX_AD / 16][4], __local const uint* ks, uint g,
                                                     uint t, float s[8][4]) {
#pragma unroll
  for (int n = 0; n < 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < AM_MAX_AD / 16; ++kk)
    if (kk < AD / 16) {
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        __local const uint* b = ks + (8 * n + g) * AM_KS(AD) + 8 * kk + t;
        MMA_16816(s[n], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], b[0], b[4]);
      }
    }
}

// The scores scaled and masked in place: element e of s[n] is row g (e < 2) or g + 8, key
// j0 + 8n + 2t + (e & 1); a key a row does not see is -INFINITY.
__attribute__((always_inline)) inline void am_mask(float s[8][4], float scale, int j0, uint t, int2 va, int2 vb) {
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = j0 + 8 * n + 2 * (int)t + (e & 1);
      const int2 v = e < 2 ? va : vb;
      s[n][e] = j >= v.x && j < v.y ? s[n][e] * scale : -INFINITY;
    }
}

// Both rows' (max, sum) updated with a block's scores: the sum rescaled to the new max.
__attribute__((always_inline)) inline void am_stats(const float s[8][4], float m[2], float l[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float bm = -INFINITY;
#pragma unroll
    for (int n = 0; n < 8; ++n) bm = fmax(bm, fmax(s[n][2 * h], s[n][2 * h + 1]));
    bm = fmax(bm, shfl_xor(bm, 1));
    bm = fmax(bm, shfl_xor(bm, 2));
    const float mn = fmax(m[h], bm);
    if (mn == -INFINITY) continue;  // warp-uniform per row quad; shuffles above done by all
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float v = s[n][2 * h + e];
        if (v != -INFINITY) sum += exp_ggml(v - mn);
      }
    l[h] = (m[h] == -INFINITY ? 0.0f : l[h] * exp_ggml(m[h] - mn)) + sum;
    m[h] = mn;
  }
  // The sums of the row's 4 lanes (after the loop, so that every lane shuffles).
}

__attribute__((always_inline)) inline void attn_mma(
    const int AD, __global const float* q, __global const int* positions, __global const uchar* arena,
    __global const ulong* table, int n_tokens, int n_head, int n_head_kv, int hs, int C, int c_shift, int layer, int n_valid,
    int window, float scale, __global float* out, __global uint* mass_part, __local uint* ks, __local uint* vt,
    __local uint* wmass) {
  const int lid = get_local_id(0), hk = get_group_id(1);
  const int G = n_head / n_head_kv, kv_dim = n_head_kv * AD, n_rows = n_tokens * G;
  const int i0 = get_group_id(0) * AM_ROWS;
  const uint lane = lid & 31, warp = lid >> 5, g = lane >> 2, t = lane & 3;
  const int w0 = i0 + 16 * (int)warp;  // the warp's first row

  // The warp's rows g and g + 8: their keys (none past the last row), q fragments.
  int2 va = (int2)(0, 0), vb = (int2)(0, 0);
  const int ra = w0 + (int)g, rb = ra + 8;
  if (ra < n_rows) va = am_visible(positions[ra / G], n_valid, window);
  if (rb < n_rows) vb = am_visible(positions[rb / G], n_valid, window);
  uint qa[AM_MAX_AD / 16][4];
  {
    const int ca = min(ra, n_rows - 1), cb = min(rb, n_rows - 1);
    __global const float* qra = q + ((size_t)(ca / G) * n_head + q_head(hk, ca % G, G, hs)) * AD;
    __global const float* qrb = q + ((size_t)(cb / G) * n_head + q_head(hk, cb % G, G, hs)) * AD;
#pragma unroll
    for (int kk = 0; kk < AM_MAX_AD / 16; ++kk)
      if (kk < AD / 16) {
        const int c = 16 * kk + 2 * (int)t;
        const float2 a0 = vload2(0, qra + c), a1 = vload2(0, qrb + c);
        const float2 a2 = vload2(0, qra + c + 8), a3 = vload2(0, qrb + c + 8);
        qa[kk][0] = mma_h2(a0.x, a0.y);
        qa[kk][1] = mma_h2(a1.x, a1.y);
        qa[kk][2] = mma_h2(a2.x, a2.y);
        qa[kk][3] = mma_h2(a3.x, a3.y);
      }
  }
  const int2 span = am_span(positions, i0, min(i0 + AM_ROWS, n_rows), G, n_valid, window);
  const int2 wspan = w0 < n_rows ? am_span(positions, w0, min(w0 + 16, n_rows), G, n_valid, window) : (int2)(INT_MAX, 0);
  const int jb0 = span.x == INT_MAX ? 0 : span.x / AM_KEYS * AM_KEYS;

  // Pass 1: each row's max and sum.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  for (int j0 = jb0; j0 < span.y; j0 += AM_KEYS) {
    am_stage(AD, false, arena, table, C, c_shift, layer, kv_dim, n_head_kv, hk, n_valid, j0, ks, (__local ushort*)vt);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (wspan.x < j0 + AM_KEYS && wspan.y > j0) {  // warp-uniform
      float s[8][4];
      am_scores(AD, qa, ks, g, t, s);
      am_mask(s, scale, j0, t, va, vb);
      am_stats(s, m, l);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += shfl_xor(l[h], 1);
    l[h] += shfl_xor(l[h], 2);
    inv[h] = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
  }

  // Pass 2: the f16 weights times V.
  float o[AM_MAX_AD / 8][4];
#pragma unroll
  for (int c = 0; c < AM_MAX_AD / 8; ++c) o[c][0] = o[c][1] = o[c][2] = o[c][3] = 0.0f;
  for (int j0 = jb0; j0 < span.y; j0 += AM_KEYS) {
    am_stage(AD, true, arena, table, C, c_shift, layer, kv_dim, n_head_kv, hk, n_valid, j0, ks, (__local ushort*)vt);
    if (mass_part && lid < AM_KEYS) wmass[lid] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (wspan.x < j0 + AM_KEYS && wspan.y > j0) {
      float s[8][4];
      am_scores(AD, qa, ks, g, t, s);
      am_mask(s, scale, j0, t, va, vb);
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e >> 1;
          s[n][e] = s[n][e] == -INFINITY ? 0.0f : round_f16(exp_ggml(s[n][e] - m[h]) * inv[h]);
        }
      if (mass_part) {  // warp-uniform
        // Per key, the warp's 16 rows' weights in units of 2^-24 (f16 values in [0, 1] are whole
        // multiples; 16 rows stay under 2^29): the lane's two rows, then the 8 lanes of a key.
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            uint u = (uint)(s[n][e] * 16777216.0f) + (uint)(s[n][e + 2] * 16777216.0f);
            u += as_uint(shfl_xor(as_float(u), 4));
            u += as_uint(shfl_xor(as_float(u), 8));
            u += as_uint(shfl_xor(as_float(u), 16));
            if (g == 0) atomic_add(&wmass[8 * n + 2 * (int)t + e], u);
          }
      }
#pragma unroll
      for (int kk = 0; kk < AM_KEYS / 16; ++kk) {
        const uint a0 = mma_h2(s[2 * kk][0], s[2 * kk][1]), a1 = mma_h2(s[2 * kk][2], s[2 * kk][3]);
        const uint a2 = mma_h2(s[2 * kk + 1][0], s[2 * kk + 1][1]), a3 = mma_h2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
        for (int c = 0; c < AM_MAX_AD / 8; ++c)
          if (c < AD / 8) {
            __local const uint* b = vt + (8 * c + g) * AM_VS + 8 * kk + t;
            MMA_16816(o[c], a0, a1, a2, a3, b[0], b[4]);
          }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // The block's key mass, this work-group's share (mass_part: one row of keys per work-group).
    if (mass_part && lid < AM_KEYS && j0 + lid < n_valid)
      mass_part[((size_t)get_group_id(0) * n_head_kv + hk) * n_valid + j0 + lid] = wmass[lid];
  }

  // Rows past the end are not written; a row that saw no key writes zeros (as the CPU).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = h == 0 ? ra : rb;
    if (r >= n_rows) continue;
    __global float* dst = out + ((size_t)(r / G) * n_head + q_head(hk, r % G, G, hs)) * AD + 2 * t;
#pragma unroll
    for (int c = 0; c < AM_MAX_AD / 8; ++c)
      if (c < AD / 8) vstore2((float2)(o[c][2 * h], o[c][2 * h + 1]), 0, dst + 8 * c);
  }
}

// attn_mma_AD: head_dim AD; work-groups (row tiles of AM_ROWS, kv heads) of AM_WG items. With
// with_mass, each work-group writes its rows' key mass in units of 2^-24 to its row of mass_part
// (zeroed before the launch) for attn_parts_mass (attention.cl) to add up.
#define ATTN_MMA(AD)                                                                                            \
  __kernel __attribute__((reqd_work_group_size(AM_WG, 1, 1))) void attn_mma_##AD(                              \
      __global const float* qb, ulong qo, __global const int* pb, ulong po, __global const uchar* arena,       \
      __global const ulong* tb, ulong to, int n_tokens, int n_head, int n_head_kv, int hs, int C, int c_shift,  \
      int layer, int n_valid, int window, float scale, __global float* ob, ulong oo, __global uint* mpb,        \
      ulong mpo, int with_mass) {                                                                               \
    __local uint ks[AM_KEYS * AM_KS(AD)];                                                                       \
    __local uint vt[AD * AM_VS];                                                                                \
    __local uint wmass[AM_KEYS];                                                                                \
    attn_mma(AD, CVIEW(float, qb, qo), CVIEW(int, pb, po), arena, CVIEW(ulong, tb, to), n_tokens, n_head,      \
             n_head_kv, hs, C, c_shift, layer, n_valid, window, scale, VIEW(float, ob, oo),                    \
             with_mass ? VIEW(uint, mpb, mpo) : 0, ks, vt, wmass);                                              \
  }

ATTN_MMA(64)
ATTN_MMA(128)

