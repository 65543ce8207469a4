// SPDX-License-Identifier: Apache-2.0
// Causal attention over a context's KV chunks in device memory (every KvFormat, read in place),
// with the CPU's numerics: q rounded to f16, s = scale * (q . k) in f32, softmax with ggml's
// expf, weights rounded to f16 after normalization, out = sum_j p_j v_j. Built after ops.cl
// (round_f16, exp_ggml, KV_OFFSET_MASK).
//
// Rounding the weights needs each row's final max and sum before any weight meets V, so the
// scores are written to a scratch matrix S [row][key] (row = token * n_head + head) and the
// work runs as separate kernels, each spread over the whole device:
//   attn_scores  (key block, kv head, row tile): S for a tile's rows, plus each block's
//                (max, sum of exp(s - max)) per row;
//   attn_pv      (key split, kv head, row tile): combines the blocks' (max, sum) into the
//                row's max and 1 / sum, turns S into f16 weights and sums weights * V over
//                the split's keys; one split writes out, several write partial sums;
//   attn_reduce  the splits' partial sums into out (decode has few rows: its keys are split
//                across work-groups so that every compute unit has loads in flight);
//   attn_mass_parts / attn_parts_mass  per key, its weights summed over the rows (exact integer
//                sums of f16 values, as the CPU's), added to mass[key].
// A tile is RT consecutive rows of one kv head (its query heads, token by token), so a K or V
// value loaded serves all of them (grouped-query attention).

#define KB 64  // keys per block: the work-group size of every kernel here
#define RT 8   // query rows per tile
#ifndef DS
#define DS 32  // channels of q and K staged in local memory at a time
#endif
#ifndef PU
#define PU 4  // value rows a P.V lane loads before using any (pv_lane; a decode step's split has
              // 64 keys, 2 key lanes of head_dim 128: 32 rows an item, each a wait on memory)
#endif
// head_dim: a multiple of 4 up to 4 * KB (attn_pv's items take a row's channels 4 at a time).

// Every kernel here reads keys through a table of chunks of C tokens. c_shift >= 0 says more
// about the call: every chunk is f16 and C = 1 << c_shift (a GPU's KV today), and the loads
// then skip the per-chunk format's branches and the division (7B decode at context 1,024 on
// an H100: +8 %). Chunk and row of key j:
#define KV_CHUNK(j) (c_shift >= 0 ? (j) >> c_shift : (j) / C)
#define KV_ROW(j) (c_shift >= 0 ? (j) & (C - 1) : (j) % C)

// Bytes of one layer's K block and V block in a chunk of format `bits` (hal/kv_format.h).
inline size_t k_block_bytes(uint bits, int C, int kv_dim) {
  return bits == 16 ? (size_t)C * kv_dim * 2 : (size_t)kv_dim * 4 + (size_t)C * kv_dim * bits / 8;
}
inline size_t v_block_bytes(uint bits, int C, int kv_dim, int n_head_kv) {
  return bits == 16 ? (size_t)C * kv_dim * 2 : (size_t)C * n_head_kv * 4 + (size_t)C * kv_dim * bits / 8;
}

// Code of channel ch in a row of `bits`-bit codes: a little-endian bit stream.
inline float read_code(__global const uchar* row, int ch, uint bits) {
  const uint bit = (uint)ch * bits;
  const uint i = bit >> 3, sh = bit & 7;
  uint x = row[i];
  if (sh + bits > 8) x |= (uint)row[i + 1] << 8;
  return (float)((x >> sh) & ((1u << bits) - 1));
}

// The layer's K block of the chunk behind table entry e.
inline __global const uchar* layer_base(__global const uchar* arena, ulong e, int layer, int C, int kv_dim,
                                        int n_head_kv) {
  const uint bits = (uint)(e >> 56);
  return arena + (e & KV_OFFSET_MASK) +
         (size_t)layer * (k_block_bytes(bits, C, kv_dim) + v_block_bytes(bits, C, kv_dim, n_head_kv));
}

// Codes of channels ch .. ch + 3.
inline float4 read_codes4(__global const uchar* row, int ch, uint bits) {
  return (float4)(read_code(row, ch, bits), read_code(row, ch + 1, bits), read_code(row, ch + 2, bits),
                  read_code(row, ch + 3, bits));
}

// Key channels ch .. ch + 3 of row r: f16, or min + scale * code with the channels' (KIVI) params.
inline float4 load_key4(__global const uchar* arena, ulong e, int layer, int C, int c_shift, int kv_dim, int n_head_kv,
                        int r, int ch) {
  if (c_shift >= 0)
    return vload_half4(0, (__global const half*)(arena + (e & KV_OFFSET_MASK) + (size_t)layer * C * kv_dim * 4) +
                              (size_t)r * kv_dim + ch);
  const uint bits = (uint)(e >> 56);
  __global const uchar* base = layer_base(arena, e, layer, C, kv_dim, n_head_kv);
  __global const half* p = (__global const half*)base;
  if (bits == 16) return vload_half4(0, p + (size_t)r * kv_dim + ch);
  __global const uchar* row = base + (size_t)kv_dim * 4 + (size_t)r * (kv_dim * bits / 8);
  return fma(vload_half4(0, p + kv_dim + ch), read_codes4(row, ch, bits), vload_half4(0, p + ch));
}

// Value channels ch .. ch + 3 (of kv head hk) of row r: f16, or min + scale * code with the
// (token, head) params.
inline float4 load_value4(__global const uchar* arena, ulong e, int layer, int C, int c_shift, int kv_dim,
                          int n_head_kv, int hk, int r, int ch) {
  if (c_shift >= 0)
    return vload_half4(0, (__global const half*)(arena + (e & KV_OFFSET_MASK) + (size_t)layer * C * kv_dim * 4) +
                              (size_t)(C + r) * kv_dim + ch);
  const uint bits = (uint)(e >> 56);
  __global const uchar* base = layer_base(arena, e, layer, C, kv_dim, n_head_kv) + k_block_bytes(bits, C, kv_dim);
  __global const half* p = (__global const half*)base;
  if (bits == 16) return vload_half4(0, p + (size_t)r * kv_dim + ch);
  const int pair = r * n_head_kv + hk;
  __global const uchar* row = base + (size_t)C * n_head_kv * 4 + (size_t)r * (kv_dim * bits / 8);
  return fma((float4)vload_half(C * n_head_kv + pair, p), read_codes4(row, ch, bits), (float4)vload_half(pair, p));
}

// One P.V lane: acc[r] += w[r * w_stride + k] * (channels ch .. ch + 3 of key key0 + k's value
// row) for keys k = first, first + KL, ... < kn, in that order, and rows r < nr; PU value rows
// are loaded before any is used (one at a time left each item waiting on memory once a key).
__attribute__((always_inline)) inline void pv_lane(float4* acc, int nr, __local const float* w, int w_stride,
                                                   int first, int kn, int KL, int key0, __global const uchar* arena,
                                                   __global const ulong* table, int layer, int C, int c_shift,
                                                   int kv_dim, int n_head_kv, int hk, int ch) {
  int k = first;
  for (; k + (PU - 1) * KL < kn; k += PU * KL) {
    float4 v[PU];
#pragma unroll
    for (int u = 0; u < PU; ++u) {
      const int j = key0 + k + u * KL;
      v[u] = load_value4(arena, table[KV_CHUNK(j)], layer, C, c_shift, kv_dim, n_head_kv, hk, KV_ROW(j), ch);
    }
#pragma unroll
    for (int u = 0; u < PU; ++u)
      for (int r = 0; r < nr; ++r) acc[r] = fma((float4)w[r * w_stride + k + u * KL], v[u], acc[r]);
  }
  for (; k < kn; k += KL) {
    const int j = key0 + k;
    const float4 v = load_value4(arena, table[KV_CHUNK(j)], layer, C, c_shift, kv_dim, n_head_kv, hk, KV_ROW(j), ch);
    for (int r = 0; r < nr; ++r) acc[r] = fma((float4)w[r * w_stride + k], v, acc[r]);
  }
}

// Query head g of kv head hk's G: group-major (hs 1: heads hk G .. hk G + G - 1, the file's
// order) or rank-major (hs n_head_kv: heads hk, hk + n_head_kv, ..., an elastic model's head
// levels, whose every prefix of whole ranks is a smaller model; AttentionParams::rank_major).
inline int q_head(int hk, int g, int G, int hs) { return hs == 1 ? hk * G + g : g * hs + hk; }

// Keys [lo, hi) seen by a query at position pos.
inline int2 visible_keys(int pos, int n_valid, int window) {
  return (int2)(window > 0 ? max(0, pos - window + 1) : 0, min(pos + 1, n_valid));
}

// Whether some row of the tile (rows i0 .. i0 + nr of a kv head, G per token) sees a key of [j0, j1).
inline bool tile_sees(__global const int* positions, int i0, int nr, int G, int j0, int j1, int n_valid, int window) {
  bool any = false;
  for (int r = 0; r < nr; ++r) {
    const int2 v = visible_keys(positions[(i0 + r) / G], n_valid, window);
    any |= v.x < v.y && v.x < j1 && v.y > j0;
  }
  return any;
}

// In place over red[r][0..KB) for r < RT: red[r][0] becomes the max (op 0) or the sum (op 1).
inline void tree_reduce(__local float (*red)[KB], int lid, int op) {
  for (int w = KB / 2; w > 0; w >>= 1) {
    if (lid < w) {
      for (int r = 0; r < RT; ++r)
        red[r][lid] = op == 0 ? fmax(red[r][lid], red[r][lid + w]) : red[r][lid] + red[r][lid + w];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

__kernel __attribute__((reqd_work_group_size(KB, 1, 1))) void attn_scores(
    __global const float* qb, ulong qo, __global const int* pb, ulong po, __global const uchar* arena,
    __global const ulong* tb, ulong to, int n_tokens, int n_head, int n_head_kv, int hs, int head_dim, int C, int c_shift,
    int layer, int n_valid, int window, float scale, __global float* sb, ulong so, int s_stride, __global float2* mb,
    ulong mo) {
  __local float qs[RT][DS];
  // Row stride DS + 4: item k reads row k a float4 at a time, and 8 items in a row of 36
  // floats each start 4 banks apart (no conflict).
  __local float ks[KB][DS + 4];
  __local float red[RT][KB];
  __local float bmax[RT];
  const int lid = get_local_id(0), blk = get_group_id(0), hk = get_group_id(1);
  const int G = n_head / n_head_kv, kv_dim = n_head_kv * head_dim;
  const int i0 = get_group_id(2) * RT;
  const int nr = min(RT, n_tokens * G - i0);
  const int j0 = blk * KB;
  const int n_blocks = s_stride / KB;
  __global const int* positions = CVIEW(int, pb, po);
  __global const float* q = CVIEW(float, qb, qo);
  __global const ulong* table = CVIEW(ulong, tb, to);

  float acc[RT];
  for (int r = 0; r < RT; ++r) acc[r] = 0.0f;
  if (tile_sees(positions, i0, nr, G, j0, j0 + KB, n_valid, window)) {
    for (int d0 = 0; d0 < head_dim; d0 += DS) {
      for (int e = lid; e < RT * DS / 4; e += KB) {
        const int r = e / (DS / 4), dq = 4 * (e % (DS / 4)), d = d0 + dq;
        const int i = i0 + r;
        float4 v = 0.0f;
        if (r < nr && d < head_dim) {
          v = vload4(0, q + ((size_t)(i / G) * n_head + q_head(hk, i % G, G, hs)) * head_dim + d);
          v = (float4)(round_f16(v.x), round_f16(v.y), round_f16(v.z), round_f16(v.w));
        }
        vstore4(v, 0, &qs[r][dq]);
      }
      for (int e = lid; e < KB * DS / 4; e += KB) {
        const int k = e / (DS / 4), dq = 4 * (e % (DS / 4)), d = d0 + dq, j = j0 + k;
        float4 v = 0.0f;
        if (j < n_valid && d < head_dim)
          v = load_key4(arena, table[KV_CHUNK(j)], layer, C, c_shift, kv_dim, n_head_kv, KV_ROW(j), hk * head_dim + d);
        vstore4(v, 0, &ks[k][dq]);
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int d = 0; d < DS; d += 4) {
        const float4 k = vload4(0, &ks[lid][d]);
        for (int r = 0; r < RT; ++r) {
          const float4 qv = vload4(0, &qs[r][d]);
          acc[r] = fma(qv.w, k.w, fma(qv.z, k.z, fma(qv.y, k.y, fma(qv.x, k.x, acc[r]))));
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }

  // The scores, masked; then the block's max and sum of exp(s - max) per row.
  const int j = j0 + lid;
  __global float* S = VIEW(float, sb, so);
  float s[RT];
  for (int r = 0; r < RT; ++r) {
    s[r] = -INFINITY;
    if (r < nr) {
      const int i = i0 + r;
      const int2 v = visible_keys(positions[i / G], n_valid, window);
      if (j >= v.x && j < v.y) s[r] = acc[r] * scale;
      S[((size_t)(i / G) * n_head + q_head(hk, i % G, G, hs)) * s_stride + j] = s[r];
    }
    red[r][lid] = s[r];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  tree_reduce(red, lid, 0);
  if (lid < RT) bmax[lid] = red[lid][0];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int r = 0; r < RT; ++r) red[r][lid] = s[r] == -INFINITY ? 0.0f : exp_ggml(s[r] - bmax[r]);
  barrier(CLK_LOCAL_MEM_FENCE);
  tree_reduce(red, lid, 1);
  if (lid < nr) {
    const int i = i0 + lid;
    __global float2* block_stats = VIEW(float2, mb, mo);
    block_stats[((size_t)(i / G) * n_head + q_head(hk, i % G, G, hs)) * n_blocks + blk] = (float2)(bmax[lid], red[lid][0]);
  }
}

// Each of the RT rows' max and 1 / sum from its blocks' (max, sum) in part (attn_scores'
// block stats) into rmax / rinv, written to `stats` too where given (rows below nr). Items from
// KB on (a larger work-group) only meet the barriers.
inline void row_stats(__global const float2* part, const size_t* row, int n_blocks, int nr, __global float2* stats,
                      int lid, __local float (*red)[KB], __local float* rmax, __local float* rinv) {
  for (int r = 0; r < RT && lid < KB; ++r) {
    float m = -INFINITY;
    for (int b = lid; b < n_blocks; b += KB) m = fmax(m, part[row[r] * n_blocks + b].x);
    red[r][lid] = m;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  tree_reduce(red, lid, 0);
  if (lid < RT) rmax[lid] = red[lid][0];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int r = 0; r < RT && lid < KB; ++r) {
    float l = 0.0f;
    for (int b = lid; b < n_blocks; b += KB) {
      const float2 ml = part[row[r] * n_blocks + b];
      if (ml.x != -INFINITY) l += ml.y * exp_ggml(ml.x - rmax[r]);
    }
    red[r][lid] = l;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  tree_reduce(red, lid, 1);
  if (lid < RT) {
    rinv[lid] = red[lid][0] > 0.0f ? 1.0f / red[lid][0] : 0.0f;
    if (stats && lid < nr) stats[row[lid]] = (float2)(rmax[lid], rinv[lid]);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel __attribute__((reqd_work_group_size(KB, 1, 1))) void attn_pv(
    __global const int* pb, ulong po, __global const uchar* arena, __global const ulong* tb, ulong to, int n_tokens,
    int n_head, int n_head_kv, int hs, int head_dim, int C, int c_shift, int layer, int n_valid, int window,
    __global const float* sb, ulong so, int s_stride, __global const float2* mb, ulong mo, int split_keys, int n_splits,
    __global float2* stb, ulong sto, __global float* ob, ulong oo, __global float* xb, ulong xo) {
  __local float red[RT][KB];  // row stats, then the weights of a key block
  __local float rmax[RT], rinv[RT];
  __local float4 lanes[RT * KB];  // per (lane, row, quad): a key lane's sums
  const int lid = get_local_id(0), split = get_group_id(0), hk = get_group_id(1);
  const int G = n_head / n_head_kv, kv_dim = n_head_kv * head_dim;
  const int i0 = get_group_id(2) * RT;
  const int nr = min(RT, n_tokens * G - i0);
  const int n_blocks = s_stride / KB;
  __global const int* positions = CVIEW(int, pb, po);
  __global const ulong* table = CVIEW(ulong, tb, to);
  __global const float2* part = CVIEW(float2, mb, mo);
  __global const float* S = CVIEW(float, sb, so);
  size_t row[RT];
  for (int r = 0; r < RT; ++r) {
    const int i = i0 + min(r, nr - 1);
    row[r] = (size_t)(i / G) * n_head + q_head(hk, i % G, G, hs);
  }

  row_stats(part, row, n_blocks, nr, split == 0 ? VIEW(float2, stb, sto) : 0, lid, red, rmax, rinv);

  // V: each item takes 4 channels (a quad) of every KL-th key of a block, so that KL keys' rows
  // are read at once, in wide loads, PU keys per step in flight; the KL lanes are summed at the end.
  const int CQ = head_dim / 4, KL = KB / CQ;
  const int cq = lid % CQ, kl = lid / CQ;
  const bool active = kl < KL;
  const int ch = hk * head_dim + 4 * cq;
  float4 acc[RT];
  for (int r = 0; r < RT; ++r) acc[r] = 0.0f;
  const int k_begin = split * split_keys;
  const int k_end = min(n_valid, k_begin + split_keys);
  for (int jb = k_begin; jb < k_end; jb += KB) {
    if (!tile_sees(positions, i0, nr, G, jb, jb + KB, n_valid, window)) continue;  // uniform
    const int j = jb + lid;
    for (int r = 0; r < RT; ++r) {
      const float sc = r < nr && j < k_end ? S[row[r] * s_stride + j] : -INFINITY;
      red[r][lid] = sc == -INFINITY ? 0.0f : round_f16(exp_ggml(sc - rmax[r]) * rinv[r]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int kn = min(KB, k_end - jb);
    if (active) {
      pv_lane(acc, RT, &red[0][0], KB, kl, kn, KL, jb, arena, table, layer, C, c_shift, kv_dim, n_head_kv, hk, ch);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  // Lanes 1.. hand their sums to lane 0, which writes the row's quad.
  if (active && kl > 0)
    for (int r = 0; r < RT; ++r) lanes[(kl * RT + r) * CQ + cq] = acc[r];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!active || kl > 0) return;
  for (int l = 1; l < KL; ++l)
    for (int r = 0; r < RT; ++r) acc[r] += lanes[(l * RT + r) * CQ + cq];
  for (int r = 0; r < nr; ++r) {
    if (n_splits == 1) {
      vstore4(acc[r], 0, VIEW(float, ob, oo) + row[r] * head_dim + 4 * cq);
    } else {
      vstore4(acc[r], 0, VIEW(float, xb, xo) + (row[r] * n_splits + split) * head_dim + 4 * cq);
    }
  }
}

// out[row] = the sum of its splits' partial outputs. One work-group per row: each item sums a
// channel quad over every SL-th split (SL lanes of splits read at once), then lane 0 adds the lanes.
__kernel __attribute__((reqd_work_group_size(KB, 1, 1))) void attn_reduce(__global const float* xb, ulong xo,
                                                                          int n_splits, int head_dim,
                                                                          __global float* ob, ulong oo) {
  __local float4 lanes[KB];
  const int lid = get_local_id(0);
  const size_t row = get_group_id(0);
  const int CQ = head_dim / 4, SL = KB / CQ;
  const int cq = lid % CQ, sl = lid / CQ;
  float4 sum = 0.0f;
  if (sl < SL) {
    __global const float* x = CVIEW(float, xb, xo) + row * n_splits * head_dim + 4 * cq;
    for (int i = sl; i < n_splits; i += SL) sum += vload4(0, x + (size_t)i * head_dim);
    lanes[lid] = sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (sl != 0) return;
  for (int l = 1; l < SL; ++l) sum += lanes[l * CQ + cq];
  vstore4(sum, 0, VIEW(float, ob, oo) + row * head_dim + 4 * cq);
}

// Key mass in two launches: attn_mass_parts sums key j's f16 weights over a part of MR rows
// (items (key, part): a prompt's thousands of rows spread over the device, not looped by one
// item per key), exact in integer units of 2^-24 (f16 values in [0, 1] are multiples of it;
// MR rows fit a uint), into part[p][j]; attn_parts_mass adds a key's parts and the total to
// mass[j] once, so the sum does not depend on the order.
#define MR 64
__kernel void attn_mass_parts(__global const float* sb, ulong so, int s_stride, __global const float2* stb, ulong sto,
                              int n_rows, int n_valid, __global uint* part) {
  const int j = get_global_id(0), p = get_global_id(1);
  if (j >= n_valid) return;
  __global const float* S = CVIEW(float, sb, so);
  __global const float2* stats = CVIEW(float2, stb, sto);
  uint units = 0;
  for (int row = p * MR; row < min(n_rows, (p + 1) * MR); ++row) {
    const float s = S[(size_t)row * s_stride + j];
    if (s == -INFINITY) continue;
    const float2 st = stats[row];
    units += (uint)(round_f16(exp_ggml(s - st.x) * st.y) * 16777216.0f);
  }
  part[(size_t)p * n_valid + j] = units;
}

// mass[j] += the parts' shares of key j (n_parts rows of n_valid: attn_mass_parts', or the
// tensor-core kernel's work-groups'), exact in units of 2^-24.
__kernel void attn_parts_mass(__global const uint* part, int n_parts, int n_valid, __global float* wb, ulong wo) {
  const int j = get_global_id(0);
  if (j >= n_valid) return;
  ulong units = 0;
  for (int p = 0; p < n_parts; ++p) units += part[(size_t)p * n_valid + j];
  if (units) VIEW(float, wb, wo)[j] += (float)units * 0x1p-24f;
}

// Decode in one launch: one query token, the visible keys few enough that every query head of
// a kv head keeps its scores in local memory (G x keys <= DK floats). A work-group computes the
// scores of its query heads (the order of attn_scores' sums), each head's max and sum, the f16
// weights and their product with V; the split path above takes three launches and a scratch
// matrix for the same result. Key mass, where asked for, goes to `units` as each work-group's
// integer share (2^-24 units, added atomically: the total does not depend on the order) and
// attn_units_mass moves it into mass.
#define DW 256     // work-group size
#define DG 8       // query heads per kv head at most
#define DQ 2048    // query floats of a kv head's group at most (DG x head_dim)
#define DK 8192    // scores at most (query heads x visible keys)

inline float group_reduce(__local float* red, int lid, float v, int op) {
  red[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = DW / 2; w > 0; w >>= 1) {
    if (lid < w) red[lid] = op == 0 ? fmax(red[lid], red[lid + w]) : red[lid] + red[lid + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

// Each head g < G: its quad's key-lane sums added in lane order, written by lane 0 to
// dst + g * stride (acc: this item's sums; lanes: DW float4s of local memory); with keep_on,
// also to keep + g * 4 CQ (the work-group's outputs side by side, for quantizing them).
inline void store_lane_sums_keep(const float4* acc, int G, __local float4* lanes, int lid, bool active, int kl,
                                 int KL, int CQ, int cq, __global float* dst, size_t stride, __local float* keep,
                                 int keep_on) {
  for (int g = 0; g < G; ++g) {
    if (active) lanes[lid] = acc[g];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (active && kl == 0) {
      float4 sum = acc[g];
      for (int l = 1; l < KL; ++l) sum += lanes[l * CQ + cq];
      vstore4(sum, 0, dst + g * stride + 4 * cq);
      if (keep_on) vstore4(sum, 0, keep + g * 4 * CQ + 4 * cq);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

inline void store_lane_sums(const float4* acc, int G, __local float4* lanes, int lid, bool active, int kl, int KL,
                            int CQ, int cq, __global float* dst, size_t stride) {
  store_lane_sums_keep(acc, G, lanes, lid, active, kl, KL, CQ, cq, dst, stride, (__local float*)lanes, 0);
}

// A work-group per kv head would leave most of a GPU idle, so the work is spread two ways:
// `split` work-groups share a kv head's G query heads (G / split each, where kv heads are few:
// Gemma-3-270M has one), and `csplit` work-groups share the channels of P.V (head_dim /
// csplit each, a multiple of 4), every one computing all its heads' scores (a kv head's keys
// read csplit times, mostly from L2) so that no partial sums need combining. Each head's sums
// are the same either way.
__kernel __attribute__((reqd_work_group_size(DW, 1, 1))) void attn_decode(
    __global const float* qb, ulong qo, __global const int* pb, ulong po, __global const uchar* arena,
    __global const ulong* tb, ulong to, int n_head, int n_head_kv, int hs, int head_dim, int C, int c_shift, int layer,
    int n_valid, int window, float scale, __global float* ob, ulong oo, int split, int csplit, __global uint* ub,
    ulong uo, int mass, __global char* cb, ulong co, __global uint2* xpb, ulong xpo, int qblock) {
  __local float qs[DQ];
  __local float S[DK];
  __local float red[DW];
  __local float4 lanes[DW];
  const int lid = get_local_id(0), cs = get_group_id(0) % csplit, hw = get_group_id(0) / csplit;
  const int hk = hw / split;
  const int G = n_head / n_head_kv / split, kv_dim = n_head_kv * head_dim;
  // This work-group's G heads: members g0 .. g0 + G - 1 of the kv head's group, hs heads apart.
  const int g0 = (hw % split) * G, first_head = q_head(hk, g0, G * split, hs);
  const int2 vis = visible_keys(CVIEW(int, pb, po)[0], n_valid, window);
  const int lo = vis.x, nk = max(0, vis.y - vis.x);
  __global const ulong* table = CVIEW(ulong, tb, to);
  __global const float* q = CVIEW(float, qb, qo) + (size_t)first_head * head_dim;
  for (int e = lid; e < G * head_dim; e += DW) qs[e] = round_f16(q[(size_t)(e / head_dim) * hs * head_dim + e % head_dim]);
  barrier(CLK_LOCAL_MEM_FENCE);

  // Scores: an item per key, every query head of the group at once (a K row read once).
  for (int i = lid; i < nk; i += DW) {
    const int j = lo + i;
    const ulong e = table[KV_CHUNK(j)];
    float acc[DG];
    for (int g = 0; g < DG; ++g) acc[g] = 0.0f;
    for (int d = 0; d < head_dim; d += 4) {
      const float4 k = load_key4(arena, e, layer, C, c_shift, kv_dim, n_head_kv, KV_ROW(j), hk * head_dim + d);
      for (int g = 0; g < G; ++g) {
        const float4 qv = vload4(0, &qs[g * head_dim + d]);
        acc[g] = fma(qv.w, k.w, fma(qv.z, k.z, fma(qv.y, k.y, fma(qv.x, k.x, acc[g]))));
      }
    }
    for (int g = 0; g < G; ++g) S[g * nk + i] = acc[g] * scale;
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  // Each head's max, 1 / sum, then its weights rounded to f16 in place.
  for (int g = 0; g < G; ++g) {
    __local float* s = S + g * nk;
    float m = -INFINITY;
    for (int i = lid; i < nk; i += DW) m = fmax(m, s[i]);
    m = group_reduce(red, lid, m, 0);
    float l = 0.0f;
    for (int i = lid; i < nk; i += DW) l += exp_ggml(s[i] - m);
    l = group_reduce(red, lid, l, 1);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int i = lid; i < nk; i += DW) s[i] = round_f16(exp_ggml(s[i] - m) * inv);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (mass && cs == 0) {  // one channel split of each head group gives its share
    __global uint* units = VIEW(uint, ub, uo);
    for (int i = lid; i < nk; i += DW) {
      uint u = 0;
      for (int g = 0; g < G; ++g) u += (uint)(S[g * nk + i] * 16777216.0f);
      if (u) atomic_add(units + lo + i, u);
    }
  }

  // P.V over the work-group's channels c0 .. c0 + Dc: item (lane, quad) sums every KL-th key's
  // 4 channels for every head (pv_lane); lanes summed last.
  const int Dc = head_dim / csplit, c0 = cs * Dc;
  const int CQ = Dc / 4, KL = DW / CQ;
  const int cq = lid % CQ, kl = lid / CQ;
  const bool active = kl < KL;
  const int ch = hk * head_dim + c0 + 4 * cq;
  float4 acc[DG];
  for (int g = 0; g < DG; ++g) acc[g] = 0.0f;
  if (active) {
    pv_lane(acc, G, S, nk, kl, nk, KL, lo, arena, table, layer, C, c_shift, kv_dim, n_head_kv, hk, ch);
  }
  // qs is free once the scores are made: it keeps the outputs for their quantization.
  store_lane_sums_keep(acc, G, lanes, lid, active, kl, KL, CQ, cq,
                       VIEW(float, ob, oo) + (size_t)first_head * head_dim + c0, (size_t)hs * head_dim, qs, qblock != 0);
  if (qblock == 0) return;
  // The o-projection's input in the int8 form (act_q8p's bits: the same floats, blocks and
  // codes), so that its GEMV needs no quantizing launch. The host asks for it only where the
  // work-group's G x Dc outputs are whole blocks of the input: Dc a multiple of qblock, or
  // (csplit 1, group-major) its heads side by side, G x head_dim a multiple of qblock. lanes and red are
  // free now: the 8-element extremes and the blocks' pairs.
  __local float2* ext = (__local float2*)lanes;
  const int n = G * Dc;
  if (lid < n / 8) ext[lid] = extremes8(vload8(lid, qs));
  barrier(CLK_LOCAL_MEM_FENCE);
  blocks_params(qs, ext, n / qblock, qblock, lid, DW, red);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = lid; h < n / 16; h += DW) {
    const int e = 16 * h;  // element e of the work-group's outputs: head e / Dc, its channel c0 + e % Dc
    const size_t i = (size_t)(first_head + e / Dc * hs) * head_dim + c0 + e % Dc;
    quant16_q8(qs, h, i / 16, qblock, red, VIEW(char, cb, co), VIEW(uint2, xpb, xpo));
  }
}

// mass[j] += units[r][j] * 2^-24 for the rows r < rows in order (a row per layer: the float
// sums of adding each layer's as it ran), and the units back to 0 for the next step. One item
// per key.
__kernel void attn_units_mass(__global uint* units, int n_valid, int rows, __global float* wb, ulong wo) {
  const int j = get_global_id(0);
  if (j >= n_valid) return;
  __global float* mass = VIEW(float, wb, wo);
  float m = mass[j];
  bool any = false;
  for (int r = 0; r < rows; ++r) {
    const uint u = units[(size_t)r * n_valid + j];
    if (!u) continue;
    m += (float)u * 0x1p-24f;
    units[(size_t)r * n_valid + j] = 0;
    any = true;
  }
  if (any) mass[j] = m;
}

// A decode step's scores over a long context (past attn_decode's keys), in attn_scores' output
// (S and each 64-key block's (max, sum) per row) for attn_pv. attn_scores stages K through
// local memory for a tile of 8 rows, which one token of one kv head's few query heads leaves
// mostly empty; here a key row is read by a team of head_dim / DT items side by side (a warp
// reads whole rows: coalesced), each keeping its DT channels of every query head's q in
// registers, every pass's loads issued before any is used. The team's partial dots meet in
// local memory (`part`, KB * (head_dim / DT) * G floats: sized by the host, so that a 7B's
// 4 KB leaves room for many work-groups a compute unit) and are summed in order. head_dim / DT
// must divide DW, and the partials fit DK floats (the host checks).
#define DT 8
__kernel __attribute__((reqd_work_group_size(DW, 1, 1))) void attn_dec_scores(
    __global const float* qb, ulong qo, __global const int* pb, ulong po, __global const uchar* arena,
    __global const ulong* tb, ulong to, int n_head, int n_head_kv, int hs, int head_dim, int C, int c_shift, int layer,
    int n_valid, int window, float scale, __global float* sb, ulong so, int s_stride, __global float2* mb, ulong mo,
    __local float* part) {
  __local float red[RT][KB];
  __local float bmax[RT];
  const int lid = get_local_id(0), blk = get_group_id(0), hk = get_group_id(1);
  const int G = n_head / n_head_kv, kv_dim = n_head_kv * head_dim;
  const int TL = head_dim / DT, KP = DW / TL, passes = KB / KP;
  const int t = lid % TL, kk = lid / TL;
  const int j0 = blk * KB;
  const int2 vis = visible_keys(CVIEW(int, pb, po)[0], n_valid, window);
  __global const ulong* table = CVIEW(ulong, tb, to);
  __global const float* q = CVIEW(float, qb, qo) + t * DT;
  float8 qf[DG];
  for (int g = 0; g < G; ++g) {
    const float8 v = vload8(0, q + (size_t)q_head(hk, g, G, hs) * head_dim);
    qf[g] = (float8)(round_f16(v.s0), round_f16(v.s1), round_f16(v.s2), round_f16(v.s3), round_f16(v.s4),
                     round_f16(v.s5), round_f16(v.s6), round_f16(v.s7));
  }
  if (j0 < vis.y && j0 + KB > vis.x) {  // uniform: a block nobody sees is only masked
    float8 k[KB / 8];  // passes <= KB / 8: TL <= 32
    for (int p = 0; p < passes; ++p) {
      const int j = j0 + p * KP + kk;
      k[p] = 0.0f;
      if (j >= vis.x && j < vis.y) {
        const int ch = hk * head_dim + t * DT;
        const ulong e = table[KV_CHUNK(j)];
        const float4 a = load_key4(arena, e, layer, C, c_shift, kv_dim, n_head_kv, KV_ROW(j), ch);
        const float4 b = load_key4(arena, e, layer, C, c_shift, kv_dim, n_head_kv, KV_ROW(j), ch + 4);
        k[p] = (float8)(a, b);
      }
    }
    for (int p = 0; p < passes; ++p) {
      for (int g = 0; g < G; ++g) {
        const float8 x = qf[g], y = k[p];
        float acc = x.s0 * y.s0;
        acc = fma(x.s1, y.s1, acc);
        acc = fma(x.s2, y.s2, acc);
        acc = fma(x.s3, y.s3, acc);
        acc = fma(x.s4, y.s4, acc);
        acc = fma(x.s5, y.s5, acc);
        acc = fma(x.s6, y.s6, acc);
        acc = fma(x.s7, y.s7, acc);
        part[((p * KP + kk) * G + g) * TL + t] = acc;
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  // An item per key of the block: its scores, masked; then the block's max and sum per head.
  const int j = j0 + lid;
  __global float* S = VIEW(float, sb, so);
  float s[RT];
  for (int g = 0; g < RT; ++g) {
    s[g] = -INFINITY;
    if (lid < KB && g < G) {
      if (j >= vis.x && j < vis.y) {
        __local const float* pp = part + (lid * G + g) * TL;
        float acc = pp[0];
        for (int i = 1; i < TL; ++i) acc += pp[i];
        s[g] = acc * scale;
      }
      S[(size_t)q_head(hk, g, G, hs) * s_stride + j] = s[g];
    }
    if (lid < KB) red[g][lid] = s[g];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  tree_reduce(red, lid, 0);
  if (lid < RT) bmax[lid] = red[lid][0];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < KB)
    for (int g = 0; g < RT; ++g) red[g][lid] = s[g] == -INFINITY ? 0.0f : exp_ggml(s[g] - bmax[g]);
  barrier(CLK_LOCAL_MEM_FENCE);
  tree_reduce(red, lid, 1);
  if (lid < G) {
    const int n_blocks = s_stride / KB;
    VIEW(float2, mb, mo)[(size_t)q_head(hk, lid, G, hs) * n_blocks + blk] = (float2)(bmax[lid], red[lid][0]);
  }
}

// A decode step's P.V over a long context: attn_pv's work (each row's max and 1 / sum from the
// blocks' stats, f16 weights, weights times V over a split of the keys, partial sums to
// attn_reduce) for one token, in work-groups of DW items: DW / (head_dim / 4) key lanes read
// that many value rows at once where attn_pv's 64 items read 2 (7B: 8), up to DW keys' weights
// at a time. Rows are the kv head's G query heads. Key mass, where asked for, goes to `units`
// (attn_decode's integer shares) in the same pass.
__kernel __attribute__((reqd_work_group_size(DW, 1, 1))) void attn_dec_pv(
    __global const int* pb, ulong po, __global const uchar* arena, __global const ulong* tb, ulong to, int n_head,
    int n_head_kv, int hs, int head_dim, int C, int c_shift, int layer, int n_valid, int window, __global const float* sb,
    ulong so, int s_stride, __global const float2* mb, ulong mo, int split_keys, int n_splits, __global float2* stb,
    ulong sto, __global float* ob, ulong oo, __global float* xb, ulong xo, __global uint* ub, ulong uo, int mass) {
  __local float red[RT][KB];
  __local float rmax[RT], rinv[RT];
  __local float w[DG * DW];
  __local float4 lanes[DW];
  const int lid = get_local_id(0), split = get_group_id(0), hk = get_group_id(1);
  const int G = n_head / n_head_kv, kv_dim = n_head_kv * head_dim;
  const int n_blocks = s_stride / KB;
  __global const float* S = CVIEW(float, sb, so);
  size_t row[RT];
  for (int r = 0; r < RT; ++r) row[r] = (size_t)q_head(hk, min(r, G - 1), G, hs);
  row_stats(CVIEW(float2, mb, mo), row, n_blocks, G, split == 0 ? VIEW(float2, stb, sto) : 0, lid, red, rmax, rinv);

  const int2 vis = visible_keys(CVIEW(int, pb, po)[0], n_valid, window);
  const int CQ = head_dim / 4, KL = DW / CQ;
  const int cq = lid % CQ, kl = lid / CQ;
  const bool active = kl < KL;
  const int ch = hk * head_dim + 4 * cq;
  __global const ulong* table = CVIEW(ulong, tb, to);
  float4 acc[DG];
  for (int g = 0; g < DG; ++g) acc[g] = 0.0f;
  const int k_begin = max(split * split_keys, vis.x);
  const int k_end = min(vis.y, split * split_keys + split_keys);
  for (int jb = k_begin; jb < k_end; jb += DW) {
    const int j = jb + lid;
    for (int g = 0; g < G; ++g) {
      const float sc = j < k_end ? S[row[g] * s_stride + j] : -INFINITY;
      w[g * DW + lid] = sc == -INFINITY ? 0.0f : round_f16(exp_ggml(sc - rmax[g]) * rinv[g]);
    }
    if (mass && j < k_end) {  // this work-group's share of key j's mass, as attn_decode gives it
      uint u = 0;
      for (int g = 0; g < G; ++g) u += (uint)(w[g * DW + lid] * 16777216.0f);
      if (u) atomic_add(VIEW(uint, ub, uo) + j, u);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (active)
      pv_lane(acc, G, w, DW, kl, min(DW, k_end - jb), KL, jb, arena, table, layer, C, c_shift, kv_dim, n_head_kv, hk,
              ch);
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  // Rows q_head(hk, g): the output, or this split's partial sums for attn_reduce.
  if (n_splits == 1)
    store_lane_sums(acc, G, lanes, lid, active, kl, KL, CQ, cq, VIEW(float, ob, oo) + row[0] * head_dim,
                    (size_t)hs * head_dim);
  else
    store_lane_sums(acc, G, lanes, lid, active, kl, KL, CQ, cq,
                    VIEW(float, xb, xo) + (row[0] * n_splits + split) * head_dim, (size_t)hs * n_splits * head_dim);
}
