// SPDX-License-Identifier: Apache-2.0
// RoPE: a table of (cos, sin) per token shared by all heads (and layers), then the rotation.
#include "hal/cpu/rope_ops.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "hal/host/hwy_targets.h"  // same target list as the kernels; before any hwy header
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/cpu/rope_ops.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ggml writes x0*c - x1*s and x0*s + x1*c; its build (gcc, GNU C: fp-contract=fast) fuses the
// products with x0 into FMAs (checked against its outputs). We do the same.
inline void RotateScalar(float& x0, float& x1, float c, float s) {
  const float a = x0, b = x1;
  x0 = std::fma(a, c, -(b * s));
  x1 = std::fma(a, s, b * c);
}

// Pairs (v0[i], v1[i]) for i < half, element stride 2 (adjacent pairs) or 1 (split halves).
template <bool kInterleaved>
void RotateHead(float* HWY_RESTRICT v, int half, const float* HWY_RESTRICT c, const float* HWY_RESTRICT s) {
  int i = 0;
#if HWY_NATIVE_FMA && HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<float> d;
  const int n = static_cast<int>(hn::Lanes(d));
  for (; i + n <= half; i += n) {
    hn::Vec<decltype(d)> x0, x1;
    if constexpr (kInterleaved) {
      hn::LoadInterleaved2(d, v + 2 * i, x0, x1);
    } else {
      x0 = hn::LoadU(d, v + i);
      x1 = hn::LoadU(d, v + i + half);
    }
    const auto vc = hn::LoadU(d, c + i), vs = hn::LoadU(d, s + i);
    const auto y0 = hn::MulAdd(x0, vc, hn::Neg(hn::Mul(x1, vs)));
    const auto y1 = hn::MulAdd(x0, vs, hn::Mul(x1, vc));
    if constexpr (kInterleaved) {
      hn::StoreInterleaved2(y0, y1, d, v + 2 * i);
    } else {
      hn::StoreU(y0, d, v + i);
      hn::StoreU(y1, d, v + i + half);
    }
  }
#endif
  for (; i < half; ++i) {
    if constexpr (kInterleaved) {
      RotateScalar(v[2 * i], v[2 * i + 1], c[i], s[i]);
    } else {
      RotateScalar(v[i], v[i + half], c[i], s[i]);
    }
  }
}

void RopeTokens(float* x, int t_begin, int t_end, int n_heads, int head_dim, int rot_dims, const RopeTable& table,
                RopeStyle style) {
  const int half = rot_dims / 2;
  for (int t = t_begin; t < t_end; ++t) {
    float* row = x + static_cast<size_t>(t) * n_heads * head_dim;
    for (int h = 0; h < n_heads; ++h) {
      float* v = row + static_cast<size_t>(h) * head_dim;
      if (style == RopeStyle::normal) {
        RotateHead<true>(v, half, table.cos(t), table.sin(t));
      } else {
        RotateHead<false>(v, half, table.cos(t), table.sin(t));
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal::cpu {
HWY_EXPORT(RopeTokens);

void rope_tokens(float* x, int t_begin, int t_end, int n_heads, int head_dim, int rot_dims, const RopeTable& table,
                 RopeStyle style) {
  HWY_DYNAMIC_DISPATCH(RopeTokens)(x, t_begin, t_end, n_heads, head_dim, rot_dims, table, style);
}

}  // namespace llmsvc::hal::cpu
#endif  // HWY_ONCE
