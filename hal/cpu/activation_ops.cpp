// Elementwise kernels: one vector loop each, scalar tails computed by the same formula.
#include "hal/cpu/activation_ops.h"

#include <cmath>

#include "hal/cpu/quant/hwy_targets.h"  // same target list as the kernels; before any hwy header

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/cpu/activation_ops.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr float kGeluA = 0.044715f;
constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;

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

void Swiglu(float* gate, const float* up, size_t n) {
  Gated(gate, up, n, [](auto d, auto g, auto u) {
    const auto one = hn::Set(d, 1.0f);
    // Clamped inside Exp's valid range; beyond it e^-x is inf-like and silu is -0 anyway.
    const auto e = hn::Exp(d, hn::Min(hn::Neg(g), hn::Set(d, 88.0f)));
    return hn::Mul(hn::Div(g, hn::Add(one, e)), u);
  });
}

void Geglu(float* gate, const float* up, size_t n) {
  Gated(gate, up, n, [](auto d, auto g, auto u) {
    const auto inner = hn::Mul(hn::Mul(hn::Set(d, kSqrt2OverPi), g),
                               hn::MulAdd(hn::Mul(hn::Set(d, kGeluA), g), g, hn::Set(d, 1.0f)));
    const auto t = hn::Tanh(d, inner);
    const auto gelu = hn::Mul(hn::Mul(hn::Set(d, 0.5f), g), hn::Add(hn::Set(d, 1.0f), t));
    return hn::Mul(gelu, u);
  });
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
HWY_EXPORT(Geglu);
HWY_EXPORT(Add);
HWY_EXPORT(Scale);

void swiglu_range(float* gate, const float* up, size_t n) { HWY_DYNAMIC_DISPATCH(Swiglu)(gate, up, n); }
void geglu_range(float* gate, const float* up, size_t n) { HWY_DYNAMIC_DISPATCH(Geglu)(gate, up, n); }
void add_range(float* y, const float* x, size_t n) { HWY_DYNAMIC_DISPATCH(Add)(y, x, n); }
void scale_range(float* x, size_t n, float s) { HWY_DYNAMIC_DISPATCH(Scale)(x, n, s); }

}  // namespace llmsvc::hal::cpu
#endif  // HWY_ONCE
