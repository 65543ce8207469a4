// SPDX-License-Identifier: Apache-2.0
// CPU attention's work plan: how a call is cut into sets of query rows, and where a set's data live.
// Target independent (attention_plan.cpp); attention.cpp and its per-target passes read it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "hal/device.h"
#include "hal/kv_format.h"

// Its own namespace: these names are for attention's files only.
namespace llmsvc::hal::cpu::attn {

// Everything a worker needs, fixed for one call.
struct Plan {
  const float* q = nullptr;
  const int32_t* q_pos = nullptr;
  const KvChunkView* chunks = nullptr;
  int n_chunks = 0;
  int n_tokens = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int group = 0;  // query heads per kv head
  bool rank_major = false;  // query head of (kv head k, member g): g * n_head_kv + k, else k * group + g
  int head_dim = 0;
  float scale = 1.0f;
  int window = 0;
  float* out = nullptr;
  // Prefill sets: (tile of tile_tokens tokens, kv head), the latest tiles first.
  int tile_tokens = 0;
  int n_tiles = 0;
  int64_t n_sets = 0;
  int n_keys = 0;         // keys in the chunk list: bounds the key space of any set
  size_t row_stride = 0;  // floats per score row
  std::atomic<int64_t>* next = nullptr;
  // llama.cpp's summation orders: its f16 GEMM (llamafile) for several query tokens where
  // that GEMM takes the shapes, else ggml_vec_dot_f16, for the V sums over the KV length
  // padded to kv_pad cells (the cells up to the call's last position).
  bool qk_gemm = false;
  bool pv_gemm = false;
  int64_t kv_pad = 0;
  // Key mass (when some chunk asks for it): chunk c's keys are [gkoff[c], gkoff[c + 1]) of
  // every member's mass_acc row, exact sums of weights in units of 2^-24.
  const int32_t* gkoff = nullptr;
  int64_t* const* mass_acc = nullptr;
};

// The sections of a q block (hal/kv_format.h) of one view: (min, scale) pairs, then code rows.
struct QBlock {
  const uint16_t* min = nullptr;
  const uint16_t* scale = nullptr;
  const uint8_t* codes = nullptr;
  size_t row_bytes = 0;
};

inline QBlock q_block(const Plan& p, const KvChunkView& ch, KvPart part) {
  const KvBlockShape shape{ch.n_tokens, p.n_head_kv, p.head_dim};
  const size_t pairs = kv_block_param_bytes(ch.format, part, shape) / (2 * sizeof(uint16_t));
  QBlock b;
  b.min = static_cast<const uint16_t*>(part == KvPart::key ? ch.k : ch.v);
  b.scale = b.min + pairs;
  b.codes = reinterpret_cast<const uint8_t*>(b.scale + pairs);
  b.row_bytes = kv_block_row_bytes(ch.format, shape);
  return b;
}

// A set of query rows computed together: tokens [t0, t0 + n_tok) x the query heads of kv
// heads [kv0, kv0 + n_kv). Row r belongs to kv head kv0 + r / per_head, token
// t0 + (r % per_head) / group, query head (its kv head) * group + r % group (rank-major:
// (r % group) * n_head_kv + its kv head).
struct RowSet {
  int t0 = 0, n_tok = 0, kv0 = 0, n_kv = 0, per_head = 0, count = 0;
  RowSet(const Plan& p, int t0_, int n_tok_, int kv0_, int n_kv_)
      : t0(t0_), n_tok(n_tok_), kv0(kv0_), n_kv(n_kv_), per_head(n_tok_ * p.group), count(per_head * n_kv_) {}
  int token(const Plan& p, int r) const { return t0 + (r % per_head) / p.group; }
  int kv_head(int r) const { return kv0 + r / per_head; }
  size_t offset(const Plan& p, int r) const {  // of the row's head_dim floats in q / out
    const int head = p.rank_major ? (r % p.group) * p.n_head_kv + kv_head(r) : kv_head(r) * p.group + r % p.group;
    return (static_cast<size_t>(token(p, r)) * p.n_head + head) * p.head_dim;
  }
};

// Prefill set number i (the heaviest tiles, latest tokens, first).
inline RowSet prefill_set(const Plan& p, int64_t i) {
  const int tile = p.n_tiles - 1 - static_cast<int>(i / p.n_head_kv);
  const int t0 = tile * p.tile_tokens;
  return RowSet(p, t0, std::min(p.n_tokens, t0 + p.tile_tokens) - t0, static_cast<int>(i % p.n_head_kv), 1);
}

// Where a set's data lives. The set's key space numbers the keys of the chunks it may see
// (chunk seg[s] holds keys [koff[s], koff[s + 1])); row r's score row is sc + r * row_stride,
// indexed by key. Row r sees keys within [lo[r], hi[r]) only; its row block (the rows of one
// micro-kernel) reads weights over [plo[r], phi[r]), the union of the block's spans, where
// the row's own weights outside its span are zero.
struct SetView {
  float* qt = nullptr;  // count x head_dim: the queries rounded to f16
  float* sc = nullptr;  // count x row_stride: scores, then weights
  float* m = nullptr;   // count: per row, the largest score, then 1 / sum
  int32_t* seg = nullptr;
  int32_t* koff = nullptr;
  int32_t* lo = nullptr;
  int32_t* hi = nullptr;
  int32_t* plo = nullptr;
  int32_t* phi = nullptr;
  int n_seg = 0;
  int64_t base_pos = 0;  // position of key 0 (chunks of a sequence hold consecutive positions)
  bool all_f16 = true;   // every chunk f16: the V pass takes llama.cpp's order (vrow)
  const uint16_t** vrow = nullptr;  // per key of an f16 chunk: its V row (kv head 0)
};

// The plan of a call of n_tokens > 0 queries, but for what lives in the call's scratch: the
// set counter (next) and the key mass rows (gkoff, mass_acc).
Plan plan_call(const float* q, int n_tokens, const int32_t* q_pos, const KvChunkView* chunks, int n_chunks,
               const AttentionParams& params, float* out);

// How many members of a team of pool_size work on the call: small calls (short-context
// decode) run on the caller alone, since waking the team costs more.
int team_size(const Plan& p, int pool_size);

// Whether the nth members share one set of all rows (too few sets to keep them busy: decode)
// rather than each taking prefill sets of its own.
bool shares_one_set(const Plan& p, int nth);

// A set of `rows` rows takes set_floats floats and set_ints ints; carve lays its SetView over
// such buffers, with v holding a V row pointer per key of the call (p.n_keys).
size_t set_floats(const Plan& p, int rows);
size_t set_ints(const Plan& p, int rows);
SetView carve(const Plan& p, int rows, float* f, int32_t* i, const uint16_t** v);

// Keys [b, h) of chunk ch visible to a query at position qp (none when b >= h).
inline void visible(const Plan& p, const KvChunkView& ch, int64_t qp, int64_t& b, int64_t& h) {
  h = std::clamp<int64_t>(qp - ch.first_pos + 1, 0, ch.n_tokens);
  b = p.window > 0 ? std::clamp<int64_t>(qp - p.window + 1 - ch.first_pos, 0, ch.n_tokens) : 0;
}

// Calls f(r0, rb, kv_head) for every row block of the set: up to rb_max rows of one kv head.
template <class F>
inline void for_each_row_block(const RowSet& rs, int rb_max, const F& f) {
  for (int hl = 0; hl < rs.n_kv; ++hl)
    for (int r = 0; r < rs.per_head; r += rb_max)
      f(hl * rs.per_head + r, std::min(rb_max, rs.per_head - r), rs.kv0 + hl);
}

// The set's key space (chunks that some row of it may see) and every row's spans.
void build_set(const Plan& p, const RowSet& rs, SetView& sv, int rb_max);

}  // namespace llmsvc::hal::cpu::attn
