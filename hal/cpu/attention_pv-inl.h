// SPDX-License-Identifier: Apache-2.0
// CPU attention's V pass, per Highway target: each output a weighted sum of V rows (f16 or q codes).
// f16 rows are summed in llama.cpp's orders, q codes decoded in registers; the pass is cut into
// work units (row block, output vector) for the team.
//
// Per-target header (included once per Highway target, like Highway's own -inl.h files), for
// attention.cpp alone.
#if defined(LLMSVC_HAL_CPU_ATTENTION_PV_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMSVC_HAL_CPU_ATTENTION_PV_INL_H_
#undef LLMSVC_HAL_CPU_ATTENTION_PV_INL_H_
#else
#define LLMSVC_HAL_CPU_ATTENTION_PV_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hal/cpu/attention_simd-inl.h"
#include "hal/cpu/ggml_sum-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace {  // see attention_simd-inl.h

#if !HWY_HAVE_SCALABLE
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
#endif  // !HWY_HAVE_SCALABLE

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

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
