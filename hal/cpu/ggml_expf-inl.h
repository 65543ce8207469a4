// SPDX-License-Identifier: Apache-2.0
// ggml's vector expf and SiLU (ggml-cpu/vec.h, the AVX-512 variants), operation for operation,
// as Highway code for every target: llama.cpp's softmax and SwiGLU use them instead of libm,
// and matching its logits bit for bit needs the same roundings. On targets without FMA the
// fused steps round twice, so only FMA targets are bit-exact.
//
// Per-target header (included once per Highway target, like Highway's own -inl.h files).
#if defined(LLMSVC_HAL_CPU_GGML_EXPF_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMSVC_HAL_CPU_GGML_EXPF_INL_H_
#undef LLMSVC_HAL_CPU_GGML_EXPF_INL_H_
#else
#define LLMSVC_HAL_CPU_GGML_EXPF_INL_H_
#endif

#include <cmath>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {

// ggml_v_expf: exp(x) as 2^n * j(b), n = round(x / ln 2), b the reduced argument, j a
// polynomial; |n| > 192 gives 0 (n <= 0) or inf.
template <class DF, class V = hwy::HWY_NAMESPACE::Vec<DF>>
HWY_INLINE V ExpGgml(DF df, V x) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::RebindToSigned<DF> di;
  const V r = hn::Set(df, 0x1.8p23f);
  const V z = hn::MulAdd(x, hn::Set(df, 0x1.715476p+0f), r);
  const V n = hn::Sub(z, r);
  const V b = hn::NegMulAdd(n, hn::Set(df, 0x1.7f7d1cp-20f), hn::NegMulAdd(n, hn::Set(df, 0x1.62e4p-1f), x));
  const V u = hn::Mul(b, b);
  const V j = hn::MulAdd(hn::MulAdd(hn::MulAdd(hn::Set(df, 0x1.0e4020p-7f), b, hn::Set(df, 0x1.573e2ep-5f)), u,
                                    hn::MulAdd(hn::Set(df, 0x1.555e66p-3f), b, hn::Set(df, 0x1.fffdb6p-2f))),
                         u, hn::MulAdd(hn::Set(df, 0x1.ffffecp-1f), b, hn::Set(df, 1.0f)));
  // _mm512_scalef_ps(j, n) = j * 2^n rounded once. n (integral, |n| <= 192 where it counts)
  // is split in two halves so that both powers are normal floats and j * 2^e1 is exact.
  const auto ni = hn::ConvertTo(di, n);
  const auto e1 = hn::ShiftRight<1>(ni);
  const auto e2 = hn::Sub(ni, e1);
  const auto bias = hn::Set(di, 127);
  const V p1 = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(e1, bias)));
  const V p2 = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(e2, bias)));
  const V res = hn::Mul(hn::Mul(j, p1), p2);
  const V alt = hn::IfThenZeroElse(n <= hn::Zero(df), hn::Set(df, HUGE_VALF));
  return hn::IfThenElse(hn::Abs(n) > hn::Set(df, 192.0f), alt, res);
}

// ggml_v_silu: x / (1 + exp(0 - x)).
template <class DF, class V = hwy::HWY_NAMESPACE::Vec<DF>>
HWY_INLINE V SiluGgml(DF df, V x) {
  namespace hn = hwy::HWY_NAMESPACE;
  const V e = ExpGgml(df, hn::Sub(hn::Zero(df), x));
  return hn::Div(x, hn::Add(hn::Set(df, 1.0f), e));
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard
