// SPDX-License-Identifier: Apache-2.0
// KV block codecs (Highway, dispatched per CPU). One encoder per part reads its input through
// a "source" of f32 values, either f16 rows or a decoded q block rounded to f16, so that
// requantizing equals quantizing the dequantized block, byte for byte, without an f16 copy.
#include "policy/compression/kv_codec.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

#include "hal/host/fp16.h"
#include "hal/host/hwy_targets.h"  // same target list as the HAL kernels; before any hwy header
#include "hwy/base.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "policy/compression/kv_codec.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include "hal/host/kv_codes-inl.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::policy {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace kc = llmsvc::hal::host::HWY_NAMESPACE;
using hal::KvBlockShape;
using hal::KvFormat;
using hal::KvPart;

// The largest finite f16: decoded values are clamped to it before rounding to f16.
constexpr float kF16Max = 65504.0f;

template <class DF, class V = hn::Vec<DF>>
HWY_INLINE V SaturateRoundF16(DF df, V x) {
  return kc::RoundF16(df, hn::Min(hn::Max(x, hn::Set(df, -kF16Max)), hn::Set(df, kF16Max)));
}

// The sections of a q block (hal/kv_format.h): params, then code rows.
struct QLayout {
  size_t n_pairs = 0;    // (min, scale) pairs
  size_t row_bytes = 0;  // bytes of one token's codes
  QLayout(KvFormat f, KvPart part, const KvBlockShape& s)
      : n_pairs(hal::kv_block_param_bytes(f, part, s) / (2 * sizeof(uint16_t))),
        row_bytes(hal::kv_block_row_bytes(f, s)) {}
};

// Sources: Lanes(df) values of token t at channel ch (keys: any ch; values: within head h).
struct F16Source {
  const uint16_t* p;
  size_t kv_dim;
  template <class DF>
  HWY_INLINE hn::Vec<DF> Load(DF df, int t, size_t ch) const {
    return kc::LoadF16(df, p + static_cast<size_t>(t) * kv_dim + ch);
  }
  template <class DF>
  HWY_INLINE hn::Vec<DF> Load(DF df, int t, int /*head*/, size_t ch) const {
    return Load(df, t, ch);
  }
};

// A channel-wise (key) q block, decoded and rounded to f16.
template <int B>
struct KeySource {
  const uint16_t* min;
  const uint16_t* scale;
  const uint8_t* codes;
  size_t row_bytes;
  KeySource(const void* block, const KvBlockShape& s)
      : min(static_cast<const uint16_t*>(block)),
        scale(min + s.kv_dim()),
        codes(reinterpret_cast<const uint8_t*>(scale + s.kv_dim())),
        row_bytes(QLayout(static_cast<KvFormat>(B), KvPart::key, s).row_bytes) {}
  template <class DF>
  HWY_INLINE hn::Vec<DF> Load(DF df, int t, size_t ch) const {
    const auto c = hn::ConvertTo(df, kc::LoadCodes<B>(df, codes + static_cast<size_t>(t) * row_bytes, ch));
    return SaturateRoundF16(df, hn::MulAdd(kc::LoadF16(df, scale + ch), c, kc::LoadF16(df, min + ch)));
  }
};

// A token-wise (value) q block, decoded and rounded to f16; ch lies within head h.
template <int B>
struct ValueSource {
  const uint16_t* min;
  const uint16_t* scale;
  const uint8_t* codes;
  size_t row_bytes;
  int n_head_kv;
  ValueSource(const void* block, const KvBlockShape& s)
      : min(static_cast<const uint16_t*>(block)),
        scale(min + static_cast<size_t>(s.n_tokens) * s.n_head_kv),
        codes(reinterpret_cast<const uint8_t*>(scale + static_cast<size_t>(s.n_tokens) * s.n_head_kv)),
        row_bytes(QLayout(static_cast<KvFormat>(B), KvPart::value, s).row_bytes),
        n_head_kv(s.n_head_kv) {}
  template <class DF>
  HWY_INLINE hn::Vec<DF> Load(DF df, int t, int h, size_t ch) const {
    const size_t i = static_cast<size_t>(t) * n_head_kv + h;
    const auto c = hn::ConvertTo(df, kc::LoadCodes<B>(df, codes + static_cast<size_t>(t) * row_bytes, ch));
    return SaturateRoundF16(df, hn::MulAdd(hn::Set(df, hal::fp16_to_fp32(scale[i])), c,
                                           hn::Set(df, hal::fp16_to_fp32(min[i]))));
  }
};

// Per group: min, scale (rounded up to f16 so that min + qmax * scale >= max) and 1 / scale,
// from the smallest and largest finite values (mn > mx: none, the group decodes to 0).
template <class DF, class V = hn::Vec<DF>>
HWY_INLINE void Params(DF df, V mn, V mx, float qmax, V& min, V& scale, V& inv) {
  const auto empty = hn::Gt(mn, mx);
  mn = hn::IfThenZeroElse(empty, mn);
  mx = hn::IfThenZeroElse(empty, mx);
  min = hn::Add(mn, hn::Zero(df));  // -0 -> +0
  scale = kc::RoundUpF16(df, hn::Div(hn::Sub(mx, mn), hn::Set(df, qmax)));
  const auto zero = hn::Eq(scale, hn::Zero(df));
  inv = hn::IfThenZeroElse(zero, hn::Div(hn::Set(df, 1.0f), hn::IfThenElse(zero, hn::Set(df, 1.0f), scale)));
}

// round((x - min) / scale) in [0, qmax]; NaN -> 0, +inf -> qmax (0 when scale is 0), -inf -> 0.
template <class DF, class V = hn::Vec<DF>>
HWY_INLINE hn::Vec<hn::Rebind<int32_t, DF>> Encode(DF df, V x, V min, V inv, float qmax) {
  V c = hn::Mul(hn::Sub(x, min), inv);
  c = hn::IfThenElseZero(hn::Eq(c, c), c);
  c = hn::Min(hn::Max(c, hn::Zero(df)), hn::Set(df, qmax));
  return hn::NearestInt(c);
}

template <class DF, class V = hn::Vec<DF>>
HWY_INLINE void FiniteMinMax(DF df, V x, V& mn, V& mx) {
  const auto fin = hn::IsFinite(x);
  mn = hn::Min(mn, hn::IfThenElse(fin, x, hn::Set(df, hwy::HighestValue<float>())));
  mx = hn::Max(mx, hn::IfThenElse(fin, x, hn::Set(df, hwy::LowestValue<float>())));
}

// Keys, channel-wise: one vector of channels at a time, down the block's tokens twice
// (range, then codes); the block is a few KiB, so the second pass reads L1.
template <int B, class DF, class Src>
void EncodeKeys(DF df, const KvBlockShape& s, const Src& src, void* dst) {
  const size_t n = hn::Lanes(df), kv_dim = static_cast<size_t>(s.kv_dim());
  const float qmax = static_cast<float>((1 << B) - 1);
  uint16_t* pmin = static_cast<uint16_t*>(dst);
  uint16_t* pscale = pmin + kv_dim;
  uint8_t* codes = reinterpret_cast<uint8_t*>(pscale + kv_dim);
  const size_t rb = QLayout(static_cast<KvFormat>(B), KvPart::key, s).row_bytes;
  for (size_t ch = 0; ch < kv_dim; ch += n) {
    auto mn = hn::Set(df, hwy::HighestValue<float>()), mx = hn::Set(df, hwy::LowestValue<float>());
    for (int t = 0; t < s.n_tokens; ++t) FiniteMinMax(df, src.Load(df, t, ch), mn, mx);
    hn::Vec<DF> min, scale, inv;
    Params(df, mn, mx, qmax, min, scale, inv);
    kc::StoreF16(df, min, pmin + ch);
    kc::StoreF16(df, scale, pscale + ch);
    for (int t = 0; t < s.n_tokens; ++t)
      kc::StoreCodes<B>(df, Encode(df, src.Load(df, t, ch), min, inv, qmax), codes + t * rb, ch);
  }
}

// Group ranges of a value block, padded to whole vectors: min, max, then scale and 1 / scale.
std::vector<float>& ValueScratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf;
}

// Values, token-wise per head: the range of each (token, head), the params of all of them a
// vector at a time, then the codes.
template <int B, class DF, class Src>
void EncodeValues(DF df, const KvBlockShape& s, const Src& src, void* dst) {
  const size_t n = hn::Lanes(df), hd = static_cast<size_t>(s.head_dim);
  const float qmax = static_cast<float>((1 << B) - 1);
  const size_t pairs = static_cast<size_t>(s.n_tokens) * s.n_head_kv;
  const hn::ScalableTag<float> dp;  // over pairs
  const size_t np = hn::Lanes(dp), padded = (pairs + np - 1) / np * np;
  std::vector<float>& buf = ValueScratch(4 * padded);
  float* gmin = buf.data();
  float* gmax = gmin + padded;
  float* gscale = gmax + padded;
  float* ginv = gscale + padded;
  for (int t = 0; t < s.n_tokens; ++t)
    for (int h = 0; h < s.n_head_kv; ++h) {
      auto mn = hn::Set(df, hwy::HighestValue<float>()), mx = hn::Set(df, hwy::LowestValue<float>());
      for (size_t d = 0; d < hd; d += n) FiniteMinMax(df, src.Load(df, t, h, h * hd + d), mn, mx);
      const size_t i = static_cast<size_t>(t) * s.n_head_kv + h;
      gmin[i] = hn::GetLane(hn::MinOfLanes(df, mn));
      gmax[i] = hn::GetLane(hn::MaxOfLanes(df, mx));
    }
  std::fill(gmin + pairs, gmin + padded, 0.0f);
  std::fill(gmax + pairs, gmax + padded, 0.0f);
  uint16_t* pmin = static_cast<uint16_t*>(dst);
  uint16_t* pscale = pmin + pairs;
  uint8_t* codes = reinterpret_cast<uint8_t*>(pscale + pairs);
  for (size_t i = 0; i < padded; i += np) {
    hn::Vec<decltype(dp)> min, scale, inv;
    Params(dp, hn::LoadU(dp, gmin + i), hn::LoadU(dp, gmax + i), qmax, min, scale, inv);
    hn::StoreU(min, dp, gmin + i);
    hn::StoreU(scale, dp, gscale + i);
    hn::StoreU(inv, dp, ginv + i);
  }
  for (size_t i = 0; i < pairs; ++i) {
    pmin[i] = hal::fp32_to_fp16(gmin[i]);  // exact: both are f16 values
    pscale[i] = hal::fp32_to_fp16(gscale[i]);
  }
  const size_t rb = QLayout(static_cast<KvFormat>(B), KvPart::value, s).row_bytes;
  for (int t = 0; t < s.n_tokens; ++t)
    for (int h = 0; h < s.n_head_kv; ++h) {
      const size_t i = static_cast<size_t>(t) * s.n_head_kv + h;
      const auto min = hn::Set(df, gmin[i]), inv = hn::Set(df, ginv[i]);
      for (size_t d = 0; d < hd; d += n) {
        const size_t ch = h * hd + d;
        kc::StoreCodes<B>(df, Encode(df, src.Load(df, t, h, ch), min, inv, qmax), codes + t * rb, ch);
      }
    }
}

template <class F>
void WithBits(KvFormat f, const F& fn) {
  switch (f) {
    case KvFormat::q8: return fn(std::integral_constant<int, 8>());
    case KvFormat::q4: return fn(std::integral_constant<int, 4>());
    case KvFormat::q3: return fn(std::integral_constant<int, 3>());
    case KvFormat::q2: return fn(std::integral_constant<int, 2>());
    case KvFormat::f16: break;
  }
  assert(false && "not a q format");
}

void Quantize(KvPart part, const KvBlockShape& s, const uint16_t* src, KvFormat to, void* dst) {
  const F16Source in{src, static_cast<size_t>(s.kv_dim())};
  WithBits(to, [&](auto bits) {
    constexpr int B = decltype(bits)::value;
    if (part == KvPart::key) {
      kc::WithTagDividing(s.kv_dim(), [&](auto df) { EncodeKeys<B>(df, s, in, dst); });
    } else {
      kc::WithTagDividing(s.head_dim, [&](auto df) { EncodeValues<B>(df, s, in, dst); });
    }
  });
}

// Fused only towards fewer bits, the direction compression takes: the other pairs would
// multiply this file's instantiations (and its build time) for conversions nobody makes on a
// hot path, and kv_requantize serves them through f16 with the same bytes.
void Requantize(KvPart part, const KvBlockShape& s, KvFormat from, const void* src, KvFormat to, void* dst) {
  WithBits(from, [&](auto from_bits) {
    constexpr int BF = decltype(from_bits)::value;
    WithBits(to, [&](auto to_bits) {
      constexpr int BT = decltype(to_bits)::value;
      if constexpr (BT >= BF) {
        assert(false && "kv_requantize fuses only towards fewer bits");
      } else if (part == KvPart::key) {
        const KeySource<BF> in(src, s);
        kc::WithTagDividing(s.kv_dim(), [&](auto df) { EncodeKeys<BT>(df, s, in, dst); });
      } else {
        const ValueSource<BF> in(src, s);
        kc::WithTagDividing(s.head_dim, [&](auto df) { EncodeValues<BT>(df, s, in, dst); });
      }
    });
  });
}

void Dequantize(KvPart part, const KvBlockShape& s, KvFormat from, const void* src, uint16_t* dst) {
  const size_t kv_dim = static_cast<size_t>(s.kv_dim());
  WithBits(from, [&](auto bits) {
    constexpr int B = decltype(bits)::value;
    if (part == KvPart::key) {
      const KeySource<B> in(src, s);
      kc::WithTagDividing(kv_dim, [&](auto df) {
        for (int t = 0; t < s.n_tokens; ++t)
          for (size_t ch = 0; ch < kv_dim; ch += hn::Lanes(df)) kc::StoreF16(df, in.Load(df, t, ch), dst + t * kv_dim + ch);
      });
    } else {
      const ValueSource<B> in(src, s);
      const size_t hd = static_cast<size_t>(s.head_dim);
      kc::WithTagDividing(hd, [&](auto df) {
        for (int t = 0; t < s.n_tokens; ++t)
          for (int h = 0; h < s.n_head_kv; ++h)
            for (size_t d = 0; d < hd; d += hn::Lanes(df)) {
              const size_t ch = h * hd + d;
              kc::StoreF16(df, in.Load(df, t, h, ch), dst + t * kv_dim + ch);
            }
      });
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::policy
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::policy {
HWY_EXPORT(Quantize);
HWY_EXPORT(Requantize);
HWY_EXPORT(Dequantize);

namespace {
bool valid(const hal::KvBlockShape& s) {
  return s.n_tokens >= 0 && s.n_head_kv > 0 && s.head_dim > 0 && s.kv_dim() % 8 == 0;
}
}  // namespace

void kv_quantize(hal::KvPart part, const hal::KvBlockShape& shape, const uint16_t* src, hal::KvFormat to, void* dst) {
  assert(valid(shape) && to != hal::KvFormat::f16);
  (void)valid;
  if (shape.n_tokens == 0) return;
  HWY_DYNAMIC_DISPATCH(Quantize)(part, shape, src, to, dst);
}

void kv_requantize(hal::KvPart part, const hal::KvBlockShape& shape, hal::KvFormat from, const void* src,
                   hal::KvFormat to, void* dst) {
  assert(valid(shape) && from != hal::KvFormat::f16 && to != hal::KvFormat::f16);
  if (shape.n_tokens == 0) return;
  if (from == to) {
    std::memcpy(dst, src, hal::kv_block_bytes(from, part, shape));
    return;
  }
  if (hal::kv_format_bits(to) > hal::kv_format_bits(from)) {
    std::vector<uint16_t> f16(hal::kv_block_bytes(hal::KvFormat::f16, part, shape) / sizeof(uint16_t));
    HWY_DYNAMIC_DISPATCH(Dequantize)(part, shape, from, src, f16.data());
    HWY_DYNAMIC_DISPATCH(Quantize)(part, shape, f16.data(), to, dst);
    return;
  }
  HWY_DYNAMIC_DISPATCH(Requantize)(part, shape, from, src, to, dst);
}

void kv_dequantize(hal::KvPart part, const hal::KvBlockShape& shape, hal::KvFormat from, const void* src,
                   uint16_t* dst) {
  assert(valid(shape));
  if (shape.n_tokens == 0) return;
  if (from == hal::KvFormat::f16) {
    std::memcpy(dst, src, hal::kv_block_bytes(from, part, shape));
    return;
  }
  HWY_DYNAMIC_DISPATCH(Dequantize)(part, shape, from, src, dst);
}

}  // namespace llmsvc::policy
#endif  // HWY_ONCE
