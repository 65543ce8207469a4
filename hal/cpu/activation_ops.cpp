// SPDX-License-Identifier: Apache-2.0
// Elementwise kernels: one vector loop each, scalar tails computed by the same formula;
// GEGLU through ggml's f16 GELU table.
#include "hal/cpu/activation_ops.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "hal/host/fp16.h"

#include "hal/host/hwy_targets.h"  // same target list as the kernels; before any hwy header

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/cpu/activation_ops.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hal/cpu/ggml_expf-inl.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;


// gate = f(d, gate, up) over full vectors; the tail goes through a zero-padded vector so
// every element sees the same formula.
template <class F>
HWY_INLINE void Gated(float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, size_t n, F f) {
  const hn::ScalableTag<float> d;
  const size_t nl = hn::Lanes(d);
  size_t i = 0;
  for (; i + nl <= n; i += nl) hn::StoreU(f(d, hn::LoadU(d, gate + i), hn::LoadU(d, up + i)), d, gate + i);
  if (i < n) {
    HWY_ALIGN float g[HWY_MAX_BYTES / sizeof(float)] = {};
    HWY_ALIGN float u[HWY_MAX_BYTES / sizeof(float)] = {};
    for (size_t j = i; j < n; ++j) {
      g[j - i] = gate[j];
      u[j - i] = up[j];
    }
    hn::Store(f(d, hn::Load(d, g), hn::Load(d, u)), d, g);
    for (size_t j = i; j < n; ++j) gate[j] = g[j - i];
  }
}

// ggml_vec_swiglu_f32: silu(gate) * up with ggml's vector SiLU.
void Swiglu(float* gate, const float* up, size_t n) {
  Gated(gate, up, n, [](auto d, auto g, auto u) { return hn::Mul(SiluGgml(d, g), u); });
}

void Add(float* HWY_RESTRICT y, const float* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t nl = hn::Lanes(d);
  size_t i = 0;
  for (; i + nl <= n; i += nl) hn::StoreU(hn::Add(hn::LoadU(d, y + i), hn::LoadU(d, x + i)), d, y + i);
  for (; i < n; ++i) y[i] += x[i];
}

void Scale(float* HWY_RESTRICT x, size_t n, float s) {
  const hn::ScalableTag<float> d;
  const size_t nl = hn::Lanes(d);
  const auto vs = hn::Set(d, s);
  size_t i = 0;
  for (; i + nl <= n; i += nl) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vs), d, x + i);
  for (; i < n; ++i) x[i] *= s;
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal::cpu {
HWY_EXPORT(Swiglu);
HWY_EXPORT(Add);
HWY_EXPORT(Scale);

void swiglu_range(float* gate, const float* up, size_t n) { HWY_DYNAMIC_DISPATCH(Swiglu)(gate, up, n); }
namespace {

// ggml_gelu_f32 as llama.cpp's build evaluates it: 0.5f*x*(1.0f + tanhf(SQRT_2_OVER_PI*x*
// (1.0f + GELU_COEF_A*x*x))), the compiler fusing (GELU_COEF_A*x)*x + 1.0f into an FMA.
float gelu_ggml(float x) {
  constexpr float kGeluA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return (0.5f * x) * (1.0f + std::tanh((kSqrt2OverPi * x) * std::fma(x, kGeluA * x, 1.0f)));
}

// ggml's GELU table: for every f16 value h, f16(gelu(h)).
const uint16_t* gelu_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(1 << 16);
    for (uint32_t h = 0; h < t.size(); ++h) t[h] = fp32_to_fp16(gelu_ggml(fp16_to_fp32(static_cast<uint16_t>(h))));
    return t;
  }();
  return table.data();
}

}  // namespace

void geglu_range(float* gate, const float* up, size_t n) {
  const uint16_t* table = gelu_table();
  for (size_t i = 0; i < n; ++i) {
    const float x = gate[i];
    if (x <= -10.0f) {
      gate[i] = 0.0f;
    } else if (x >= 10.0f) {
      gate[i] = x * up[i];
    } else {
      gate[i] = fp16_to_fp32(table[fp32_to_fp16(x)]) * up[i];
    }
  }
}
void add_range(float* y, const float* x, size_t n) { HWY_DYNAMIC_DISPATCH(Add)(y, x, n); }
void scale_range(float* x, size_t n, float s) { HWY_DYNAMIC_DISPATCH(Scale)(x, n, s); }

}  // namespace llmsvc::hal::cpu
#endif  // HWY_ONCE
