// SPDX-License-Identifier: Apache-2.0
// CPU attention: the work plan and set bookkeeping (target independent), then the kernels
// (Highway, compiled for every x86/Arm target and picked at run time).
#include "hal/cpu/attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "hal/host/fp16.h"
#include "hal/host/hwy_targets.h"  // same target list as the kernels; before any hwy header
#include "hwy/base.h"

#ifndef LLMSVC_HAL_CPU_ATTENTION_PLAN_
#define LLMSVC_HAL_CPU_ATTENTION_PLAN_
namespace llmsvc::hal::cpu {

struct AttentionAccess {
  static std::vector<std::vector<float>>& per_thread(AttentionScratch& s) { return s.per_thread_; }
  static std::vector<std::vector<int32_t>>& per_thread_i(AttentionScratch& s) { return s.per_thread_i_; }
  static std::vector<float>& shared(AttentionScratch& s) { return s.shared_; }
  static std::vector<int32_t>& shared_i(AttentionScratch& s) { return s.shared_i_; }
  static std::vector<std::vector<const uint16_t*>>& per_thread_v(AttentionScratch& s) { return s.per_thread_v_; }
  static std::vector<const uint16_t*>& shared_v(AttentionScratch& s) { return s.shared_v_; }
  static std::atomic<int64_t>& next_set(AttentionScratch& s) { return s.next_set_; }
  static std::vector<std::vector<int64_t>>& mass(AttentionScratch& s) { return s.mass_; }
  static std::vector<int64_t*>& mass_ptrs(AttentionScratch& s) { return s.mass_ptrs_; }
  static std::vector<int32_t>& gkoff(AttentionScratch& s) { return s.gkoff_; }
};

namespace {

// Query rows per prefill set (tokens x query heads of one kv head): its score rows stay in
// L1/L2 while the softmax and the V pass read them back.
constexpr int kMaxTileRows = 32;
// Below this many q.k multiply-adds a call runs on the calling thread alone.
constexpr int64_t kMinParallelWork = 256 * 1024;
// Largest score matrix (floats) the team shares; beyond it, per-thread sets.
constexpr size_t kMaxSharedFloats = size_t{8} << 20;

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

// llama.cpp's KV cache is padded to multiples of 32 cells.
constexpr int kGgmlKvPad = 32;

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
// t0 + (r % per_head) / group, query head (its kv head) * group + r % group.
struct RowSet {
  int t0 = 0, n_tok = 0, kv0 = 0, n_kv = 0, per_head = 0, count = 0;
  RowSet(const Plan& p, int t0_, int n_tok_, int kv0_, int n_kv_)
      : t0(t0_), n_tok(n_tok_), kv0(kv0_), n_kv(n_kv_), per_head(n_tok_ * p.group), count(per_head * n_kv_) {}
  int token(const Plan& p, int r) const { return t0 + (r % per_head) / p.group; }
  int kv_head(int r) const { return kv0 + r / per_head; }
  size_t offset(const Plan& p, int r) const {  // of the row's head_dim floats in q / out
    const int head = kv_head(r) * p.group + r % p.group;
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

// Scratch indexed by key grows in steps of kKeyStep keys: a context one token longer each
// decode step would otherwise reallocate it at every step.
constexpr size_t kKeyStep = 4096;
template <class V>
void reserve_keys(V& v, int64_t n_keys) {
  const size_t n = static_cast<size_t>(n_keys);
  if (v.capacity() < n) v.reserve((n + kKeyStep - 1) / kKeyStep * kKeyStep);
}

}  // namespace
}  // namespace llmsvc::hal::cpu

// Loops over the rows of a micro-kernel must be unrolled or the accumulators live in memory.
#if defined(__clang__)
#define LLMSVC_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define LLMSVC_UNROLL _Pragma("GCC unroll 16")
#else
#define LLMSVC_UNROLL
#endif
#endif  // LLMSVC_HAL_CPU_ATTENTION_PLAN_

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/cpu/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hal/cpu/ggml_expf-inl.h"
#include "hal/cpu/ggml_sum-inl.h"
#include "hal/host/kv_codes-inl.h"  // RoundF16, LoadF16, LoadCodes, WithTagDividing

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// The KV block readers (hal/host/kv_codes-inl.h), beside this file's own overloads.
using llmsvc::hal::host::HWY_NAMESPACE::LoadCodes;
using llmsvc::hal::host::HWY_NAMESPACE::LoadF16;
using llmsvc::hal::host::HWY_NAMESPACE::RoundF16;
using llmsvc::hal::host::HWY_NAMESPACE::WithTagDividing;

// Rows per micro-kernel: 4 where there are 32 vector registers, 2 where there are 16
// (the q.k kernel keeps rows x 4 accumulators live, the V pass rows x 4).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kRowBlock = 2;
#else
constexpr int kRowBlock = 4;
#endif

inline const hwy::float16_t* as_f16(const void* p) { return static_cast<const hwy::float16_t*>(p); }

inline float RoundF16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

#if !HWY_HAVE_SCALABLE
#if HWY_TARGET == HWY_SCALAR
template <class DF, class V>
HWY_INLINE void Sum4(DF, V a, V b, V c, V e, float scale, float* HWY_RESTRICT out, int n) {
  const float t[4] = {hn::GetLane(a), hn::GetLane(b), hn::GetLane(c), hn::GetLane(e)};
  for (int i = 0; i < n; ++i) out[i] = t[i] * scale;
}
#else
// out[0..n) = scale * (the lane sums of a, b, c, e)[0..n), each sum reduced like Hsum (so a
// key's score does not depend on the keys beside it).
template <class DF, class V>
HWY_INLINE void Sum4(DF df, V a, V b, V c, V e, float scale, float* HWY_RESTRICT out, int n) {
  constexpr size_t kN = hn::MaxLanes(DF());
  const hn::Full128<float> d4;
  hn::Vec<decltype(d4)> s;
  if constexpr (kN == 16) {
    // [a.lo + a.hi | b.lo + b.hi], likewise c, e; then the 128-bit blocks of each half.
    const V ab = hn::Add(hn::ConcatLowerLower(df, b, a), hn::ConcatUpperUpper(df, b, a));
    const V ce = hn::Add(hn::ConcatLowerLower(df, e, c), hn::ConcatUpperUpper(df, e, c));
    V w = hn::OddEvenBlocks(hn::Add(ce, hn::SwapAdjacentBlocks(ce)), hn::Add(ab, hn::SwapAdjacentBlocks(ab)));
    w = hn::Add(w, hn::Shuffle1032(w));  // blocks a, c, b, e: lane 0 = (l0 + l2) + (l1 + l3)
    w = hn::Add(w, hn::Shuffle2301(w));
    alignas(64) static constexpr int32_t kIdx[16] = {0, 8, 4, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const hn::Half<DF> d8;
    s = hn::LowerHalf(d4, hn::LowerHalf(d8, hn::TableLookupLanes(w, hn::SetTableIndices(df, kIdx))));
  } else if constexpr (kN == 8) {
    const V ab = hn::Add(hn::ConcatLowerLower(df, b, a), hn::ConcatUpperUpper(df, b, a));  // blocks a, b
    const V ce = hn::Add(hn::ConcatLowerLower(df, e, c), hn::ConcatUpperUpper(df, e, c));  // blocks c, e
    V t = hn::Add(hn::InterleaveLower(df, ab, ce), hn::InterleaveUpper(df, ab, ce));  // [x0+x2, y0+y2, x1+x3, y1+y3]
    t = hn::Add(t, hn::Shuffle1032(t));                                                  // lanes 0, 1: x, y
    s = hn::InterleaveLower(d4, hn::LowerHalf(d4, t), hn::UpperHalf(d4, t));             // a, b, c, e
  } else if constexpr (kN == 4) {
    const V ab = hn::Add(hn::InterleaveLower(df, a, b), hn::InterleaveUpper(df, a, b));  // [a0+a2, b0+b2, a1+a3, b1+b3]
    const V ce = hn::Add(hn::InterleaveLower(df, c, e), hn::InterleaveUpper(df, c, e));
    const hn::Repartition<double, DF> dd;
    const auto ab64 = hn::BitCast(dd, ab), ce64 = hn::BitCast(dd, ce);
    s = hn::Add(hn::BitCast(df, hn::InterleaveLower(dd, ab64, ce64)),
                hn::BitCast(df, hn::InterleaveUpper(dd, ab64, ce64)));
  } else {
    const float t[4] = {hn::GetLane(a), hn::GetLane(b), hn::GetLane(c), hn::GetLane(e)};
    for (int i = 0; i < n; ++i) out[i] = t[i] * scale;
    return;
  }
  s = hn::Mul(s, hn::Set(d4, scale));
  if (n == 4) {
    hn::StoreU(s, d4, out);
  } else {
    alignas(16) float t[4];
    hn::Store(s, d4, t);
    for (int i = 0; i < n; ++i) out[i] = t[i];
  }
}

#endif  // HWY_TARGET == HWY_SCALAR

// Key rows of one kv head of a q block, widened to f32 one vector at a time (channels c0 + d
// of each row). load(df, row, d, sub) gives sub-vector sub of the kSubs vectors at channel d.
// Codes in channel order (any head_dim).
template <int B>
struct CodeKeys {
  static constexpr int kSubs = 1;
  const uint8_t* codes;
  size_t row_bytes;
  size_t c0;  // the head's first channel
  const uint8_t* row(int j) const { return codes + static_cast<size_t>(j) * row_bytes; }
  template <class DF>
  HWY_INLINE hn::Vec<DF> load(DF df, const uint8_t* HWY_RESTRICT r, size_t d, int) const {
    return hn::ConvertTo(df, LoadCodes<B>(df, r, c0 + d));
  }
};
// Codes a byte vector at a time (B < 8): n bytes hold kSubs = 8 / B vectors, sub-vector sub
// being channels d + i * kSubs + sub (lane i), each one shift and mask away. The query side
// is permuted to match (GroupLanes): the same products, summed in another order.
template <int B>
struct GroupedCodeKeys {
  static constexpr int kSubs = 8 / B;
  const uint8_t* codes;
  size_t row_bytes;
  size_t c0;
  const uint8_t* row(int j) const { return codes + static_cast<size_t>(j) * row_bytes; }
  template <class DF>
  HWY_INLINE hn::Vec<DF> load(DF df, const uint8_t* HWY_RESTRICT r, size_t d, int sub) const {
    const hn::Rebind<uint32_t, DF> du;
    const auto w = hn::PromoteTo(du, hn::LoadU(hn::Rebind<uint8_t, DF>(), r + (c0 + d) / kSubs));
    const auto c = hn::And(hn::ShiftRightSame(w, sub * B), hn::Set(du, (1u << B) - 1));
    return hn::ConvertTo(df, hn::BitCast(hn::RebindToSigned<decltype(du)>(), c));
  }
};

// Whether GroupedCodeKeys<B> serves head_dim with vectors of DF (whole byte groups per head).
#if HWY_TARGET == HWY_SCALAR
template <int B, class DF>
constexpr bool kCanGroup = false;  // one lane: nothing to group (and no ConcatEven)
template <int B, class DF>
void GroupLanes(DF df, float* x, size_t dim);  // never instantiated here
#else
template <int B, class DF>
constexpr bool kCanGroup = B < 8 && 8 % B == 0 && hn::MaxLanes(DF()) >= 4;  // 3 bits: codes in order

// In place, each group of K = 8 / B vectors at x: lane i of vector sub becomes element
// i * K + sub of the group (the order GroupedCodeKeys reads channels in).
template <int B, class DF>
HWY_INLINE void GroupLanes(DF df, float* HWY_RESTRICT x, size_t dim) {
  const size_t n = hn::Lanes(df);
  for (size_t d = 0; d < dim; d += n * (8 / B)) {
    float* g = x + d;
    const auto a = hn::LoadU(df, g), b = hn::LoadU(df, g + n);
    if constexpr (B == 4) {
      hn::StoreU(hn::ConcatEven(df, b, a), df, g);
      hn::StoreU(hn::ConcatOdd(df, b, a), df, g + n);
    } else {
      const auto c = hn::LoadU(df, g + 2 * n), e = hn::LoadU(df, g + 3 * n);
      const auto e1 = hn::ConcatEven(df, b, a), o1 = hn::ConcatOdd(df, b, a);
      const auto e2 = hn::ConcatEven(df, e, c), o2 = hn::ConcatOdd(df, e, c);
      hn::StoreU(hn::ConcatEven(df, e2, e1), df, g);
      hn::StoreU(hn::ConcatEven(df, o2, o1), df, g + n);
      hn::StoreU(hn::ConcatOdd(df, e2, e1), df, g + 2 * n);
      hn::StoreU(hn::ConcatOdd(df, o2, o1), df, g + 3 * n);
    }
  }
}
#endif  // HWY_TARGET == HWY_SCALAR

// Dot products of RB query rows with keys j in [j0, j1): each K vector is widened once and
// used by all RB rows; keys go four at a time so the reductions are shared. A key's dot
// product accumulates lane-wise over head_dim in order; finish(r, acc[4], j, cnt) reduces
// row r's four accumulators for keys j .. j + cnt.
template <int RB, class DF, class Keys, class Finish>
HWY_INLINE void QkCore(DF df, const float* HWY_RESTRICT qt, size_t dim, const Keys& keys, int j0, int j1,
                       const Finish& finish) {
  using V = hn::Vec<DF>;
  const size_t n = hn::Lanes(df);
  for (int j = j0; j < j1; j += 4) {
    const int cnt = std::min(4, j1 - j);
    // Past the end: repeat the last key (its lane sums are computed and dropped).
    const auto k0 = keys.row(j);
    const auto k1 = keys.row(j + std::min(1, cnt - 1));
    const auto k2 = keys.row(j + std::min(2, cnt - 1));
    const auto k3 = keys.row(j + std::min(3, cnt - 1));
    V acc[RB][4];
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r)
      LLMSVC_UNROLL
      for (int i = 0; i < 4; ++i) acc[r][i] = hn::Zero(df);
    for (size_t d = 0; d < dim; d += n * Keys::kSubs) {
      LLMSVC_UNROLL
      for (int sub = 0; sub < Keys::kSubs; ++sub) {
        const V kv0 = keys.load(df, k0, d, sub);
        const V kv1 = keys.load(df, k1, d, sub);
        const V kv2 = keys.load(df, k2, d, sub);
        const V kv3 = keys.load(df, k3, d, sub);
        LLMSVC_UNROLL
        for (int r = 0; r < RB; ++r) {
          const V qv = hn::LoadU(df, qt + r * dim + d + sub * n);
          acc[r][0] = hn::MulAdd(qv, kv0, acc[r][0]);
          acc[r][1] = hn::MulAdd(qv, kv1, acc[r][1]);
          acc[r][2] = hn::MulAdd(qv, kv2, acc[r][2]);
          acc[r][3] = hn::MulAdd(qv, kv3, acc[r][3]);
        }
      }
    }
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r) finish(r, acc[r], j, cnt);
  }
}

// s[r][j] = scale * (qt[r] . k[j]) over f16 keys, reduced by Sum4: the order of llamafile's


// Single-token scores: ggml_vec_dot_f16 over head_dim, for RB rows and keys [j0, j1). Four
// 16-lane partial sums per step of 64 elements (each fed by its own FMA chain), combined
// (s0 + s2) + (s1 + s3), reduced; elements past the last whole step added in double.
template <int RB, class DF>
HWY_INLINE void QkRowsSingle(DF df, const float* HWY_RESTRICT qt, size_t dim, const uint16_t* HWY_RESTRICT k,
                             size_t kstride, int j0, int j1, float scale, float* HWY_RESTRICT s, size_t sstride) {
  using V = hn::Vec<DF>;
  const hn::Rebind<hwy::float16_t, DF> dh;
  constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
  constexpr int kPer = kGgmlStep / kN;  // vectors per step
  const size_t np = dim / kGgmlStep * kGgmlStep;
  int j = j0;
  if constexpr (kN == kGgmlLanes) {
    if (dim == kGgmlStep) {
      // One step: each partial sum is one product. Four keys at a time, their K vectors kept
      // for every row, their reductions shared (Sum4).
      for (; j + 4 <= j1; j += 4) {
        V kv[4][4];
        LLMSVC_UNROLL
        for (int i = 0; i < 4; ++i)
          LLMSVC_UNROLL
          for (int v = 0; v < 4; ++v) kv[i][v] = hn::PromoteTo(df, hn::LoadU(dh, as_f16(k + (j + i) * kstride) + v * kN));
        LLMSVC_UNROLL
        for (int r = 0; r < RB; ++r) {
          V q[4], t[4];
          LLMSVC_UNROLL
          for (int v = 0; v < 4; ++v) q[v] = hn::LoadU(df, qt + r * dim + v * kN);
          LLMSVC_UNROLL
          for (int i = 0; i < 4; ++i) {
            t[i] = hn::Add(hn::Add(hn::Mul(q[0], kv[i][0]), hn::Mul(q[2], kv[i][2])),
                           hn::Add(hn::Mul(q[1], kv[i][1]), hn::Mul(q[3], kv[i][3])));
          }
          Sum4(df, t[0], t[1], t[2], t[3], scale, s + r * sstride + j, 4);
        }
      }
    }
  }
  for (; j < j1; ++j) {
    const uint16_t* kraw = k + static_cast<size_t>(j) * kstride;
    const hwy::float16_t* kj = as_f16(kraw);
    V acc[RB][kPer];
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r)
      LLMSVC_UNROLL
      for (int v = 0; v < kPer; ++v) acc[r][v] = hn::Zero(df);
    for (size_t i = 0; i < np; i += kGgmlStep) {
      LLMSVC_UNROLL
      for (int v = 0; v < kPer; ++v) {
        const V kv = hn::PromoteTo(df, hn::LoadU(dh, kj + i + v * kN));
        LLMSVC_UNROLL
        for (int r = 0; r < RB; ++r) acc[r][v] = hn::MulAdd(hn::LoadU(df, qt + r * dim + i + v * kN), kv, acc[r][v]);
      }
    }
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r) {
      double sum = VecDotSum(df, acc[r]);
      for (size_t d = np; d < dim; ++d) sum += static_cast<double>(qt[r * dim + d] * fp16_to_fp32(kraw[d]));
      s[r * sstride + j] = static_cast<float>(sum) * scale;
    }
  }
}

// s[r][j] = scale * (qt[r] . k[j]) for RB rows and keys j in [j0, j1) in the order of
// llamafile's f16 GEMM (llama.cpp's prompt path): 16 lanes over head_dim, lane l one FMA chain
// over the elements l, l + 16, ..., then folded as _mm512_reduce_add_ps. With fewer lanes a
// 16-lane chain is kP vectors (dim % 16 == 0). Each K vector is widened once and used by all
// RB rows; with 16 lanes keys go four at a time so the reductions are shared (Sum4).
template <int RB, class DF>
HWY_INLINE void QkRows(DF df, const float* HWY_RESTRICT qt, size_t dim, const uint16_t* HWY_RESTRICT k,
                       size_t kstride, int j0, int j1, float scale, float* HWY_RESTRICT s, size_t sstride) {
  using V = hn::Vec<DF>;
  const hn::Rebind<hwy::float16_t, DF> dh;
  constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
  constexpr int kP = PiecesPer16<DF>();  // vectors per 16-lane chain
  constexpr int kK = kP >= 4 ? 1 : 4 / kP;                    // keys per pass
  for (int j = j0; j < j1; j += kK) {
    const int cnt = std::min(kK, j1 - j);
    // Past the end: repeat the last key (its lane sums are computed and dropped).
    const hwy::float16_t* kp[kK];
    kp[0] = as_f16(k + static_cast<size_t>(j) * kstride);
    for (int i = 1; i < kK; ++i) kp[i] = i < cnt ? kp[i - 1] + kstride : kp[i - 1];
    V acc[RB][kK][kP];
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r)
      LLMSVC_UNROLL
      for (int i = 0; i < kK; ++i)
        LLMSVC_UNROLL
        for (int c = 0; c < kP; ++c) acc[r][i][c] = hn::Zero(df);
    for (size_t d = 0; d < dim; d += kN * kP) {
      LLMSVC_UNROLL
      for (int c = 0; c < kP; ++c) {
        V kv[kK];
        LLMSVC_UNROLL
        for (int i = 0; i < kK; ++i) kv[i] = hn::PromoteTo(df, hn::LoadU(dh, kp[i] + d + c * kN));
        LLMSVC_UNROLL
        for (int r = 0; r < RB; ++r) {
          const V qv = hn::LoadU(df, qt + r * dim + d + c * kN);
          LLMSVC_UNROLL
          for (int i = 0; i < kK; ++i) acc[r][i][c] = hn::MulAdd(qv, kv[i], acc[r][i][c]);
        }
      }
    }
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r) {
      if constexpr (kK == 4) {
        Sum4(df, acc[r][0][0], acc[r][1][0], acc[r][2][0], acc[r][3][0], scale, s + r * sstride + j, cnt);
      } else {
        for (int i = 0; i < cnt; ++i) s[r * sstride + j + i] = Reduce16(df, acc[r][i]) * scale;
      }
    }
  }
}

// q . k_j = q . min + (q * scale) . c_j, so each row's q * scale and q . min are formed once
// per chunk and the codes are widened to f32 in registers. qs: RB x dim floats of scratch.
// Grouped: codes read a byte vector at a time (GroupedCodeKeys), q * scale permuted to match.
template <int B, int RB, bool kGrouped, class DF>
HWY_INLINE void QkRowsQ(DF df, const float* HWY_RESTRICT qt, size_t dim, const QBlock& kb, size_t c0, int j0,
                        int j1, float scale, float* HWY_RESTRICT s, size_t sstride, float* HWY_RESTRICT qs) {
  using V = hn::Vec<DF>;
  const size_t n = hn::Lanes(df);
  float qm[RB];
  LLMSVC_UNROLL
  for (int r = 0; r < RB; ++r) {
    V acc = hn::Zero(df);
    for (size_t d = 0; d < dim; d += n) {
      const V qv = hn::LoadU(df, qt + r * dim + d);
      hn::StoreU(hn::Mul(qv, LoadF16(df, kb.scale + c0 + d)), df, qs + r * dim + d);
      acc = hn::MulAdd(qv, LoadF16(df, kb.min + c0 + d), acc);
    }
    qm[r] = Hsum(df, acc);
    if constexpr (kGrouped) GroupLanes<B>(df, qs + r * dim, dim);
  }
  const auto finish = [&](int r, const V(&a)[4], int j, int cnt) {
    float t[4];
    Sum4(df, a[0], a[1], a[2], a[3], 1.0f, t, cnt);
    for (int i = 0; i < cnt; ++i) s[r * sstride + j + i] = (qm[r] + t[i]) * scale;
  };
  if constexpr (kGrouped) {
    QkCore<RB>(df, qs, dim, GroupedCodeKeys<B>{kb.codes, kb.row_bytes, c0}, j0, j1, finish);
  } else {
    QkCore<RB>(df, qs, dim, CodeKeys<B>{kb.codes, kb.row_bytes, c0}, j0, j1, finish);
  }
}

// Keys [j0, j1) of a q value block into the V accumulators: v_j = min_j + scale_j * c_j (one
// pair per token and head), decoded in registers, then the same products as for f16.
template <int B, int RB, int DU, class DF, class V = hn::Vec<DF>>
HWY_INLINE void PvSegQ(DF df, const QBlock& vb, int n_head_kv, int kv_head, size_t c0, int j0, int j1,
                       const float* HWY_RESTRICT pp, size_t pstride, V (&a)[RB][DU]) {
  const size_t n = hn::Lanes(df);
  for (int j = j0; j < j1; ++j) {
    const size_t i = static_cast<size_t>(j) * n_head_kv + kv_head;
    const V mn = hn::Set(df, fp16_to_fp32(vb.min[i])), sc = hn::Set(df, fp16_to_fp32(vb.scale[i]));
    const uint8_t* row = vb.codes + static_cast<size_t>(j) * vb.row_bytes;
    V vv[DU];
    LLMSVC_UNROLL
    for (int u = 0; u < DU; ++u) vv[u] = hn::MulAdd(sc, hn::ConvertTo(df, LoadCodes<B>(df, row, c0 + u * n)), mn);
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r) {
      const V pr = hn::Set(df, pp[r * pstride + j]);
      LLMSVC_UNROLL
      for (int u = 0; u < DU; ++u) a[r][u] = hn::MulAdd(pr, vv[u], a[r][u]);
    }
  }
}

// Columns [d0, d0 + DU vectors) of the V pass for RB rows over keys [klo, khi) of the set:
// out_r = sum_j p_r[j] * V[j], accumulated lane-wise in key order. RB x DU accumulators stay
// in registers across chunks; each widened V vector serves all RB rows.

// One of llama.cpp's lane chains of the V pass, for RB rows and DU vectors of columns at kvoff
// (in a V row): dst[r][u] = the FMA chain p_r[k] * V_k over the keys k in [klo, min(khi, key
// of position pos_end)) whose position is congruent to res modulo m, in key order.
template <int RB, int DU, class DF, class V = hn::Vec<DF>>
HWY_INLINE void PvChain(DF df, const SetView& sv, const float* HWY_RESTRICT prow, size_t pstride, size_t kvoff,
                        int klo, int khi, int64_t pos_end, int m, int res, V (&dst)[RB][DU]) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t n = hn::Lanes(df);
  V a[RB][DU];
  LLMSVC_UNROLL
  for (int r = 0; r < RB; ++r)
    LLMSVC_UNROLL
    for (int u = 0; u < DU; ++u) a[r][u] = hn::Zero(df);
  const int64_t kend = std::min<int64_t>(khi, pos_end - sv.base_pos);
  int64_t k = klo + ((res - (sv.base_pos + klo)) % m + m) % m;
  for (; k < kend; k += m) {
    const hwy::float16_t* vp = as_f16(sv.vrow[k] + kvoff);
    V vv[DU];
    LLMSVC_UNROLL
    for (int u = 0; u < DU; ++u) vv[u] = hn::PromoteTo(df, hn::LoadU(dh, vp + u * n));
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r) {
      const V pr = hn::Set(df, prow[r * pstride + k]);
      LLMSVC_UNROLL
      for (int u = 0; u < DU; ++u) a[r][u] = hn::MulAdd(pr, vv[u], a[r][u]);
    }
  }
  LLMSVC_UNROLL
  for (int r = 0; r < RB; ++r)
    LLMSVC_UNROLL
    for (int u = 0; u < DU; ++u) dst[r][u] = a[r][u];
}

// Columns [d0, d0 + DU vectors) of the V pass for RB rows over keys [klo, khi) of the set:
// out_r = sum_k p_r[k] * V_k in llama.cpp's order. Batch (llamafile's f16 GEMM): 16 lane
// chains, the key at position P in chain P % 16, the chains then summed as
// _mm512_reduce_add_ps. Single token (ggml_vec_dot_f16 over the kv_pad cells): 64 chains over
// the positions below the last whole step of 64, chain c with c + 16, c + 32, c + 48 combined
// (c + c+32) + (c+16 + c+48), the 16 results summed as _mm512_reduce_add_ps, then the keys of
// the last partial step added one by one in double. Keys outside a row's span weigh 0 and
// leave every chain unchanged.
template <int RB, int DU, class DF>
HWY_INLINE void PvColsExact(DF df, const Plan& p, const SetView& sv, const float* HWY_RESTRICT prow,
                            size_t pstride, int kv_head, int klo, int khi, size_t d0, float* const* out) {
  using V = hn::Vec<DF>;
  const size_t n = hn::Lanes(df);
  const size_t dim = static_cast<size_t>(p.head_dim);
  const size_t kvoff = static_cast<size_t>(kv_head) * dim + d0;
  V lane[kGgmlLanes][RB][DU];
  const int64_t np = p.pv_gemm ? std::numeric_limits<int64_t>::max() : p.kv_pad / kGgmlStep * kGgmlStep;
  for (int l = 0; l < kGgmlLanes; ++l) {
    if (p.pv_gemm) {
      PvChain<RB, DU>(df, sv, prow, pstride, kvoff, klo, khi, np, kGgmlLanes, l, lane[l]);
      continue;
    }
    V c[4][RB][DU];
    for (int g = 0; g < 4; ++g) PvChain<RB, DU>(df, sv, prow, pstride, kvoff, klo, khi, np, kGgmlStep, g * kGgmlLanes + l, c[g]);
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r)
      LLMSVC_UNROLL
      for (int u = 0; u < DU; ++u) lane[l][r][u] = hn::Add(hn::Add(c[0][r][u], c[2][r][u]), hn::Add(c[1][r][u], c[3][r][u]));
  }
  for (int h = kGgmlLanes / 2; h >= 1; h /= 2)
    for (int l = 0; l < h; ++l)
      LLMSVC_UNROLL
      for (int r = 0; r < RB; ++r)
        LLMSVC_UNROLL
        for (int u = 0; u < DU; ++u) lane[l][r][u] = hn::Add(lane[l + h][r][u], lane[l][r][u]);
  LLMSVC_UNROLL
  for (int r = 0; r < RB; ++r)
    LLMSVC_UNROLL
    for (int u = 0; u < DU; ++u) hn::StoreU(lane[0][r][u], df, out[r] + d0 + u * n);
  // Single token: keys at positions [np, kv_pad), one by one: products in f32, sums in f64.
  const int64_t k0 = std::max<int64_t>(klo, np - sv.base_pos);
  if (p.pv_gemm || k0 >= khi) return;
#if HWY_TARGET != HWY_SCALAR
  if constexpr (hn::MaxLanes(DF()) >= 2) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    const hn::Repartition<double, DF> dd;
    const hn::Half<DF> dhalf;
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r) {
      LLMSVC_UNROLL
      for (int u = 0; u < DU; ++u) {
        const V s0 = lane[0][r][u];
        auto lo = hn::PromoteTo(dd, hn::LowerHalf(dhalf, s0)), hi = hn::PromoteTo(dd, hn::UpperHalf(dhalf, s0));
        for (int64_t k = k0; k < khi; ++k) {
          const V prod =
              hn::Mul(hn::Set(df, prow[r * pstride + k]), hn::PromoteTo(df, hn::LoadU(dh, as_f16(sv.vrow[k] + kvoff + u * n))));
          lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(dhalf, prod)));
          hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(dhalf, prod)));
        }
        hn::StoreU(hn::Combine(df, hn::DemoteTo(dhalf, hi), hn::DemoteTo(dhalf, lo)), df, out[r] + d0 + u * n);
      }
    }
    return;
  }
#endif
  for (int r = 0; r < RB; ++r)
    for (size_t d = 0; d < DU * n; ++d) {
      double sum = out[r][d0 + d];
      for (int64_t k = k0; k < khi; ++k) sum += static_cast<double>(prow[r * pstride + k] * fp16_to_fp32(sv.vrow[k][kvoff + d]));
      out[r][d0 + d] = static_cast<float>(sum);
    }
}
// Any mix of formats (q chunks in the set): the V sum over segments in key order, q values
// decoded in registers (PvSegQ). Deterministic, but not llama.cpp's order (it has no q cache).
template <int RB, int DU, class DF>
HWY_INLINE void PvColsSeg(DF df, const Plan& p, const SetView& sv, const float* HWY_RESTRICT prow, size_t pstride,
                          int kv_head, int klo, int khi, int s, size_t d0, float* const* out) {
  using V = hn::Vec<DF>;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t n = hn::Lanes(df);
  const size_t dim = static_cast<size_t>(p.head_dim);
  const size_t kvstride = static_cast<size_t>(p.n_head_kv) * dim;
  V a[RB][DU];
  LLMSVC_UNROLL
  for (int r = 0; r < RB; ++r)
    LLMSVC_UNROLL
    for (int u = 0; u < DU; ++u) a[r][u] = hn::Zero(df);
  for (; s < sv.n_seg && sv.koff[s] < khi; ++s) {
    const KvChunkView& ch = p.chunks[sv.seg[s]];
    const int base = sv.koff[s];
    const int j0 = std::max(klo - base, 0), j1 = std::min(khi - base, ch.n_tokens);
    const float* pp = prow + base;
    if (ch.format != KvFormat::f16) {
      const QBlock vb = q_block(p, ch, KvPart::value);
      const size_t c0 = kv_head * dim + d0;
      switch (ch.format) {
        case KvFormat::q8: PvSegQ<8>(df, vb, p.n_head_kv, kv_head, c0, j0, j1, pp, pstride, a); break;
        case KvFormat::q4: PvSegQ<4>(df, vb, p.n_head_kv, kv_head, c0, j0, j1, pp, pstride, a); break;
        case KvFormat::q3: PvSegQ<3>(df, vb, p.n_head_kv, kv_head, c0, j0, j1, pp, pstride, a); break;
        default: PvSegQ<2>(df, vb, p.n_head_kv, kv_head, c0, j0, j1, pp, pstride, a); break;
      }
      continue;
    }
    const hwy::float16_t* vp = as_f16(static_cast<const uint16_t*>(ch.v) + static_cast<size_t>(j0) * kvstride + kv_head * dim + d0);
    for (int j = j0; j < j1; ++j, vp += kvstride) {
      V vv[DU];
      LLMSVC_UNROLL
      for (int u = 0; u < DU; ++u) vv[u] = hn::PromoteTo(df, hn::LoadU(dh, vp + u * n));
      LLMSVC_UNROLL
      for (int r = 0; r < RB; ++r) {
        const V pr = hn::Set(df, pp[r * pstride + j]);
        LLMSVC_UNROLL
        for (int u = 0; u < DU; ++u) a[r][u] = hn::MulAdd(pr, vv[u], a[r][u]);
      }
    }
  }
  LLMSVC_UNROLL
  for (int r = 0; r < RB; ++r)
    LLMSVC_UNROLL
    for (int u = 0; u < DU; ++u) hn::StoreU(a[r][u], df, out[r] + d0 + u * n);
}
#else
// Scalable vectors cannot live in arrays: one row and one key at a time.
template <class DF, class V>
HWY_INLINE void Sum4(DF df, V a, V b, V c, V e, float scale, float* HWY_RESTRICT out, int n) {
  const float t[4] = {Hsum(df, a), Hsum(df, b), Hsum(df, c), Hsum(df, e)};
  for (int i = 0; i < n; ++i) out[i] = t[i] * scale;
}
template <int RB, class DF>
HWY_INLINE void QkRows(DF df, const float* HWY_RESTRICT qt, size_t dim, const uint16_t* HWY_RESTRICT k,
                       size_t kstride, int j0, int j1, float scale, float* HWY_RESTRICT s, size_t sstride) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t n = hn::Lanes(df);
  for (int r = 0; r < RB; ++r)
    for (int j = j0; j < j1; ++j) {
      const hwy::float16_t* kj = as_f16(k + static_cast<size_t>(j) * kstride);
      auto acc = hn::Zero(df);
      for (size_t d = 0; d < dim; d += n)
        acc = hn::MulAdd(hn::LoadU(df, qt + r * dim + d), hn::PromoteTo(df, hn::LoadU(dh, kj + d)), acc);
      s[r * sstride + j] = Hsum(df, acc) * scale;
    }
}
// Scalable vectors: llama.cpp's single-token order is not reproduced (approximate).
template <int RB, class DF>
HWY_INLINE void QkRowsSingle(DF df, const float* HWY_RESTRICT qt, size_t dim, const uint16_t* HWY_RESTRICT k,
                             size_t kstride, int j0, int j1, float scale, float* HWY_RESTRICT s, size_t sstride) {
  QkRows<RB>(df, qt, dim, k, kstride, j0, j1, scale, s, sstride);
}
template <int B, class DF>
constexpr bool kCanGroup = false;  // the grouped reader keeps vectors in arrays
template <int B, int RB, bool, class DF>
HWY_INLINE void QkRowsQ(DF df, const float* HWY_RESTRICT qt, size_t dim, const QBlock& kb, size_t c0, int j0,
                        int j1, float scale, float* HWY_RESTRICT s, size_t sstride, float* HWY_RESTRICT) {
  const size_t n = hn::Lanes(df);
  for (int r = 0; r < RB; ++r)
    for (int j = j0; j < j1; ++j) {
      const uint8_t* row = kb.codes + static_cast<size_t>(j) * kb.row_bytes;
      auto acc = hn::Zero(df);
      for (size_t d = 0; d < dim; d += n) {
        const auto kv = hn::MulAdd(LoadF16(df, kb.scale + c0 + d), hn::ConvertTo(df, LoadCodes<B>(df, row, c0 + d)),
                                   LoadF16(df, kb.min + c0 + d));
        acc = hn::MulAdd(hn::LoadU(df, qt + r * dim + d), kv, acc);
      }
      s[r * sstride + j] = Hsum(df, acc) * scale;
    }
}
// One lane vector of v_j (columns [c, c + lanes) of its head's row) in f32.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadValue(DF df, const Plan& p, const KvChunkView& ch, int j, int kv_head, size_t c) {
  const size_t dim = static_cast<size_t>(p.head_dim), kvstride = static_cast<size_t>(p.n_head_kv) * dim;
  if (ch.format == KvFormat::f16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, as_f16(static_cast<const uint16_t*>(ch.v) + j * kvstride + c)));
  }
  const QBlock vb = q_block(p, ch, KvPart::value);
  const size_t i = static_cast<size_t>(j) * p.n_head_kv + kv_head;
  const uint8_t* row = vb.codes + static_cast<size_t>(j) * vb.row_bytes;
  hn::Vec<hn::Rebind<int32_t, DF>> codes;
  switch (ch.format) {
    case KvFormat::q8: codes = LoadCodes<8>(df, row, c); break;
    case KvFormat::q4: codes = LoadCodes<4>(df, row, c); break;
    case KvFormat::q3: codes = LoadCodes<3>(df, row, c); break;
    default: codes = LoadCodes<2>(df, row, c); break;
  }
  return hn::MulAdd(hn::Set(df, fp16_to_fp32(vb.scale[i])), hn::ConvertTo(df, codes), hn::Set(df, fp16_to_fp32(vb.min[i])));
}
template <int RB, int DU, class DF>
HWY_INLINE void PvColsSeg(DF df, const Plan& p, const SetView& sv, const float* HWY_RESTRICT prow, size_t pstride,
                          int kv_head, int klo, int khi, int s0, size_t d0, float* const* out) {
  const size_t n = hn::Lanes(df);
  const size_t dim = static_cast<size_t>(p.head_dim);
  for (int r = 0; r < RB; ++r)
    for (int u = 0; u < DU; ++u) {
      auto a = hn::Zero(df);
      for (int s = s0; s < sv.n_seg && sv.koff[s] < khi; ++s) {
        const KvChunkView& ch = p.chunks[sv.seg[s]];
        const int base = sv.koff[s];
        const int j0 = std::max(klo - base, 0), j1 = std::min(khi - base, ch.n_tokens);
        for (int j = j0; j < j1; ++j)
          a = hn::MulAdd(hn::Set(df, prow[r * pstride + base + j]),
                         LoadValue(df, p, ch, j, kv_head, kv_head * dim + d0 + u * n), a);
      }
      hn::StoreU(a, df, out[r] + d0 + u * n);
    }
}
#endif

// Calls f(std::integral_constant<int, n>) for a runtime n in [1, N].
template <int N, class F>
HWY_INLINE void WithCount(int n, const F& f) {
  if constexpr (N > 1) {
    if (n < N) return WithCount<N - 1>(n, f);
  }
  f(std::integral_constant<int, N>());
}

// Queries of rows [r0, r1), rounded to f16 (llama.cpp converts q to the K cache's type).
template <class DF>
void LoadQueries(DF df, const Plan& p, const RowSet& rs, const SetView& sv, int r0, int r1) {
  const size_t dim = static_cast<size_t>(p.head_dim), n = hn::Lanes(df);
  for (int r = r0; r < r1; ++r) {
    const float* src = p.q + rs.offset(p, r);
    float* dst = sv.qt + r * dim;
    for (size_t d = 0; d < dim; d += n) hn::StoreU(RoundF16(df, hn::LoadU(df, src + d)), df, dst + d);
  }
}


// Per-thread scratch of QkRowsQ (team members share the set, not this).
inline float* QueryScratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}


// Score pass over segments [s0, s1) of the set, every row block. Within a row's span, keys
// it does not see (possible only when chunks are out of position order) get -inf.
template <class DF>
void ScoreSegs(DF df, const Plan& p, const RowSet& rs, const SetView& sv, int s0, int s1) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t dim = static_cast<size_t>(p.head_dim);
  const size_t kvstride = static_cast<size_t>(p.n_head_kv) * dim;
  float* qs = QueryScratch(kRowBlock * dim);  // per member: q * scale of a row block (q chunks)
  for (int s = s0; s < s1; ++s) {
    const KvChunkView& ch = p.chunks[sv.seg[s]];
    const int base = sv.koff[s];
    for_each_row_block(rs, kRowBlock, [&](int r0, int rb, int kv_head) {
      int64_t b[kRowBlock], h[kRowBlock];
      int64_t ub = ch.n_tokens, uh = 0;
      for (int i = 0; i < rb; ++i) {
        visible(p, ch, p.q_pos[rs.token(p, r0 + i)], b[i], h[i]);
        if (b[i] < h[i]) {
          ub = std::min(ub, b[i]);
          uh = std::max(uh, h[i]);
        } else {
          b[i] = h[i] = 0;
        }
      }
      float* srow = sv.sc + r0 * p.row_stride + base;
      if (ub < uh) {
        const int j0 = static_cast<int>(ub), j1 = static_cast<int>(uh);
        const float* qt = sv.qt + r0 * dim;
        WithCount<kRowBlock>(rb, [&](auto rows) {
          constexpr int R = decltype(rows)::value;
          if (ch.format == KvFormat::f16) {
            (p.qk_gemm ? QkRows<R, DF> : QkRowsSingle<R, DF>)(df, qt, dim, static_cast<const uint16_t*>(ch.k) + kv_head * dim,
                                                              kvstride, j0, j1, p.scale, srow, p.row_stride);
            return;
          }
          const QBlock kb = q_block(p, ch, KvPart::key);
          const size_t c0 = kv_head * dim;
          const auto run = [&](auto bits) {
            constexpr int B = decltype(bits)::value;
            if constexpr (kCanGroup<B, DF>) {
              if (dim % (hn::Lanes(df) * (8 / B)) == 0)
                return QkRowsQ<B, R, true>(df, qt, dim, kb, c0, j0, j1, p.scale, srow, p.row_stride, qs);
            }
            QkRowsQ<B, R, false>(df, qt, dim, kb, c0, j0, j1, p.scale, srow, p.row_stride, qs);
          };
          switch (ch.format) {
            case KvFormat::q8: run(std::integral_constant<int, 8>()); break;
            case KvFormat::q4: run(std::integral_constant<int, 4>()); break;
            case KvFormat::q3: run(std::integral_constant<int, 3>()); break;
            default: run(std::integral_constant<int, 2>()); break;
          }
        });
      }
      for (int i = 0; i < rb; ++i) {
        const int64_t c0 = std::max<int64_t>(sv.lo[r0 + i] - base, 0);
        const int64_t c1 = std::min<int64_t>(sv.hi[r0 + i] - base, ch.n_tokens);
        if (c0 >= c1 || (b[i] <= c0 && h[i] >= c1)) continue;  // all of it seen (the usual case)
        float* row = srow + i * p.row_stride;
        std::fill(row + c0, row + std::clamp(b[i], c0, c1), kNegInf);
        std::fill(row + std::clamp(h[i], c0, c1), row + c1, kNegInf);
      }
    });
  }
}

// Softmax of rows [r0, r1), in place: scores become f16-rounded weights over each row's
// padded span. The sum runs over vectors of keys from the row's first key: f32 lane sums
// (Hsum order) added in double, as ggml_vec_soft_max_f32 does. Rows go in groups that fit
// in L1, three sweeps over each group (max, exp and sum, normalize), so that one row's
// sum -> 1 / sum -> weights latency overlaps the next rows' work.
template <class DF>
void SoftmaxGroup(DF df, const Plan& p, const SetView& sv, int r0, int r1) {
  using V = hn::Vec<DF>;
  const int n = static_cast<int>(hn::Lanes(df));
  for (int r = r0; r < r1; ++r) {
    const float* row = sv.sc + r * p.row_stride;
    const int lo = sv.lo[r], hi = sv.hi[r];
    float m = -std::numeric_limits<float>::infinity();
    int j = lo;
    if (hi - lo >= n) {
      V vm = hn::LoadU(df, row + j);
      for (j += n; j + n <= hi; j += n) vm = hn::Max(vm, hn::LoadU(df, row + j));
      m = hn::GetLane(hn::MaxOfLanes(df, vm));
    }
    for (; j < hi; ++j) m = std::max(m, row[j]);
    sv.m[r] = m;
  }

  for (int r = r0; r < r1; ++r) {
    float* row = sv.sc + r * p.row_stride;
    const int lo = sv.lo[r], hi = sv.hi[r];
    if (lo >= hi) continue;
    const V vm = hn::Set(df, sv.m[r]);
    double sum = 0.0;
#if !HWY_HAVE_SCALABLE
    // ggml adds the exponentials of 16 cells at a time from cell 0: groups of 16 positions,
    // where keys outside [lo, hi) count as exp(-inf) = 0.
    constexpr int kN = static_cast<int>(hn::MaxLanes(DF()));
    int j = lo - static_cast<int>((sv.base_pos + lo) % kGgmlLanes);
    while (j < hi) {
      if (kN == kGgmlLanes && j >= lo && j + 4 * kN <= hi) {  // four groups share one reduction
        V e[4];
        for (int i = 0; i < 4; ++i) {
          e[i] = ExpGgml(df, hn::Sub(hn::LoadU(df, row + j + i * kN), vm));
          hn::StoreU(e[i], df, row + j + i * kN);
        }
        float t[4];
        Sum4(df, e[0], e[1], e[2], e[3], 1.0f, t, 4);
        for (int i = 0; i < 4; ++i) sum += static_cast<double>(t[i]);
        j += 4 * kN;
        continue;
      }
      HWY_ALIGN float t[kGgmlLanes];
      const bool whole = j >= lo && j + kGgmlLanes <= hi;
      for (int i = 0; i < kGgmlLanes; ++i) {
        t[i] = j + i >= lo && j + i < hi ? row[j + i] : -std::numeric_limits<float>::infinity();
      }
      V e[kGgmlLanes / kN];
      for (int v = 0; v < kGgmlLanes / kN; ++v) {
        e[v] = ExpGgml(df, hn::Sub(hn::Load(df, t + v * kN), vm));
        hn::Store(e[v], df, t + v * kN);
      }
      if (whole) {
        std::copy(t, t + kGgmlLanes, row + j);
      } else {
        for (int i = std::max(lo - j, 0); i < std::min(hi - j, kGgmlLanes); ++i) row[j + i] = t[i];
      }
      sum += static_cast<double>(Reduce16(df, e));
      j += kGgmlLanes;
    }
#else
    int j = lo;
    for (; j + n <= hi; j += n) {
      const V e = ExpGgml(df, hn::Sub(hn::LoadU(df, row + j), vm));
      hn::StoreU(e, df, row + j);
      sum += static_cast<double>(Hsum(df, e));
    }
    if (j < hi) {  // the last keys as one vector padded with zeros
      HWY_ALIGN float t[hn::MaxLanes(DF())];
      const int cnt = hi - j;
      for (int i = 0; i < cnt; ++i) t[i] = row[j + i];
      V e = ExpGgml(df, hn::Sub(hn::Load(df, t), vm));
      e = hn::IfThenElseZero(hn::FirstN(df, cnt), e);
      hn::Store(e, df, t);
      for (int i = 0; i < cnt; ++i) row[j + i] = t[i];
      sum += static_cast<double>(Hsum(df, e));
    }
#endif
    sv.m[r] = static_cast<float>(1.0 / sum);  // now the row's 1 / sum
  }

  for (int r = r0; r < r1; ++r) {
    float* row = sv.sc + r * p.row_stride;
    const int lo = sv.lo[r], hi = sv.hi[r];
    if (lo >= hi) {  // sees no key: zero weights, zero output
      std::fill(row + sv.plo[r], row + sv.phi[r], 0.0f);
      continue;
    }
    std::fill(row + sv.plo[r], row + lo, 0.0f);
    const float inv = sv.m[r];
    const V vinv = hn::Set(df, inv);
    int j = lo;
    for (; j + n <= hi; j += n) hn::StoreU(RoundF16(df, hn::Mul(hn::LoadU(df, row + j), vinv)), df, row + j);
    for (; j < hi; ++j) row[j] = RoundF16(row[j] * inv);
    std::fill(row + hi, row + sv.phi[r], 0.0f);
  }
}

template <class DF>
void SoftmaxRows(DF df, const Plan& p, const SetView& sv, int r0, int r1) {
  constexpr int kGroupFloats = 6 * 1024;  // 24 KiB of scores
  for (int g0 = r0, g1; g0 < r1; g0 = g1) {
    int floats = sv.phi[g0] - sv.plo[g0];
    for (g1 = g0 + 1; g1 < r1 && floats + (sv.phi[g1] - sv.plo[g1]) <= kGroupFloats; ++g1)
      floats += sv.phi[g1] - sv.plo[g1];
    SoftmaxGroup(df, p, sv, g0, g1);
  }
}

// Adds the weights of rows [r0, r1) (after the softmax) to this member's key mass: weights are
// f16 values in [0, 1], so w * 2^24 is an integer and the sums are exact; members' sums then
// add up to the same total whatever the split (results do not depend on the thread count).
inline void AccumulateMass(const Plan& p, const SetView& sv, int r0, int r1, int64_t* HWY_RESTRICT acc) {
  for (int r = r0; r < r1; ++r) {
    const int lo = sv.lo[r], hi = sv.hi[r];
    if (lo >= hi) continue;
    const float* row = sv.sc + r * p.row_stride;
    int s = static_cast<int>(std::upper_bound(sv.koff, sv.koff + sv.n_seg, lo) - sv.koff) - 1;
    for (; s < sv.n_seg && sv.koff[s] < hi; ++s) {
      const int k0 = std::max(lo, sv.koff[s]), k1 = std::min(hi, sv.koff[s + 1]);
      int64_t* a = acc + (p.gkoff[sv.seg[s]] - sv.koff[s]);
      for (int k = k0; k < k1; ++k) a[k] += static_cast<int32_t>(row[k] * 16777216.0f);
    }
  }
}

// V pass of work units [u0, u1): unit = (row block, output vector), row blocks numbered as

// V pass of work units [u0, u1): unit = (row block, output vector), row blocks numbered as
// for_each_row_block visits them.
template <class DF>
void PvUnits(DF df, const Plan& p, const RowSet& rs, const SetView& sv, int64_t u0, int64_t u1) {
  const int n = static_cast<int>(hn::Lanes(df));
  const int n_vec = p.head_dim / n;
  const int per_head_blocks = (rs.per_head + kRowBlock - 1) / kRowBlock;
  for (int64_t u = u0; u < u1;) {
    const int blk = static_cast<int>(u / n_vec);
    const int v0 = static_cast<int>(u % n_vec);
    const int v1 = static_cast<int>(std::min<int64_t>(n_vec, v0 + (u1 - u)));
    const int hl = blk / per_head_blocks;
    const int rr = (blk % per_head_blocks) * kRowBlock;
    const int r0 = hl * rs.per_head + rr;
    const int rb = std::min(kRowBlock, rs.per_head - rr);
    const int klo = sv.plo[r0], khi = sv.phi[r0];
    const int s = std::max(static_cast<int>(std::upper_bound(sv.koff, sv.koff + sv.n_seg, klo) - sv.koff) - 1, 0);
    float* outs[kRowBlock];
    for (int i = 0; i < rb; ++i) outs[i] = p.out + rs.offset(p, r0 + i);
    for (int v = v0; v < v1;) {
      const int du = std::min(4, v1 - v);
      WithCount<kRowBlock>(rb, [&](auto rows) {
        WithCount<4>(du, [&](auto cols) {
          constexpr int R = decltype(rows)::value, D = decltype(cols)::value;
          const float* prow = sv.sc + r0 * p.row_stride;
          const size_t d0 = static_cast<size_t>(v) * n;
#if !HWY_HAVE_SCALABLE
          if (sv.all_f16) return PvColsExact<R, D>(df, p, sv, prow, p.row_stride, rs.kv0 + hl, klo, khi, d0, outs);
#endif
          PvColsSeg<R, D>(df, p, sv, prow, p.row_stride, rs.kv0 + hl, klo, khi, s, d0, outs);
        });
      });
      v += du;
    }
    u += v1 - v0;
  }
}


// V-pass work units of a set.
inline int64_t PvUnitCount(const Plan& p, const RowSet& rs, int lanes) {
  return static_cast<int64_t>(rs.n_kv) * ((rs.per_head + kRowBlock - 1) / kRowBlock) * (p.head_dim / lanes);
}

// Prefill: the member takes sets first come, first served (tiles of unequal cost) and runs
// each alone.
template <class DF>
void RunSetsD(DF df, const Plan& p, float* ws, int32_t* wi, const uint16_t** wv, int64_t* macc) {
  SetView sv = carve(p, p.tile_tokens * p.group, ws, wi, wv);
  for (;;) {
    const int64_t i = p.next->fetch_add(1, std::memory_order_relaxed);
    if (i >= p.n_sets) return;
    const RowSet rs = prefill_set(p, i);
    build_set(p, rs, sv, kRowBlock);
    LoadQueries(df, p, rs, sv, 0, rs.count);
    ScoreSegs(df, p, rs, sv, 0, sv.n_seg);
    SoftmaxRows(df, p, sv, 0, rs.count);
    if (macc) AccumulateMass(p, sv, 0, rs.count, macc);
    PvUnits(df, p, rs, sv, 0, PvUnitCount(p, rs, static_cast<int>(hn::Lanes(df))));
  }
}

// The set of all rows, before the team starts on it (calling thread).
template <class DF>
void PrepareSharedD(DF df, const Plan& p, SetView& sv) {
  const RowSet rs(p, 0, p.n_tokens, 0, p.n_head_kv);
  build_set(p, rs, sv, kRowBlock);
  LoadQueries(df, p, rs, sv, 0, rs.count);
}

// Member ith of nth on the shared set: scores of its share of the chunks, then the softmax
// of its rows, then its output columns. Each phase reads what all members wrote before.
template <class DF>
void RunSharedD(DF df, const Plan& p, const SetView& sv, int ith, int nth, ThreadPool* pool) {
  const RowSet rs(p, 0, p.n_tokens, 0, p.n_head_kv);
  const auto [s0, s1] = ThreadPool::split(sv.n_seg, ith, nth);
  ScoreSegs(df, p, rs, sv, static_cast<int>(s0), static_cast<int>(s1));
  if (pool) pool->barrier();
  const auto [r0, r1] = ThreadPool::split(rs.count, ith, nth);
  SoftmaxRows(df, p, sv, static_cast<int>(r0), static_cast<int>(r1));
  if (p.mass_acc) AccumulateMass(p, sv, static_cast<int>(r0), static_cast<int>(r1), p.mass_acc[ith]);
  if (pool) pool->barrier();
  const auto [u0, u1] = ThreadPool::split(PvUnitCount(p, rs, static_cast<int>(hn::Lanes(df))), ith, nth);
  PvUnits(df, p, rs, sv, u0, u1);
}

void RunSets(const Plan& p, float* ws, int32_t* wi, const uint16_t** wv, int64_t* macc) {
  WithTagDividing(p.head_dim, [&](auto df) { RunSetsD(df, p, ws, wi, wv, macc); });
}
void PrepareShared(const Plan& p, SetView& sv) {
  WithTagDividing(p.head_dim, [&](auto df) { PrepareSharedD(df, p, sv); });
}
void RunShared(const Plan& p, const SetView& sv, int ith, int nth, ThreadPool* pool) {
  WithTagDividing(p.head_dim, [&](auto df) { RunSharedD(df, p, sv, ith, nth, pool); });
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal::cpu {
HWY_EXPORT(RunSets);
HWY_EXPORT(PrepareShared);
HWY_EXPORT(RunShared);

void attention(const float* q, int n_tokens, const int32_t* q_pos, const KvChunkView* chunks, int n_chunks,
               const AttentionParams& params, float* out, ThreadPool& pool, AttentionScratch& scratch) {
  assert(params.n_head_kv > 0 && params.n_head % params.n_head_kv == 0 && params.head_dim > 0);
  if (n_tokens <= 0) return;
  Plan p;
  p.q = q;
  p.q_pos = q_pos;
  p.chunks = chunks;
  p.n_chunks = n_chunks;
  p.n_tokens = n_tokens;
  p.n_head = params.n_head;
  p.n_head_kv = params.n_head_kv;
  p.group = params.n_head / params.n_head_kv;
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

  // Small calls (short-context decode) run on the caller: waking the team costs more.
  const int64_t work = static_cast<int64_t>(n_tokens) * p.n_head * n_keys * p.head_dim;
  const int nth = work < kMinParallelWork ? 1 : pool.size();

  p.tile_tokens = std::min(n_tokens, std::max(1, kMaxTileRows / p.group));
  p.n_tiles = (n_tokens + p.tile_tokens - 1) / p.tile_tokens;
  p.n_sets = static_cast<int64_t>(p.n_tiles) * p.n_head_kv;
  p.next = &AttentionAccess::next_set(scratch);
  p.next->store(0, std::memory_order_relaxed);

  // Key mass: every member sums into its own row, zeroed here, reduced below.
  bool want_mass = false;
  for (int c = 0; c < n_chunks; ++c) want_mass |= chunks[c].mass != nullptr && chunks[c].n_tokens > 0;
  if (want_mass) {
    auto& gk = AttentionAccess::gkoff(scratch);
    gk.resize(static_cast<size_t>(n_chunks) + 1);
    gk[0] = 0;
    for (int c = 0; c < n_chunks; ++c) gk[c + 1] = gk[c] + std::max(0, chunks[c].n_tokens);
    auto& rows = AttentionAccess::mass(scratch);
    auto& ptrs = AttentionAccess::mass_ptrs(scratch);
    if (rows.size() < static_cast<size_t>(nth)) rows.resize(nth);
    ptrs.resize(nth);
    for (int t = 0; t < nth; ++t) {
      reserve_keys(rows[t], n_keys);
      rows[t].assign(static_cast<size_t>(n_keys), 0);
      ptrs[t] = rows[t].data();
    }
    p.gkoff = gk.data();
    p.mass_acc = ptrs.data();
  }

  // Too few sets to keep the team busy (decode): the team shares one set of all rows.
  const int all_rows = n_tokens * p.n_head;
  if (p.n_sets < 4 * nth && set_floats(p, all_rows) <= kMaxSharedFloats) {
    auto& f = AttentionAccess::shared(scratch);
    auto& i = AttentionAccess::shared_i(scratch);
    auto& v = AttentionAccess::shared_v(scratch);
    if (f.size() < set_floats(p, all_rows)) f.resize(set_floats(p, all_rows));
    if (i.size() < set_ints(p, all_rows)) i.resize(set_ints(p, all_rows));
    reserve_keys(v, p.n_keys);
    if (v.size() < static_cast<size_t>(p.n_keys)) v.resize(p.n_keys);
    SetView sv = carve(p, all_rows, f.data(), i.data(), v.data());
    HWY_DYNAMIC_DISPATCH(PrepareShared)(p, sv);
    const auto run_shared = HWY_DYNAMIC_DISPATCH(RunShared);
    if (nth == 1) {
      run_shared(p, sv, 0, 1, nullptr);
    } else {
      pool.run([&](int ith, int n) { run_shared(p, sv, ith, n, &pool); });
    }
  } else {
    const int set_rows = p.tile_tokens * p.group;
    auto& per_thread = AttentionAccess::per_thread(scratch);
    auto& per_thread_i = AttentionAccess::per_thread_i(scratch);
    auto& per_thread_v = AttentionAccess::per_thread_v(scratch);
    if (per_thread.size() < static_cast<size_t>(nth)) per_thread.resize(nth);
    if (per_thread_i.size() < static_cast<size_t>(nth)) per_thread_i.resize(nth);
    if (per_thread_v.size() < static_cast<size_t>(nth)) per_thread_v.resize(nth);
    for (int t = 0; t < nth; ++t) {
      if (per_thread[t].size() < set_floats(p, set_rows)) per_thread[t].resize(set_floats(p, set_rows));
      if (per_thread_i[t].size() < set_ints(p, set_rows)) per_thread_i[t].resize(set_ints(p, set_rows));
      reserve_keys(per_thread_v[t], p.n_keys);
      if (per_thread_v[t].size() < static_cast<size_t>(p.n_keys)) per_thread_v[t].resize(p.n_keys);
    }
    const auto run_sets = HWY_DYNAMIC_DISPATCH(RunSets);
    auto macc = [&](int t) { return p.mass_acc ? p.mass_acc[t] : nullptr; };
    auto run = [&](int t) { run_sets(p, per_thread[t].data(), per_thread_i[t].data(), per_thread_v[t].data(), macc(t)); };
    if (nth == 1) {
      run(0);
    } else {
      pool.run([&](int ith, int) { run(ith); });
    }
  }

  if (!want_mass) return;
  for (int c = 0; c < n_chunks; ++c) {
    float* mass = chunks[c].mass;
    if (!mass) continue;
    for (int j = 0; j < chunks[c].n_tokens; ++j) {
      int64_t sum = 0;  // exact: integer units of 2^-24
      for (int t = 0; t < nth; ++t) sum += p.mass_acc[t][p.gkoff[c] + j];
      mass[j] = static_cast<float>(static_cast<double>(mass[j]) + static_cast<double>(sum) * 0x1p-24);
    }
  }
}

}  // namespace llmsvc::hal::cpu
#endif  // HWY_ONCE