// SPDX-License-Identifier: Apache-2.0
// CPU attention's score pass, per Highway target: q rounded to f16, then q.k over f16 or q-code keys.
// f16 keys are summed in llama.cpp's orders: its f16 GEMM for batches, ggml_vec_dot_f16 for one
// token; q-code keys are widened in registers.
//
// Per-target header (included once per Highway target, like Highway's own -inl.h files), for
// attention.cpp alone.
#if defined(LLMSVC_HAL_CPU_ATTENTION_QK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMSVC_HAL_CPU_ATTENTION_QK_INL_H_
#undef LLMSVC_HAL_CPU_ATTENTION_QK_INL_H_
#else
#define LLMSVC_HAL_CPU_ATTENTION_QK_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "hal/cpu/attention_simd-inl.h"
#include "hal/cpu/ggml_sum-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace {  // see attention_simd-inl.h

// Per-thread scratch of QkRowsQ (team members share the set, not this).
inline float* QueryScratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
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

#if !HWY_HAVE_SCALABLE
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
#else
// Scalable vectors cannot live in arrays: one row and one key at a time.
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
#endif  // !HWY_HAVE_SCALABLE

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

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
