// SPDX-License-Identifier: Apache-2.0
// RMSNorm kernel: vector sum of squares, then one scaled multiply pass.
#include "hal/cpu/norm_ops.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "hal/host/hwy_targets.h"  // same target list as the kernels; before any hwy header

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/cpu/norm_ops.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of squares as ggml computes it: products rounded to f32, added one by one in f64. The
// vector sum reorders the additions; that is harmless when no addition rounds, which holds
// when the total stays below 2^28 times the smallest non-zero square (every partial sum is
// then a multiple of that square's ulp below 2^53 of them). Otherwise: ggml's order.
double SumSquares(const float* HWY_RESTRICT x, size_t n) {
  size_t i = 0;
  double sum = 0.0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<float> d;
  const hn::Half<decltype(d)> dh;
  const hn::Repartition<double, decltype(d)> dd;
  const size_t nl = hn::Lanes(d);
  auto acc = hn::Zero(dd);
  const auto inf = hn::Set(d, HUGE_VALF);
  auto min_sq = inf;
  for (; i + nl <= n; i += nl) {
    const auto v = hn::LoadU(d, x + i);
    const auto sq = hn::Mul(v, v);
    min_sq = hn::Min(min_sq, hn::IfThenElse(hn::Eq(sq, hn::Zero(d)), inf, sq));
    acc = hn::Add(acc, hn::Add(hn::PromoteTo(dd, hn::LowerHalf(dh, sq)), hn::PromoteTo(dd, hn::UpperHalf(dh, sq))));
  }
  float smallest = hn::GetLane(hn::MinOfLanes(d, min_sq));
  sum = hn::GetLane(hn::SumOfLanes(dd, acc));
  for (size_t j = i; j < n; ++j) {
    const float sq = x[j] * x[j];
    if (sq != 0.0f) smallest = std::min(smallest, sq);
  }
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  if (sum <= static_cast<double>(smallest) * 0x1p28) return sum;
  sum = 0.0;
#endif
  for (i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

void RmsNormRows(const float* x, const float* weight, int64_t n_rows, int dim, float eps, float* out) {
  const hn::ScalableTag<float> d;
  const size_t nl = hn::Lanes(d);
  const size_t n = static_cast<size_t>(dim);
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * n;
    float* yr = out + static_cast<size_t>(r) * n;
    const float mean = static_cast<float>(SumSquares(xr, n) / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    const auto vs = hn::Set(d, scale);
    size_t i = 0;
    if (weight) {
      for (; i + nl <= n; i += nl)
        hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, xr + i), vs), hn::LoadU(d, weight + i)), d, yr + i);
      for (; i < n; ++i) yr[i] = xr[i] * scale * weight[i];
    } else {
      for (; i + nl <= n; i += nl) hn::StoreU(hn::Mul(hn::LoadU(d, xr + i), vs), d, yr + i);
      for (; i < n; ++i) yr[i] = xr[i] * scale;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal::cpu {
HWY_EXPORT(RmsNormRows);

void rms_norm_rows(const float* x, const float* weight, int64_t n_rows, int dim, float eps, float* out) {
  HWY_DYNAMIC_DISPATCH(RmsNormRows)(x, weight, n_rows, dim, eps, out);
}

}  // namespace llmsvc::hal::cpu
#endif  // HWY_ONCE
