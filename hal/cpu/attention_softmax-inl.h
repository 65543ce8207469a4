// SPDX-License-Identifier: Apache-2.0
// CPU attention's softmax, per Highway target: score rows to f16 weights as ggml does, and key mass.
//
// Per-target header (included once per Highway target, like Highway's own -inl.h files), for
// attention.cpp alone.
#if defined(LLMSVC_HAL_CPU_ATTENTION_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMSVC_HAL_CPU_ATTENTION_SOFTMAX_INL_H_
#undef LLMSVC_HAL_CPU_ATTENTION_SOFTMAX_INL_H_
#else
#define LLMSVC_HAL_CPU_ATTENTION_SOFTMAX_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <limits>

#include "hal/cpu/attention_simd-inl.h"
#include "hal/cpu/ggml_expf-inl.h"
#include "hal/cpu/ggml_sum-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace {  // see attention_simd-inl.h

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

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
