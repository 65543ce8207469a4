// SPDX-License-Identifier: Apache-2.0
// Highway helpers for the packed integer codes of the KV block formats (hal/kv_format.h),
// shared by the attention kernel (reads) and the policy's codecs (reads and writes), so both
// see one definition of the bit layout. Include after hwy/highway.h inside a foreach_target
// file; this header has per-target include guards.
//
// Codes are handled as int32 lanes in channel order: lane i of a vector of n lanes is channel
// ch + i. Where n * B >= 8 the n codes fill whole bytes (ch is a multiple of n, so they start
// on a byte boundary) and are widened in registers with shifts and masks; otherwise (n = 1 or
// 2 lanes at 2 bits, a scalar target or a tiny head_dim) bit by bit. 3-bit codes are read as
// one or two 24-bit groups (8 channels each) broadcast to every lane and shifted per lane.
#if defined(LLMSVC_HAL_CPU_KV_CODES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMSVC_HAL_CPU_KV_CODES_INL_H_
#undef LLMSVC_HAL_CPU_KV_CODES_INL_H_
#else
#define LLMSVC_HAL_CPU_KV_CODES_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <limits>

#include "hal/host/hwy_targets.h"  // LLMSVC_HWY_NATIVE_F16
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::host {
namespace HWY_NAMESPACE {
namespace hnk = hwy::HWY_NAMESPACE;

// v rounded to the nearest f16 (ties to even), kept as f32; like fp32_to_fp16 including
// overflow to inf. Without native f16 rounding, with float arithmetic.
template <class DF, class V = hnk::Vec<DF>>
HWY_INLINE V RoundF16(DF df, V v) {
#if LLMSVC_HWY_NATIVE_F16
  const hnk::Rebind<hwy::float16_t, DF> dh;
  return hnk::PromoteTo(df, hnk::DemoteTo(dh, v));
#else
  // Adding and removing c = 2^(e + 13), e = max(exponent of v, -14), leaves 11 significant
  // bits (fewer below 2^-14, as f16 subnormals), rounded by the FPU to nearest even.
  const hnk::RebindToSigned<DF> di;
  const auto ebits = hnk::And(hnk::BitCast(di, v), hnk::Set(di, 0x7f800000));
  const auto cbits = hnk::Add(hnk::Min(hnk::Max(ebits, hnk::Set(di, 113 << 23)), hnk::Set(di, 142 << 23)),
                              hnk::Set(di, 13 << 23));
  const V c = hnk::BitCast(df, cbits);
  const V a = hnk::Abs(v);
  V r = hnk::Sub(hnk::Add(a, c), c);
  r = hnk::IfThenElse(r > hnk::Set(df, 65504.0f), hnk::Set(df, std::numeric_limits<float>::infinity()), r);
  return hnk::CopySignToAbs(r, v);
#endif
}

// Loads Lanes(df) f16 values as f32. Highway 1.0 emulates the conversion on targets without
// F16C/NEON and reads inf and NaN there as large finite values; they are fixed up here.
template <class DF>
HWY_INLINE hnk::Vec<DF> LoadF16(DF df, const uint16_t* HWY_RESTRICT p) {
  const hnk::Rebind<hwy::float16_t, DF> dh;
  const auto v = hnk::PromoteTo(df, hnk::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
#if LLMSVC_HWY_NATIVE_F16
  return v;
#else
  const hnk::RebindToUnsigned<DF> du;
  const auto bits = hnk::PromoteTo(du, hnk::LoadU(hnk::Rebind<uint16_t, DF>(), p));
  const auto special = hnk::Eq(hnk::And(bits, hnk::Set(du, 0x7c00u)), hnk::Set(du, 0x7c00u));
  const auto fixed = hnk::Or(hnk::ShiftLeft<16>(hnk::And(bits, hnk::Set(du, 0x8000u))),
                             hnk::Or(hnk::Set(du, 0x7f800000u), hnk::ShiftLeft<13>(hnk::And(bits, hnk::Set(du, 0x3ffu)))));
  return hnk::IfThenElse(hnk::RebindMask(df, special), hnk::BitCast(df, fixed), v);
#endif
}

// Stores f32 values that are exactly f16 values (finite) as f16: exact on every target.
template <class DF>
HWY_INLINE void StoreF16(DF df, hnk::Vec<DF> v, uint16_t* HWY_RESTRICT p) {
  (void)df;
  const hnk::Rebind<hwy::float16_t, DF> dh;
  hnk::StoreU(hnk::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
}

// Calls f(df) with the widest f32 vector whose lane count divides dim.
template <class F>
HWY_INLINE void WithTagDividing(size_t dim, const F& f) {
  const hnk::ScalableTag<float> df;
  if (dim % hnk::Lanes(df) == 0) return f(df);
  const hnk::CappedTag<float, 8> d8;
  if (dim % hnk::Lanes(d8) == 0) return f(d8);
  const hnk::CappedTag<float, 4> d4;
  if (dim % hnk::Lanes(d4) == 0) return f(d4);
  f(hnk::CappedTag<float, 1>());
}

// Smallest f16 value >= v, for finite v >= 0 below 65504 (as f32): v rounded up to the f16
// grid there, 2^(e - 10) for v in [2^e, 2^(e + 1)), never finer than 2^-24 (subnormals).
template <class DF, class V = hnk::Vec<DF>>
HWY_INLINE V RoundUpF16(DF df, V v) {
  const hnk::RebindToSigned<DF> di;
  const auto ebits = hnk::And(hnk::BitCast(di, v), hnk::Set(di, 0x7f800000));
  const V g = hnk::BitCast(df, hnk::Max(hnk::Sub(ebits, hnk::Set(di, 10 << 23)), hnk::Set(di, 103 << 23)));
  return hnk::Mul(hnk::Ceil(hnk::Div(v, g)), g);  // v / g <= 2^11: exact, and so is the product
}

// Bits of channel c's code in a row of B-bit codes: bits [c * B, +B) of the row's little-endian
// bit stream (for B dividing 8: byte c / (8 / B), shift (c % (8 / B)) * B).
template <int B>
HWY_INLINE int32_t CodeAt(const uint8_t* HWY_RESTRICT row, size_t c) {
  if constexpr (8 % B == 0) {
    constexpr size_t kPer = 8 / B;
    return (row[c / kPer] >> ((c % kPer) * B)) & ((1 << B) - 1);
  } else {
    const size_t bit = c * B;  // B < 8: the code spans at most two bytes
    const uint32_t two = row[bit / 8] | (((bit % 8) + B > 8 ? uint32_t(row[bit / 8 + 1]) : 0u) << 8);
    return static_cast<int32_t>((two >> (bit % 8)) & ((1u << B) - 1));
  }
}

// Sets channel c's code in a row of B-bit codes, leaving the other bits as they are.
template <int B>
HWY_INLINE void SetCodeAt(uint8_t* HWY_RESTRICT row, size_t c, int32_t code) {
  for (int k = 0; k < B; ++k) {
    const size_t bit = c * B + static_cast<size_t>(k);
    const uint8_t mask = static_cast<uint8_t>(1u << (bit % 8));
    row[bit / 8] = static_cast<uint8_t>(((code >> k) & 1) ? (row[bit / 8] | mask) : (row[bit / 8] & ~mask));
  }
}

// The codes of channels [ch, ch + Lanes(df)) of a row of B-bit codes.
template <int B, class DF>
HWY_INLINE hnk::Vec<hnk::Rebind<int32_t, DF>> LoadCodes(DF df, const uint8_t* HWY_RESTRICT row, size_t ch) {
  const hnk::Rebind<int32_t, DF> di;
  constexpr size_t kN = hnk::MaxLanes(DF());
  if constexpr (B == 8) {
    return hnk::PromoteTo(di, hnk::LoadU(hnk::Rebind<uint8_t, DF>(), row + ch));
  } else if constexpr (B == 4 && kN >= 2 && !HWY_HAVE_SCALABLE) {
    // n / 2 bytes -> u32 lanes b -> (b | b << 12) & 0x000f000f: as u16 lanes, the low then the
    // high nibble of each byte, i.e. two channels in order.
    const hnk::Half<DF> dh;
    const hnk::Rebind<uint32_t, decltype(dh)> du32;
    const hnk::Repartition<uint16_t, decltype(du32)> du16;
    const auto b = hnk::PromoteTo(du32, hnk::LoadU(hnk::Rebind<uint8_t, decltype(dh)>(), row + ch / 2));
    const auto w = hnk::And(hnk::Or(b, hnk::ShiftLeft<12>(b)), hnk::Set(du32, 0x000f000fu));
    return hnk::PromoteTo(di, hnk::BitCast(du16, w));
  } else if constexpr (B == 2 && kN >= 4 && !HWY_HAVE_SCALABLE) {
    // The same twice: bytes -> nibbles (two codes each) -> codes.
    const hnk::Half<hnk::Half<DF>> dq;
    const hnk::Rebind<uint32_t, decltype(dq)> du32q;
    const hnk::Repartition<uint16_t, decltype(du32q)> du16h;
    const hnk::Rebind<uint32_t, hnk::Half<DF>> du32h;
    const hnk::Repartition<uint16_t, decltype(du32h)> du16;
    const auto b = hnk::PromoteTo(du32q, hnk::LoadU(hnk::Rebind<uint8_t, decltype(dq)>(), row + ch / 4));
    const auto nib = hnk::BitCast(du16h, hnk::And(hnk::Or(b, hnk::ShiftLeft<12>(b)), hnk::Set(du32q, 0x000f000fu)));
    const auto n = hnk::PromoteTo(du32h, nib);
    const auto w = hnk::And(hnk::Or(n, hnk::ShiftLeft<14>(n)), hnk::Set(du32h, 0x00030003u));
    return hnk::PromoteTo(di, hnk::BitCast(du16, w));
  } else if constexpr (B == 3 && kN >= 8 && kN <= 16 && !HWY_HAVE_SCALABLE) {
    // n = 8 or 16 channels from ch (a multiple of 8): one or two 3-byte groups. Lane i takes
    // group i / 8 and shifts it right by 3 * (i % 8).
    const hnk::RebindToUnsigned<decltype(di)> du;
    const uint8_t* g = row + ch / 8 * 3;
    const uint32_t g0 = g[0] | uint32_t(g[1]) << 8 | uint32_t(g[2]) << 16;
    auto words = hnk::Set(du, g0);
    const auto lane = hnk::Iota(du, 0);
    if constexpr (kN == 16) {
      const uint32_t g1 = g[3] | uint32_t(g[4]) << 8 | uint32_t(g[5]) << 16;
      words = hnk::IfThenElse(hnk::Lt(lane, hnk::Set(du, 8u)), words, hnk::Set(du, g1));
    }
    const auto shift = hnk::Mul(hnk::And(lane, hnk::Set(du, 7u)), hnk::Set(du, 3u));
    return hnk::BitCast(di, hnk::And(words >> shift, hnk::Set(du, 7u)));
  } else {
    HWY_ALIGN int32_t t[kN];
    const size_t n = hnk::Lanes(df);
    for (size_t i = 0; i < n; ++i) t[i] = CodeAt<B>(row, ch + i);
    return hnk::Load(di, t);
  }
}

// Writes codes (int32 lanes in [0, 2^B)) of channels [ch, ch + Lanes(df)) into a row of B-bit
// codes; other channels' bits are left as they are.
template <int B, class DF, class VI>
HWY_INLINE void StoreCodes(DF df, VI codes, uint8_t* HWY_RESTRICT row, size_t ch) {
  constexpr size_t kN = hnk::MaxLanes(DF());
  const hnk::Rebind<uint16_t, DF> du16;
  if constexpr (B == 8) {
    hnk::StoreU(hnk::DemoteTo(hnk::Rebind<uint8_t, DF>(), codes), hnk::Rebind<uint8_t, DF>(), row + ch);
  } else if constexpr (B == 4 && kN >= 2 && !HWY_HAVE_SCALABLE) {
    // u16 lanes c0, c1 -> u32 w = c0 | c1 << 16 -> (w | w >> 12) & 0xff = c0 | c1 << 4.
    const hnk::Repartition<uint32_t, decltype(du16)> du32;
    const hnk::RebindToSigned<decltype(du32)> di32;
    const auto w = hnk::BitCast(du32, hnk::DemoteTo(du16, codes));
    const auto b = hnk::And(hnk::Or(w, hnk::ShiftRight<12>(w)), hnk::Set(du32, 0xffu));
    const hnk::Rebind<uint8_t, decltype(du32)> du8;
    hnk::StoreU(hnk::DemoteTo(du8, hnk::BitCast(di32, b)), du8, row + ch / 2);
  } else if constexpr (B == 2 && kN >= 4 && !HWY_HAVE_SCALABLE) {
    // Codes -> nibbles (c0 | c1 << 2) -> bytes (n0 | n1 << 4), as for B == 4.
    const hnk::Repartition<uint32_t, decltype(du16)> du32h;
    const hnk::RebindToSigned<decltype(du32h)> di32h;
    const auto w = hnk::BitCast(du32h, hnk::DemoteTo(du16, codes));
    const auto nib = hnk::And(hnk::Or(w, hnk::ShiftRight<14>(w)), hnk::Set(du32h, 0x0fu));
    const hnk::Rebind<uint16_t, decltype(du32h)> du16h;
    const hnk::Repartition<uint32_t, decltype(du16h)> du32q;
    const hnk::RebindToSigned<decltype(du32q)> di32q;
    const auto w2 = hnk::BitCast(du32q, hnk::DemoteTo(du16h, hnk::BitCast(di32h, nib)));
    const auto b = hnk::And(hnk::Or(w2, hnk::ShiftRight<12>(w2)), hnk::Set(du32q, 0xffu));
    const hnk::Rebind<uint8_t, decltype(du32q)> du8;
    hnk::StoreU(hnk::DemoteTo(du8, hnk::BitCast(di32q, b)), du8, row + ch / 4);
  } else {
    const hnk::Rebind<int32_t, DF> di;
    HWY_ALIGN int32_t t[kN];
    hnk::Store(codes, di, t);
    const size_t n = hnk::Lanes(df);
    if constexpr (8 % B == 0) {
      constexpr size_t kPer = 8 / B;
      for (size_t i = 0; i < n; ++i) {
        const size_t c = ch + i;
        const int shift = static_cast<int>((c % kPer) * B);
        uint8_t& byte = row[c / kPer];
        byte = static_cast<uint8_t>((byte & ~(((1 << B) - 1) << shift)) | (t[i] << shift));
      }
    } else if (n % 8 == 0 && ch % 8 == 0) {
      // Whole groups of 8 codes: B bytes each, written outright.
      for (size_t i = 0; i < n; i += 8) {
        uint64_t word = 0;
        for (size_t k = 0; k < 8; ++k) word |= static_cast<uint64_t>(t[i + k]) << (k * B);
        uint8_t* g = row + (ch + i) / 8 * B;
        for (int b = 0; b < B; ++b) g[b] = static_cast<uint8_t>(word >> (8 * b));
      }
    } else {
      for (size_t i = 0; i < n; ++i) SetCodeAt<B>(row, ch + i, t[i]);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::host
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
