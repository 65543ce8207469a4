// CPU attention: the work plan (target independent) and the per-item kernels (Highway,
// compiled for every x86/Arm target and picked at run time).
#include "hal/cpu/attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "hal/cpu/quant/hwy_targets.h"  // same target list as the kernels; before any hwy header
#include "hwy/base.h"

#ifndef LLMSVC_HAL_CPU_ATTENTION_PLAN_
#define LLMSVC_HAL_CPU_ATTENTION_PLAN_
namespace llmsvc::hal::cpu {

struct AttentionAccess {
  static std::vector<std::vector<float>>& per_thread(AttentionScratch& s) { return s.per_thread_; }
  static std::vector<std::vector<int32_t>>& per_thread_i(AttentionScratch& s) { return s.per_thread_i_; }
  static std::vector<float>& partial(AttentionScratch& s) { return s.partial_; }
  static std::atomic<int64_t>& next_item(AttentionScratch& s) { return s.next_item_; }
};

namespace {

// Keys per softmax block: one default chunk; bigger chunks are walked in blocks of this.
constexpr int kKeyBlock = 16;
// Scratch row stride of the score block: enough for the widest vectors of any target.
constexpr int kScoreStrideMax = 64;
// Query rows per item (tokens x query heads): bounds the per-thread scratch (about
// 2 * 32 * head_dim floats) so an item's state stays in L1/L2.
constexpr int kMaxTileRows = 32;
// A slice of the chunk list is never shorter than this many chunks.
constexpr int kMinChunksPerSlice = 2;
// Below this many q.k multiply-adds a call runs on the calling thread alone.
constexpr int64_t kMinParallelWork = 256 * 1024;

// Everything a worker needs, fixed for one call. An item is (tile of tokens, group of kv
// heads, slice of the chunk list). Its rows are ordered [kv head][token][query head].
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
  int tile_tokens = 0;
  int n_tiles = 0;
  // kv heads per item: 1 when tiles alone give enough items (prefill); all of them
  // otherwise (decode), so an item reads each chunk's K and V rows contiguously.
  int heads_per_item = 0;
  int n_groups = 0;  // n_head_kv / heads_per_item
  int n_slices = 0;
  int max_rows = 0;  // tile_tokens * group * heads_per_item
  int64_t n_items = 0;
  float* out = nullptr;
  float* partial = nullptr;  // n_slices > 1: per item m[max_rows], l[max_rows], acc[max_rows][head_dim]
  size_t partial_stride = 0;
  std::atomic<int64_t>* next = nullptr;
};

// The per-thread working set of ProcessItem (see TileState).
size_t per_thread_floats(const Plan& p) {
  return static_cast<size_t>(p.max_rows) * (2 * p.head_dim + 3 * kScoreStrideMax + 2);
}
size_t per_thread_ints(const Plan& p) { return static_cast<size_t>(p.max_rows) * 8; }

// Items are numbered so that the heaviest tiles (latest tokens see the most keys) go first.
struct Item {
  int tile, kv_group, slice;
};
inline Item decode_item(const Plan& p, int64_t item) {
  const int slice = static_cast<int>(item % p.n_slices);
  const int64_t rest = item / p.n_slices;
  const int kv_group = static_cast<int>(rest % p.n_groups);
  const int tile = p.n_tiles - 1 - static_cast<int>(rest / p.n_groups);
  return {tile, kv_group, slice};
}
inline int64_t item_index(const Plan& p, int tile, int kv_group, int slice) {
  return (static_cast<int64_t>(p.n_tiles - 1 - tile) * p.n_groups + kv_group) * p.n_slices + slice;
}

// Where the rows of one item live: row r is token t0 + (r % per_head) / group, query head
// (kv0 + r / per_head) * group + r % group.
struct Rows {
  int t0 = 0, count = 0, per_head = 0, kv0 = 0, heads = 0;
  Rows(const Plan& p, int tile, int kv_group) {
    t0 = tile * p.tile_tokens;
    per_head = (std::min(p.n_tokens, t0 + p.tile_tokens) - t0) * p.group;
    kv0 = kv_group * p.heads_per_item;
    heads = p.heads_per_item;
    count = per_head * heads;
  }
  int token(const Plan& p, int r) const { return t0 + (r % per_head) / p.group; }
  int head(const Plan& p, int r) const { return (kv0 + r / per_head) * p.group + r % p.group; }
  size_t offset(const Plan& p, int r) const {  // of the row's head_dim floats in q / out
    return (static_cast<size_t>(token(p, r)) * p.n_head + head(p, r)) * p.head_dim;
  }
};

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
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows per micro-kernel: 4 where there are 32 vector registers, 2 where there are 16
// (the q.k kernel keeps rows x 4 accumulators live).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kRowBlock = 2;
#else
constexpr int kRowBlock = 4;
#endif

// Row stride of the score block: a whole number of this target's vectors.
constexpr int kScoreStride = std::max(kKeyBlock, HWY_MAX_BYTES / 4);
static_assert(kScoreStride <= kScoreStrideMax);

inline const hwy::float16_t* as_f16(const uint16_t* p) { return reinterpret_cast<const hwy::float16_t*>(p); }

// out[0..3] = sums of the lanes of a, b, c, e.
#if HWY_TARGET == HWY_SCALAR || HWY_HAVE_SCALABLE
template <class DF, class V>
HWY_INLINE void Sum4(DF df, V a, V b, V c, V e, float* HWY_RESTRICT out) {
  out[0] = hn::GetLane(hn::SumOfLanes(df, a));
  out[1] = hn::GetLane(hn::SumOfLanes(df, b));
  out[2] = hn::GetLane(hn::SumOfLanes(df, c));
  out[3] = hn::GetLane(hn::SumOfLanes(df, e));
}
#else
// Adds the 128-bit blocks of v together and stores the 4 resulting lanes.
template <class DF, class V>
HWY_INLINE void FoldBlocksStore(DF df, V v, float* HWY_RESTRICT out) {
  if constexpr (hn::MaxLanes(DF()) > 4) {
    const hn::Half<DF> dh;
    FoldBlocksStore(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)), out);
  } else {
    hn::StoreU(v, df, out);
  }
}

// Adds pairs of vectors before the cross-lane part, so the four sums cost about one
// full reduction.
template <class DF, class V>
HWY_INLINE void Sum4(DF df, V a, V b, V c, V e, float* HWY_RESTRICT out) {
  if constexpr (hn::MaxLanes(DF()) >= 4) {
    // Per 128-bit block: ab = [a0+a2, b0+b2, a1+a3, b1+b3], likewise ce.
    const V ab = hn::Add(hn::InterleaveLower(df, a, b), hn::InterleaveUpper(df, a, b));
    const V ce = hn::Add(hn::InterleaveLower(df, c, e), hn::InterleaveUpper(df, c, e));
    // As 64-bit pairs: [ab.lo, ce.lo] + [ab.hi, ce.hi] = [a, b, c, e] per block.
    const hn::Repartition<double, DF> dd;
    const auto ab64 = hn::BitCast(dd, ab), ce64 = hn::BitCast(dd, ce);
    const V s = hn::Add(hn::BitCast(df, hn::InterleaveLower(dd, ab64, ce64)),
                        hn::BitCast(df, hn::InterleaveUpper(dd, ab64, ce64)));
    FoldBlocksStore(df, s, out);
  } else {
    out[0] = hn::GetLane(hn::SumOfLanes(df, a));
    out[1] = hn::GetLane(hn::SumOfLanes(df, b));
    out[2] = hn::GetLane(hn::SumOfLanes(df, c));
    out[3] = hn::GetLane(hn::SumOfLanes(df, e));
  }
}
#endif

#if !HWY_HAVE_SCALABLE
// s[r][j] = qt[r] . k[j] for RB rows and keys j in [j0, j1). Each K vector is widened once
// and used by all RB rows; keys go four at a time so the reductions are shared.
template <int RB, class DF>
HWY_INLINE void QkRows(DF df, const float* HWY_RESTRICT qt, size_t dim, const uint16_t* HWY_RESTRICT k,
                       size_t kstride, int j0, int j1, float* HWY_RESTRICT s) {
  using V = hn::Vec<DF>;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t n = hn::Lanes(df);
  int j = j0;
  for (; j + 4 <= j1; j += 4) {
    const hwy::float16_t* k0 = as_f16(k + static_cast<size_t>(j) * kstride);
    const hwy::float16_t* k1 = k0 + kstride;
    const hwy::float16_t* k2 = k1 + kstride;
    const hwy::float16_t* k3 = k2 + kstride;
    V acc[RB][4];
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r)
      LLMSVC_UNROLL
      for (int i = 0; i < 4; ++i) acc[r][i] = hn::Zero(df);
    for (size_t d = 0; d < dim; d += n) {
      const V kv0 = hn::PromoteTo(df, hn::LoadU(dh, k0 + d));
      const V kv1 = hn::PromoteTo(df, hn::LoadU(dh, k1 + d));
      const V kv2 = hn::PromoteTo(df, hn::LoadU(dh, k2 + d));
      const V kv3 = hn::PromoteTo(df, hn::LoadU(dh, k3 + d));
      LLMSVC_UNROLL
      for (int r = 0; r < RB; ++r) {
        const V qv = hn::LoadU(df, qt + r * dim + d);
        acc[r][0] = hn::MulAdd(qv, kv0, acc[r][0]);
        acc[r][1] = hn::MulAdd(qv, kv1, acc[r][1]);
        acc[r][2] = hn::MulAdd(qv, kv2, acc[r][2]);
        acc[r][3] = hn::MulAdd(qv, kv3, acc[r][3]);
      }
    }
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r) Sum4(df, acc[r][0], acc[r][1], acc[r][2], acc[r][3], s + r * kScoreStride + j);
  }
  for (; j < j1; ++j) {
    const hwy::float16_t* k0 = as_f16(k + static_cast<size_t>(j) * kstride);
    V acc[RB];
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r) acc[r] = hn::Zero(df);
    for (size_t d = 0; d < dim; d += n) {
      const V kv = hn::PromoteTo(df, hn::LoadU(dh, k0 + d));
      LLMSVC_UNROLL
      for (int r = 0; r < RB; ++r) acc[r] = hn::MulAdd(hn::LoadU(df, qt + r * dim + d), kv, acc[r]);
    }
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r) s[r * kScoreStride + j] = hn::GetLane(hn::SumOfLanes(df, acc[r]));
  }
}

// Columns [d0, d0 + DU lanes-vectors) of PvRows. RB x DU independent accumulators hide
// the FMA latency; each widened V vector serves all RB rows.
template <int RB, int DU, class DF>
HWY_INLINE void PvCols(DF df, const float* HWY_RESTRICT p, const float* HWY_RESTRICT alpha,
                       const uint16_t* HWY_RESTRICT v, size_t vstride, int j0, int j1, size_t dim, size_t d0,
                       float* HWY_RESTRICT acc) {
  using V = hn::Vec<DF>;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t n = hn::Lanes(df);
  V a[RB][DU];
  LLMSVC_UNROLL
  for (int r = 0; r < RB; ++r) {
    const V al = hn::Set(df, alpha[r]);
    LLMSVC_UNROLL
    for (int u = 0; u < DU; ++u) a[r][u] = hn::Mul(hn::LoadU(df, acc + r * dim + d0 + u * n), al);
  }
  const hwy::float16_t* vp = as_f16(v + static_cast<size_t>(j0) * vstride + d0);
  for (int j = j0; j < j1; ++j, vp += vstride) {
    V vv[DU];
    LLMSVC_UNROLL
    for (int u = 0; u < DU; ++u) vv[u] = hn::PromoteTo(df, hn::LoadU(dh, vp + u * n));
    LLMSVC_UNROLL
    for (int r = 0; r < RB; ++r) {
      const V pr = hn::Set(df, p[r * kScoreStride + j]);
      LLMSVC_UNROLL
      for (int u = 0; u < DU; ++u) a[r][u] = hn::MulAdd(pr, vv[u], a[r][u]);
    }
  }
  LLMSVC_UNROLL
  for (int r = 0; r < RB; ++r)
    LLMSVC_UNROLL
    for (int u = 0; u < DU; ++u) hn::StoreU(a[r][u], df, acc + r * dim + d0 + u * n);
}

// acc[r] = acc[r] * alpha[r] + sum_j p[r][j] * v[j] for RB rows and keys j in [j0, j1),
// four vector columns at a time while they last.
template <int RB, class DF>
HWY_INLINE void PvRows(DF df, const float* HWY_RESTRICT p, const float* HWY_RESTRICT alpha,
                       const uint16_t* HWY_RESTRICT v, size_t vstride, int j0, int j1, size_t dim,
                       float* HWY_RESTRICT acc) {
  const size_t n = hn::Lanes(df);
  size_t d = 0;
  for (; d + 4 * n <= dim; d += 4 * n) PvCols<RB, 4>(df, p, alpha, v, vstride, j0, j1, dim, d, acc);
  for (; d < dim; d += n) PvCols<RB, 1>(df, p, alpha, v, vstride, j0, j1, dim, d, acc);
}
#else
// Scalable vectors cannot live in arrays: one row at a time.
template <int RB, class DF>
HWY_INLINE void QkRows(DF df, const float* HWY_RESTRICT qt, size_t dim, const uint16_t* HWY_RESTRICT k,
                       size_t kstride, int j0, int j1, float* HWY_RESTRICT s) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t n = hn::Lanes(df);
  for (int r = 0; r < RB; ++r)
    for (int j = j0; j < j1; ++j) {
      const hwy::float16_t* kj = as_f16(k + static_cast<size_t>(j) * kstride);
      auto acc = hn::Zero(df);
      for (size_t d = 0; d < dim; d += n)
        acc = hn::MulAdd(hn::LoadU(df, qt + r * dim + d), hn::PromoteTo(df, hn::LoadU(dh, kj + d)), acc);
      s[r * kScoreStride + j] = hn::GetLane(hn::SumOfLanes(df, acc));
    }
}
template <int RB, class DF>
HWY_INLINE void PvRows(DF df, const float* HWY_RESTRICT p, const float* HWY_RESTRICT alpha,
                       const uint16_t* HWY_RESTRICT v, size_t vstride, int j0, int j1, size_t dim,
                       float* HWY_RESTRICT acc) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t n = hn::Lanes(df);
  for (int r = 0; r < RB; ++r)
    for (size_t d = 0; d < dim; d += n) {
      auto a = hn::Mul(hn::LoadU(df, acc + r * dim + d), hn::Set(df, alpha[r]));
      for (int j = j0; j < j1; ++j)
        a = hn::MulAdd(hn::Set(df, p[r * kScoreStride + j]),
                       hn::PromoteTo(df, hn::LoadU(dh, as_f16(v + static_cast<size_t>(j) * vstride + d))), a);
      hn::StoreU(a, df, acc + r * dim + d);
    }
}
#endif

// Online-softmax step for one row over one key block. s holds the scores of keys [lo, hi)
// (block-relative); on return it holds their weights p_j = exp(s_j - m_new), zero elsewhere.
// Updates the row's running max m and its denominator, kept as one vector of lane sums
// (lv) so it is reduced once per item, not per block; returns the factor the row's
// accumulator must be scaled by.
template <class DF>
HWY_INLINE float SoftmaxStep(DF df, float* HWY_RESTRICT s, int lo, int hi, float& m, float* HWY_RESTRICT lv) {
  using V = hn::Vec<DF>;
  const size_t n = hn::Lanes(df);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (lo >= hi) {
    std::fill(s, s + kScoreStride, 0.0f);
    return 1.0f;
  }
  for (int j = 0; j < lo; ++j) s[j] = kNegInf;
  for (int j = hi; j < kScoreStride; ++j) s[j] = kNegInf;
  V vmax = hn::Set(df, kNegInf);
  for (size_t j = 0; j < static_cast<size_t>(kScoreStride); j += n) vmax = hn::Max(vmax, hn::LoadU(df, s + j));
  const float m_new = std::max(m, hn::GetLane(hn::MaxOfLanes(df, vmax)));
  // The running max rarely moves once a few blocks are in: skip the exp then. Otherwise
  // 0 on the first visible block (m = -inf).
  const float alpha = m_new == m ? 1.0f : hn::GetLane(hn::Exp(df, hn::Set(df, m - m_new)));
  const V vm = hn::Set(df, m_new);
  V vsum = hn::Mul(hn::LoadU(df, lv), hn::Set(df, alpha));
  for (size_t j = 0; j < static_cast<size_t>(kScoreStride); j += n) {
    const V e = hn::Exp(df, hn::Sub(hn::LoadU(df, s + j), vm));  // exp(-inf) = 0
    hn::StoreU(e, df, s + j);
    vsum = hn::Add(vsum, e);
  }
  hn::StoreU(vsum, df, lv);
  m = m_new;
  return alpha;
}

// Calls f(std::integral_constant<int, rb>) for a runtime rb in [1, RB].
template <int RB, class F>
HWY_INLINE void WithRows(int rb, const F& f) {
  if constexpr (RB > 1) {
    if (rb < RB) return WithRows<RB - 1>(rb, f);
  }
  f(std::integral_constant<int, RB>());
}

// Up to kKeyBlock consecutive keys of one chunk (all kv heads).
struct KeyBlock {
  const uint16_t* k;
  const uint16_t* v;
  int n;
  int64_t first_pos;
};

// The working set of one item, carved from the thread's scratch. Scores and visible key
// ranges are double-buffered so a block's q.k can be issued before the previous block's
// softmax and V accumulation (independent work for the out-of-order core).
struct TileState {
  float* qt = nullptr;     // rows x head_dim, scaled queries
  float* acc = nullptr;    // rows x head_dim, unnormalized outputs
  float* lv = nullptr;     // rows x kScoreStrideMax, lanes of the softmax denominators
  float* m = nullptr;      // rows, running maxima
  float* alpha = nullptr;  // rows, rescale factors of the current block
  float* sc[2] = {};       // rows x kScoreStrideMax, scores then weights
  int32_t* lo[2] = {};     // rows, visible keys [lo, hi) of the block
  int32_t* hi[2] = {};
  int32_t* ulo[2] = {};    // per row block, union of its rows' ranges (empty: ulo >= uhi)
  int32_t* uhi[2] = {};
};

// Calls f(r0, rb, kv_head, block_index) for every row block of the item: blocks of up
// to kRowBlock rows that share one kv head.
template <class F>
HWY_INLINE void ForEachRowBlock(const Rows& rows, const F& f) {
  int blk = 0;
  for (int hl = 0; hl < rows.heads; ++hl)
    for (int r = 0; r < rows.per_head; r += kRowBlock, ++blk)
      f(hl * rows.per_head + r, std::min(kRowBlock, rows.per_head - r), rows.kv0 + hl, blk);
}

// Visible ranges of every row for block kb, then q.k for each row block that sees a key.
template <class DF>
HWY_INLINE void ScoreBlock(DF df, const Plan& p, const Rows& rows, TileState& ts, const KeyBlock& kb, int buf) {
  const size_t dim = static_cast<size_t>(p.head_dim);
  const size_t kvstride = static_cast<size_t>(p.n_head_kv) * dim;
  int32_t* lo = ts.lo[buf];
  int32_t* hi = ts.hi[buf];
  ForEachRowBlock(rows, [&](int r0, int rb, int kv_head, int blk) {
    int32_t ulo = kb.n, uhi = 0;
    for (int r = r0; r < r0 + rb; ++r) {
      // Visible keys of this row: key_pos <= q_pos, and key_pos > q_pos - window.
      const int64_t qp = p.q_pos[rows.token(p, r)];
      int64_t h = std::min<int64_t>(kb.n, qp - kb.first_pos + 1);
      int64_t b = 0;
      if (p.window > 0) b = std::max<int64_t>(0, qp - p.window + 1 - kb.first_pos);
      if (h <= b) b = h = 0;
      lo[r] = static_cast<int32_t>(b);
      hi[r] = static_cast<int32_t>(h);
      if (b < h) {
        ulo = std::min(ulo, lo[r]);
        uhi = std::max(uhi, hi[r]);
      }
    }
    ts.ulo[buf][blk] = ulo;
    ts.uhi[buf][blk] = uhi;
    if (ulo >= uhi) return;
    WithRows<kRowBlock>(rb, [&](auto n_rows) {
      QkRows<decltype(n_rows)::value>(df, ts.qt + r0 * dim, dim, kb.k + kv_head * dim, kvstride, ulo, uhi,
                                      ts.sc[buf] + r0 * kScoreStride);
    });
  });
}

// Online-softmax update of every row for block kb, then V accumulation per row block.
template <class DF>
HWY_INLINE void AccumulateBlock(DF df, const Plan& p, const Rows& rows, TileState& ts, const KeyBlock& kb,
                                int buf) {
  const size_t dim = static_cast<size_t>(p.head_dim);
  const size_t kvstride = static_cast<size_t>(p.n_head_kv) * dim;
  ForEachRowBlock(rows, [&](int r0, int rb, int kv_head, int blk) {
    const int32_t ulo = ts.ulo[buf][blk], uhi = ts.uhi[buf][blk];
    if (ulo >= uhi) return;  // no row of this block sees a key: nothing changes
    for (int r = r0; r < r0 + rb; ++r)
      ts.alpha[r] = SoftmaxStep(df, ts.sc[buf] + r * kScoreStride, ts.lo[buf][r], ts.hi[buf][r], ts.m[r],
                                ts.lv + r * kScoreStrideMax);
    WithRows<kRowBlock>(rb, [&](auto n_rows) {
      PvRows<decltype(n_rows)::value>(df, ts.sc[buf] + r0 * kScoreStride, ts.alpha + r0, kb.v + kv_head * dim,
                                      kvstride, ulo, uhi, dim, ts.acc + r0 * dim);
    });
  });
}

template <class DF>
void ProcessItem(DF df, const Plan& p, int64_t index, float* ws, int32_t* wi) {
  const Item it = decode_item(p, index);
  const Rows rows(p, it.tile, it.kv_group);
  const int dim = p.head_dim;
  TileState ts;
  ts.qt = ws;
  ts.acc = ts.qt + p.max_rows * dim;
  ts.lv = ts.acc + p.max_rows * dim;
  ts.sc[0] = ts.lv + p.max_rows * kScoreStrideMax;
  ts.sc[1] = ts.sc[0] + p.max_rows * kScoreStrideMax;
  ts.m = ts.sc[1] + p.max_rows * kScoreStrideMax;
  ts.alpha = ts.m + p.max_rows;
  for (int b = 0; b < 2; ++b) {
    int32_t* base = wi + b * 4 * p.max_rows;
    ts.lo[b] = base;
    ts.hi[b] = base + p.max_rows;
    ts.ulo[b] = base + 2 * p.max_rows;
    ts.uhi[b] = base + 3 * p.max_rows;
  }

  const int t1 = std::min(p.n_tokens, rows.t0 + p.tile_tokens);
  int32_t qmin = std::numeric_limits<int32_t>::max(), qmax = std::numeric_limits<int32_t>::min();
  for (int t = rows.t0; t < t1; ++t) {
    qmin = std::min(qmin, p.q_pos[t]);
    qmax = std::max(qmax, p.q_pos[t]);
  }
  for (int r = 0; r < rows.count; ++r) {
    const float* src = p.q + rows.offset(p, r);
    float* dst = ts.qt + r * dim;
    for (int d = 0; d < dim; ++d) dst[d] = src[d] * p.scale;  // fold the scale into q once
    std::fill(ts.acc + r * dim, ts.acc + (r + 1) * dim, 0.0f);
    ts.m[r] = -std::numeric_limits<float>::infinity();
    std::fill(ts.lv + r * kScoreStrideMax, ts.lv + r * kScoreStrideMax + hn::Lanes(df), 0.0f);
  }

  const auto [c0, c1] = ThreadPool::split(p.n_chunks, it.slice, p.n_slices);
  const size_t kvstride = static_cast<size_t>(p.n_head_kv) * dim;
  KeyBlock prev{};
  int buf = 0;
  bool pending = false;
  for (int64_t c = c0; c < c1; ++c) {
    const KvChunkView& ch = p.chunks[c];
    if (ch.n_tokens <= 0) continue;
    const int64_t last = static_cast<int64_t>(ch.first_pos) + ch.n_tokens - 1;
    if (ch.first_pos > qmax) continue;                                             // in every row's future
    if (p.window > 0 && last <= static_cast<int64_t>(qmin) - p.window) continue;  // out of every window
    for (int jb = 0; jb < ch.n_tokens; jb += kKeyBlock) {
      const KeyBlock kb{ch.k + jb * kvstride, ch.v + jb * kvstride, std::min(kKeyBlock, ch.n_tokens - jb),
                        static_cast<int64_t>(ch.first_pos) + jb};
      ScoreBlock(df, p, rows, ts, kb, buf);
      if (pending) AccumulateBlock(df, p, rows, ts, prev, buf ^ 1);
      prev = kb;
      pending = true;
      buf ^= 1;
    }
  }
  if (pending) AccumulateBlock(df, p, rows, ts, prev, buf ^ 1);

  float* l = ts.alpha;  // reused: the denominators, reduced once
  for (int r = 0; r < rows.count; ++r)
    l[r] = hn::GetLane(hn::SumOfLanes(df, hn::LoadU(df, ts.lv + r * kScoreStrideMax)));
  if (p.n_slices == 1) {
    for (int r = 0; r < rows.count; ++r) {
      float* dst = p.out + rows.offset(p, r);
      const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
      for (int d = 0; d < dim; ++d) dst[d] = ts.acc[r * dim + d] * inv;
    }
  } else {
    float* part = p.partial + static_cast<size_t>(index) * p.partial_stride;
    std::copy(ts.m, ts.m + rows.count, part);
    std::copy(l, l + rows.count, part + p.max_rows);
    std::copy(ts.acc, ts.acc + static_cast<size_t>(rows.count) * dim, part + 2 * p.max_rows);
  }
}

template <class DF>
void RunItemsD(DF df, const Plan& p, int ith, int nth, float* ws, int32_t* wi) {
  if (p.n_slices > 1) {
    // Equal slices: a fixed share per thread, so each thread reads the same part of the
    // cache on every call (and no counter traffic).
    const auto [b, e] = ThreadPool::split(p.n_items, ith, nth);
    for (int64_t index = b; index < e; ++index) ProcessItem(df, p, index, ws, wi);
    return;
  }
  for (;;) {  // tiles of unequal cost (causal prefill): first come, first served
    const int64_t index = p.next->fetch_add(1, std::memory_order_relaxed);
    if (index >= p.n_items) return;
    ProcessItem(df, p, index, ws, wi);
  }
}

// Member ith of nth runs its items. Uses the widest vector whose lane count divides head_dim.
void RunItems(const Plan& p, int ith, int nth, float* ws, int32_t* wi) {
  const hn::ScalableTag<float> df;
  const size_t dim = static_cast<size_t>(p.head_dim);
  if (dim % hn::Lanes(df) == 0) return RunItemsD(df, p, ith, nth, ws, wi);
  const hn::CappedTag<float, 8> d8;
  if (dim % hn::Lanes(d8) == 0) return RunItemsD(d8, p, ith, nth, ws, wi);
  const hn::CappedTag<float, 4> d4;
  if (dim % hn::Lanes(d4) == 0) return RunItemsD(d4, p, ith, nth, ws, wi);
  RunItemsD(hn::CappedTag<float, 1>(), p, ith, nth, ws, wi);
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal::cpu {
HWY_EXPORT(RunItems);

namespace {

// Combines the slices' partial softmax states of one (tile, kv group) into the output.
void merge_slices(const Plan& p, int tile, int kv_group) {
  const int dim = p.head_dim;
  const Rows rows(p, tile, kv_group);
  const float* first = p.partial + static_cast<size_t>(item_index(p, tile, kv_group, 0)) * p.partial_stride;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < rows.count; ++r) {
    float* dst = p.out + rows.offset(p, r);
    float m = kNegInf;
    for (int s = 0; s < p.n_slices; ++s) m = std::max(m, first[s * p.partial_stride + r]);
    std::fill(dst, dst + dim, 0.0f);
    if (m == kNegInf) continue;  // saw no key at all
    float l = 0.0f;
    for (int s = 0; s < p.n_slices; ++s) {
      const float* part = first + s * p.partial_stride;
      if (part[r] == kNegInf) continue;
      const float w = std::exp(part[r] - m);
      l += part[p.max_rows + r] * w;
      const float* a = part + 2 * p.max_rows + static_cast<size_t>(r) * dim;
      for (int d = 0; d < dim; ++d) dst[d] += a[d] * w;
    }
    const float inv = 1.0f / l;
    for (int d = 0; d < dim; ++d) dst[d] *= inv;
  }
}

}  // namespace

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

  // Small calls (short-context decode) run on the caller: waking the team costs more.
  int64_t n_keys = 0;
  for (int c = 0; c < n_chunks; ++c) n_keys += std::max(0, chunks[c].n_tokens);
  const int64_t work = static_cast<int64_t>(n_tokens) * p.n_head * n_keys * p.head_dim;
  const int nth = work < kMinParallelWork ? 1 : pool.size();

  // Tiles of one kv head's rows; if they give too few items, whole-head-set items.
  const auto tiles = [&](int heads) {
    p.heads_per_item = heads;
    p.n_groups = p.n_head_kv / heads;
    p.tile_tokens = std::min(n_tokens, std::max(1, kMaxTileRows / (p.group * heads)));
    p.n_tiles = (n_tokens + p.tile_tokens - 1) / p.tile_tokens;
  };
  tiles(1);
  if (static_cast<int64_t>(p.n_groups) * p.n_tiles < 4 * nth) tiles(p.n_head_kv);
  p.max_rows = p.tile_tokens * p.group * p.heads_per_item;

  // Still too few items for the team (decode): slice the chunk list, in multiples of the
  // team size so that equal slices divide evenly.
  const int64_t base = static_cast<int64_t>(p.n_groups) * p.n_tiles;
  int slices = 1;
  if (nth > 1 && base < 4 * nth) {
    slices = nth;
    while (base * slices < 4 * nth) slices += nth;
    slices = std::max(1, std::min(slices, n_chunks / kMinChunksPerSlice));
  }
  p.n_slices = slices;
  p.n_items = base * slices;

  auto& per_thread = AttentionAccess::per_thread(scratch);
  auto& per_thread_i = AttentionAccess::per_thread_i(scratch);
  if (per_thread.size() < static_cast<size_t>(nth)) per_thread.resize(nth);
  if (per_thread_i.size() < static_cast<size_t>(nth)) per_thread_i.resize(nth);
  for (int i = 0; i < nth; ++i) {
    if (per_thread[i].size() < per_thread_floats(p)) per_thread[i].resize(per_thread_floats(p));
    if (per_thread_i[i].size() < per_thread_ints(p)) per_thread_i[i].resize(per_thread_ints(p));
  }
  if (slices > 1) {
    p.partial_stride = static_cast<size_t>(p.max_rows) * (2 + p.head_dim);
    auto& partial = AttentionAccess::partial(scratch);
    if (partial.size() < p.partial_stride * p.n_items) partial.resize(p.partial_stride * p.n_items);
    p.partial = partial.data();
  }
  p.next = &AttentionAccess::next_item(scratch);
  p.next->store(0, std::memory_order_relaxed);

  const auto run_items = HWY_DYNAMIC_DISPATCH(RunItems);
  if (nth == 1) {
    run_items(p, 0, 1, per_thread[0].data(), per_thread_i[0].data());
    return;
  }
  pool.run([&](int ith, int n) {
    run_items(p, ith, n, per_thread[ith].data(), per_thread_i[ith].data());
    if (p.n_slices == 1) return;
    pool.barrier();
    const auto [g0, g1] = ThreadPool::split(base, ith, n);
    for (int64_t g = g0; g < g1; ++g)
      merge_slices(p, static_cast<int>(g / p.n_groups), static_cast<int>(g % p.n_groups));
  });
}

}  // namespace llmsvc::hal::cpu
#endif  // HWY_ONCE
