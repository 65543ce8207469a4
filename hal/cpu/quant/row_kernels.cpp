// Row-major GEMM for float weights (Highway FMAs). Tokens are processed in groups of 4 so each
// weight row is read once per group.
#include "hal/cpu/quant/row_kernels.h"

#include <algorithm>
#include <cstring>

#include "hal/cpu/quant/fp16.h"

#include "hal/cpu/quant/hwy_targets.h"  // before any Highway header
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/cpu/quant/row_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- float weights --------------------------------------------------------------------

// Each loader also rounds the activations the way llama.cpp's CPU backend does before it
// multiplies with that weight type (ggml converts them to the weight's vec_dot type), so
// float-weight models give llama.cpp's logits, not merely close ones.
struct LoadF32 {
  template <class D>
  HWY_INLINE hn::Vec<D> round_x(D, hn::Vec<D> x) const { return x; }
  float round_x(float x) const { return x; }
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D df, const uint8_t* row, int64_t c) const {
    return hn::LoadU(df, reinterpret_cast<const float*>(row) + c);
  }
  float scalar(const uint8_t* row, int64_t c) const {
    float v;
    std::memcpy(&v, row + c * 4, 4);
    return v;
  }
};
struct LoadF16 {
  template <class D>
  HWY_INLINE hn::Vec<D> round_x(D df, hn::Vec<D> x) const {
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_SSE4
    // Without F16C the f16 demotion truncates; round lane by lane instead.
    HWY_ALIGN float lanes[hn::MaxLanes(df)];
    hn::Store(x, df, lanes);
    for (size_t i = 0; i < hn::Lanes(df); ++i) lanes[i] = fp16_to_fp32(fp32_to_fp16(lanes[i]));
    return hn::Load(df, lanes);
#else
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(df, hn::DemoteTo(dh, x));
#endif
  }
  float round_x(float x) const { return fp16_to_fp32(fp32_to_fp16(x)); }
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D df, const uint8_t* row, int64_t c) const {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + c));
  }
  float scalar(const uint8_t* row, int64_t c) const {
    uint16_t h;
    std::memcpy(&h, row + c * 2, 2);
    return fp16_to_fp32(h);
  }
};
struct LoadBF16 {
  // Round to nearest even in the upper 16 bits, as ggml's fp32 -> bf16.
  template <class D>
  HWY_INLINE hn::Vec<D> round_x(D df, hn::Vec<D> x) const {
    const hn::RebindToUnsigned<D> du;
    auto u = hn::BitCast(du, x);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    u = hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), lsb));
    return hn::BitCast(df, hn::And(u, hn::Set(du, 0xffff0000u)));
  }
  float round_x(float x) const { return bf16_to_fp32(fp32_to_bf16(x)); }
  template <class D>
  HWY_INLINE hn::Vec<D> operator()(D df, const uint8_t* row, int64_t c) const {
    const hn::RebindToUnsigned<D> du;
    const hn::Rebind<uint16_t, D> dh;
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(dh, reinterpret_cast<const uint16_t*>(row) + c))));
  }
  float scalar(const uint8_t* row, int64_t c) const {
    uint16_t h;
    std::memcpy(&h, row + c * 2, 2);
    return bf16_to_fp32(h);
  }
};

template <int T, class Load>
HWY_INLINE void FloatTile(const RowGemmArgs& a, int64_t r, int t0, const Load& load) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), cols = a.cols;
  const uint8_t* row = a.w + static_cast<size_t>(r) * a.row_bytes;
  const float* x = a.x + t0 * cols;
  hn::Vec<decltype(df)> acc[T];
  for (int t = 0; t < T; ++t) acc[t] = hn::Zero(df);
  int64_t c = 0;
  for (; c + N <= cols; c += N) {
    const auto wv = load(df, row, c);
    for (int t = 0; t < T; ++t) acc[t] = hn::MulAdd(wv, load.round_x(df, hn::LoadU(df, x + t * cols + c)), acc[t]);
  }
  for (int t = 0; t < T; ++t) {
    float s = hn::GetLane(hn::SumOfLanes(df, acc[t]));
    for (int64_t cc = c; cc < cols; ++cc) s += load.scalar(row, cc) * load.round_x(x[t * cols + cc]);
    a.y[(t0 + t) * a.ldy + r] = s;
  }
}

template <class Load>
void FloatRows(const RowGemmArgs& a, const Load& load) {
  for (int64_t r = a.r_begin; r < a.r_end; ++r) {
    int t = 0;
    for (; t + 4 <= a.n_tokens; t += 4) FloatTile<4>(a, r, t, load);
    for (; t < a.n_tokens; ++t) FloatTile<1>(a, r, t, load);
  }
}

void RowGemm(const RowGemmArgs& a) {
  switch (a.type) {
    case WeightType::F32: FloatRows(a, LoadF32{}); break;
    case WeightType::F16: FloatRows(a, LoadF16{}); break;
    case WeightType::BF16: FloatRows(a, LoadBF16{}); break;
    default: break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal::cpu {
HWY_EXPORT(RowGemm);

void row_gemm(const RowGemmArgs& a) { HWY_DYNAMIC_DISPATCH(RowGemm)(a); }
}  // namespace llmsvc::hal::cpu
#endif
