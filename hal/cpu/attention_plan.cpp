// SPDX-License-Identifier: Apache-2.0
// CPU attention's work plan: a call's tiles, summation orders and team; each set's keys and buffers.
#include "hal/cpu/attention_plan.h"

#include <limits>

namespace llmsvc::hal::cpu::attn {
namespace {

// Query rows per prefill set (tokens x query heads of one kv head): its score rows stay in
// L1/L2 while the softmax and the V pass read them back.
constexpr int kMaxTileRows = 32;
// Below this many q.k multiply-adds a call runs on the calling thread alone.
constexpr int64_t kMinParallelWork = 256 * 1024;
// Largest score matrix (floats) the team shares; beyond it, per-thread sets.
constexpr size_t kMaxSharedFloats = size_t{8} << 20;

// llama.cpp's KV cache is padded to multiples of 32 cells.
constexpr int kGgmlKvPad = 32;

}  // namespace

Plan plan_call(const float* q, int n_tokens, const int32_t* q_pos, const KvChunkView* chunks, int n_chunks,
               const AttentionParams& params, float* out) {
  Plan p;
  p.q = q;
  p.q_pos = q_pos;
  p.chunks = chunks;
  p.n_chunks = n_chunks;
  p.n_tokens = n_tokens;
  p.n_head = params.n_head;
  p.n_head_kv = params.n_head_kv;
  p.group = params.n_head / params.n_head_kv;
  p.rank_major = params.rank_major;
  p.head_dim = params.head_dim;
  p.scale = params.scale;
  p.window = params.sliding_window;
  p.out = out;

  int64_t n_keys = 0;
  for (int c = 0; c < n_chunks; ++c) n_keys += std::max(0, chunks[c].n_tokens);
  p.n_keys = static_cast<int>(n_keys);
  p.row_stride = static_cast<size_t>(std::max<int64_t>(16, (n_keys + 15) / 16 * 16));  // whole cache lines
  // llamafile's GEMM needs k % 16 == 0 and m % 4 == 0 (KQ: k = head_dim; V: m = head_dim).
  p.qk_gemm = n_tokens > 1 && params.head_dim % 16 == 0;
  p.pv_gemm = n_tokens > 1 && params.head_dim % 4 == 0;
  const int32_t last = *std::max_element(q_pos, q_pos + n_tokens);
  p.kv_pad = (static_cast<int64_t>(last) + kGgmlKvPad) / kGgmlKvPad * kGgmlKvPad;  // cells 0 .. last used

  p.tile_tokens = std::min(n_tokens, std::max(1, kMaxTileRows / p.group));
  p.n_tiles = (n_tokens + p.tile_tokens - 1) / p.tile_tokens;
  p.n_sets = static_cast<int64_t>(p.n_tiles) * p.n_head_kv;
  return p;
}

int team_size(const Plan& p, int pool_size) {
  const int64_t work = static_cast<int64_t>(p.n_tokens) * p.n_head * p.n_keys * p.head_dim;
  return work < kMinParallelWork ? 1 : pool_size;
}

bool shares_one_set(const Plan& p, int nth) {
  const int all_rows = p.n_tokens * p.n_head;
  return p.n_sets < 4 * nth && set_floats(p, all_rows) <= kMaxSharedFloats;
}

size_t set_floats(const Plan& p, int rows) { return static_cast<size_t>(rows) * (p.head_dim + p.row_stride + 1); }
size_t set_ints(const Plan& p, int rows) { return 2 * static_cast<size_t>(p.n_chunks) + 1 + 4 * static_cast<size_t>(rows); }

SetView carve(const Plan& p, int rows, float* f, int32_t* i, const uint16_t** v) {
  SetView sv;
  sv.vrow = v;
  sv.qt = f;
  sv.sc = f + static_cast<size_t>(rows) * p.head_dim;
  sv.m = sv.sc + static_cast<size_t>(rows) * p.row_stride;
  sv.seg = i;
  sv.koff = sv.seg + p.n_chunks;
  sv.lo = sv.koff + p.n_chunks + 1;
  sv.hi = sv.lo + rows;
  sv.plo = sv.hi + rows;
  sv.phi = sv.plo + rows;
  return sv;
}

void build_set(const Plan& p, const RowSet& rs, SetView& sv, int rb_max) {
  int32_t qmin = std::numeric_limits<int32_t>::max(), qmax = std::numeric_limits<int32_t>::min();
  for (int t = rs.t0; t < rs.t0 + rs.n_tok; ++t) {
    qmin = std::min(qmin, p.q_pos[t]);
    qmax = std::max(qmax, p.q_pos[t]);
  }
  int n = 0, k = 0;
  for (int c = 0; c < p.n_chunks; ++c) {
    const KvChunkView& ch = p.chunks[c];
    if (ch.n_tokens <= 0 || ch.first_pos > qmax) continue;  // empty, or in every row's future
    const int64_t last = static_cast<int64_t>(ch.first_pos) + ch.n_tokens - 1;
    if (p.window > 0 && last <= static_cast<int64_t>(qmin) - p.window) continue;  // out of every window
    sv.seg[n] = c;
    sv.koff[n] = k;
    k += ch.n_tokens;
    ++n;
  }
  sv.koff[n] = k;
  sv.n_seg = n;
  sv.base_pos = n > 0 ? p.chunks[sv.seg[0]].first_pos : 0;
  const size_t kvstride = static_cast<size_t>(p.n_head_kv) * p.head_dim;
  sv.all_f16 = true;
  for (int s = 0; s < n; ++s) {
    const KvChunkView& ch = p.chunks[sv.seg[s]];
    if (ch.format != KvFormat::f16) {
      sv.all_f16 = false;
      continue;
    }
    const uint16_t* v = static_cast<const uint16_t*>(ch.v);
    for (int j = 0; j < ch.n_tokens; ++j) sv.vrow[sv.koff[s] + j] = v + static_cast<size_t>(j) * kvstride;
  }

  // Rows of one token share its span: the first and the last key it sees.
  for (int t = 0; t < rs.n_tok; ++t) {
    const int64_t qp = p.q_pos[rs.t0 + t];
    int32_t lo = 0, hi = 0;
    int64_t b = 0, h = 0;
    for (int s = 0; s < n; ++s) {
      visible(p, p.chunks[sv.seg[s]], qp, b, h);
      if (b < h) {
        lo = sv.koff[s] + static_cast<int32_t>(b);
        break;
      }
    }
    for (int s = n - 1; s >= 0; --s) {
      visible(p, p.chunks[sv.seg[s]], qp, b, h);
      if (b < h) {
        hi = sv.koff[s] + static_cast<int32_t>(h);
        break;
      }
    }
    for (int hl = 0; hl < rs.n_kv; ++hl)
      for (int g = 0; g < p.group; ++g) {
        const int r = hl * rs.per_head + t * p.group + g;
        sv.lo[r] = lo;
        sv.hi[r] = hi;
      }
  }
  for_each_row_block(rs, rb_max, [&](int r0, int rb, int) {
    int32_t ulo = std::numeric_limits<int32_t>::max(), uhi = 0;
    for (int r = r0; r < r0 + rb; ++r)
      if (sv.lo[r] < sv.hi[r]) {
        ulo = std::min(ulo, sv.lo[r]);
        uhi = std::max(uhi, sv.hi[r]);
      }
    if (ulo >= uhi) ulo = uhi = 0;
    std::fill(sv.plo + r0, sv.plo + r0 + rb, ulo);
    std::fill(sv.phi + r0, sv.phi + r0 + rb, uhi);
  });
}

}  // namespace llmsvc::hal::cpu::attn
