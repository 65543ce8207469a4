// SPDX-License-Identifier: Apache-2.0
// What CPU attention's per-target passes share: row block, f16 views, Sum4, WithCount, plan names.
// Sum4 takes four lane sums at once; WithCount makes a runtime count a compile-time one.
//
// Per-target header (included once per Highway target, like Highway's own -inl.h files), for
// attention.cpp alone.
#if defined(LLMSVC_HAL_CPU_ATTENTION_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMSVC_HAL_CPU_ATTENTION_SIMD_INL_H_
#undef LLMSVC_HAL_CPU_ATTENTION_SIMD_INL_H_
#else
#define LLMSVC_HAL_CPU_ATTENTION_SIMD_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "hal/cpu/attention_plan.h"
#include "hal/cpu/ggml_sum-inl.h"
#include "hal/host/fp16.h"
#include "hal/host/kv_codes-inl.h"  // RoundF16, LoadF16, LoadCodes, WithTagDividing
#include "hwy/highway.h"

#ifndef LLMSVC_UNROLL
// Loops over the rows of a micro-kernel must be unrolled or the accumulators live in memory.
#if defined(__clang__)
#define LLMSVC_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define LLMSVC_UNROLL _Pragma("GCC unroll 16")
#else
#define LLMSVC_UNROLL
#endif
#endif

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
// Internal linkage for all of attention.cpp's per-target code (each pass file opens this too),
// which the plan's file-local types gave it while plan and passes were one file: GCC inlines
// and clones local functions more freely, and the passes' speed was measured that way.
namespace {
namespace hn = hwy::HWY_NAMESPACE;
// The KV block readers (hal/host/kv_codes-inl.h), beside this file's own overloads.
using llmsvc::hal::host::HWY_NAMESPACE::LoadCodes;
using llmsvc::hal::host::HWY_NAMESPACE::LoadF16;
using llmsvc::hal::host::HWY_NAMESPACE::RoundF16;
using llmsvc::hal::host::HWY_NAMESPACE::WithTagDividing;
// The plan's names (attention_plan.h), unqualified in the passes, which read it throughout.
using attn::build_set;
using attn::carve;
using attn::for_each_row_block;
using attn::Plan;
using attn::prefill_set;
using attn::q_block;
using attn::QBlock;
using attn::RowSet;
using attn::SetView;
using attn::visible;

// Rows per micro-kernel: 4 where there are 32 vector registers, 2 where there are 16
// (the q.k kernel keeps rows x 4 accumulators live, the V pass rows x 4).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kRowBlock = 2;
#else
constexpr int kRowBlock = 4;
#endif

inline const hwy::float16_t* as_f16(const void* p) { return static_cast<const hwy::float16_t*>(p); }

inline float RoundF16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

#if !HWY_HAVE_SCALABLE
#if HWY_TARGET == HWY_SCALAR
template <class DF, class V>
HWY_INLINE void Sum4(DF, V a, V b, V c, V e, float scale, float* HWY_RESTRICT out, int n) {
  const float t[4] = {hn::GetLane(a), hn::GetLane(b), hn::GetLane(c), hn::GetLane(e)};
  for (int i = 0; i < n; ++i) out[i] = t[i] * scale;
}
#else
// out[0..n) = scale * (the lane sums of a, b, c, e)[0..n), each sum reduced like Hsum (so a
// key's score does not depend on the keys beside it).
template <class DF, class V>
HWY_INLINE void Sum4(DF df, V a, V b, V c, V e, float scale, float* HWY_RESTRICT out, int n) {
  constexpr size_t kN = hn::MaxLanes(DF());
  const hn::Full128<float> d4;
  hn::Vec<decltype(d4)> s;
  if constexpr (kN == 16) {
    // [a.lo + a.hi | b.lo + b.hi], likewise c, e; then the 128-bit blocks of each half.
    const V ab = hn::Add(hn::ConcatLowerLower(df, b, a), hn::ConcatUpperUpper(df, b, a));
    const V ce = hn::Add(hn::ConcatLowerLower(df, e, c), hn::ConcatUpperUpper(df, e, c));
    V w = hn::OddEvenBlocks(hn::Add(ce, hn::SwapAdjacentBlocks(ce)), hn::Add(ab, hn::SwapAdjacentBlocks(ab)));
    w = hn::Add(w, hn::Shuffle1032(w));  // blocks a, c, b, e: lane 0 = (l0 + l2) + (l1 + l3)
    w = hn::Add(w, hn::Shuffle2301(w));
    alignas(64) static constexpr int32_t kIdx[16] = {0, 8, 4, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const hn::Half<DF> d8;
    s = hn::LowerHalf(d4, hn::LowerHalf(d8, hn::TableLookupLanes(w, hn::SetTableIndices(df, kIdx))));
  } else if constexpr (kN == 8) {
    const V ab = hn::Add(hn::ConcatLowerLower(df, b, a), hn::ConcatUpperUpper(df, b, a));  // blocks a, b
    const V ce = hn::Add(hn::ConcatLowerLower(df, e, c), hn::ConcatUpperUpper(df, e, c));  // blocks c, e
    V t = hn::Add(hn::InterleaveLower(df, ab, ce), hn::InterleaveUpper(df, ab, ce));  // [x0+x2, y0+y2, x1+x3, y1+y3]
    t = hn::Add(t, hn::Shuffle1032(t));                                                  // lanes 0, 1: x, y
    s = hn::InterleaveLower(d4, hn::LowerHalf(d4, t), hn::UpperHalf(d4, t));             // a, b, c, e
  } else if constexpr (kN == 4) {
    const V ab = hn::Add(hn::InterleaveLower(df, a, b), hn::InterleaveUpper(df, a, b));  // [a0+a2, b0+b2, a1+a3, b1+b3]
    const V ce = hn::Add(hn::InterleaveLower(df, c, e), hn::InterleaveUpper(df, c, e));
    const hn::Repartition<double, DF> dd;
    const auto ab64 = hn::BitCast(dd, ab), ce64 = hn::BitCast(dd, ce);
    s = hn::Add(hn::BitCast(df, hn::InterleaveLower(dd, ab64, ce64)),
                hn::BitCast(df, hn::InterleaveUpper(dd, ab64, ce64)));
  } else {
    const float t[4] = {hn::GetLane(a), hn::GetLane(b), hn::GetLane(c), hn::GetLane(e)};
    for (int i = 0; i < n; ++i) out[i] = t[i] * scale;
    return;
  }
  s = hn::Mul(s, hn::Set(d4, scale));
  if (n == 4) {
    hn::StoreU(s, d4, out);
  } else {
    alignas(16) float t[4];
    hn::Store(s, d4, t);
    for (int i = 0; i < n; ++i) out[i] = t[i];
  }
}

#endif  // HWY_TARGET == HWY_SCALAR
#else
// Scalable vectors cannot live in arrays: one row and one key at a time.
template <class DF, class V>
HWY_INLINE void Sum4(DF df, V a, V b, V c, V e, float scale, float* HWY_RESTRICT out, int n) {
  const float t[4] = {Hsum(df, a), Hsum(df, b), Hsum(df, c), Hsum(df, e)};
  for (int i = 0; i < n; ++i) out[i] = t[i] * scale;
}
#endif  // !HWY_HAVE_SCALABLE

// Calls f(std::integral_constant<int, n>) for a runtime n in [1, N].
template <int N, class F>
HWY_INLINE void WithCount(int n, const F& f) {
  if constexpr (N > 1) {
    if (n < N) return WithCount<N - 1>(n, f);
  }
  f(std::integral_constant<int, N>());
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
