// SPDX-License-Identifier: Apache-2.0
// Row converters between fp32 and fp16 / bf16 (Highway, dispatched per CPU).
#include "hal/host/fp16.h"

#include "hal/host/hwy_targets.h"  // before any Highway header
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/host/fp16.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Where the fp16 instructions round exactly like fp32_to_fp16 (LLMSVC_HWY_NATIVE_F16) they
// convert whole vectors; elsewhere Highway emulates them and we use the scalar code instead.
void Fp16ToFp32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if LLMSVC_HWY_NATIVE_F16
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(src + i))), df, dst + i);
  }
#endif
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

void Fp32ToFp16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if LLMSVC_HWY_NATIVE_F16
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, src + i)), dh, reinterpret_cast<hwy::float16_t*>(dst + i));
  }
#endif
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

void Bf16ToFp32(const uint16_t* src, float* dst, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint16_t, decltype(df)> dh;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto w = hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(dh, src + i)));
    hn::StoreU(hn::BitCast(df, w), df, dst + i);
  }
  for (; i < n; ++i) dst[i] = bf16_to_fp32(src[i]);
}

void Fp32ToBf16(const float* src, uint16_t* dst, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> dh;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto x = hn::BitCast(du, hn::LoadU(df, src + i));
    const auto hi = hn::ShiftRight<16>(x);
    const auto rounded = hn::ShiftRight<16>(hn::Add(x, hn::Add(hn::Set(du, 0x7fffu), hn::And(hi, hn::Set(du, 1u)))));
    const auto is_nan = hn::Gt(hn::And(x, hn::Set(du, 0x7fffffffu)), hn::Set(du, 0x7f800000u));
    const auto r = hn::IfThenElse(is_nan, hn::Or(hi, hn::Set(du, 0x40u)), rounded);
    hn::StoreU(hn::DemoteTo(dh, hn::BitCast(di, r)), dh, dst + i);
  }
  for (; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal {
HWY_EXPORT(Fp16ToFp32);
HWY_EXPORT(Fp32ToFp16);
HWY_EXPORT(Bf16ToFp32);
HWY_EXPORT(Fp32ToBf16);

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) { HWY_DYNAMIC_DISPATCH(Fp16ToFp32)(src, dst, n); }
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) { HWY_DYNAMIC_DISPATCH(Fp32ToFp16)(src, dst, n); }
void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) { HWY_DYNAMIC_DISPATCH(Bf16ToFp32)(src, dst, n); }
void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) { HWY_DYNAMIC_DISPATCH(Fp32ToBf16)(src, dst, n); }
}  // namespace llmsvc::hal
#endif
