// SPDX-License-Identifier: Apache-2.0
// The f32 reductions of llama.cpp's CPU backend (its AVX-512 build), for every Highway target,
// so that float sums come out with llama.cpp's bits:
//   Hsum      the lanes of one vector as _mm512_reduce_add_ps / llamafile's hsum fold them:
//             the upper half added onto the lower half down to 4 lanes, then (l0+l2) + (l1+l3);
//   Reduce16  one of llama.cpp's 16-lane registers held as 16 / n vectors of n lanes (piece
//             i = lanes [i n, i n + n)), folded the same way;
//   VecDotSum ggml_vec_dot_f16 / _f32's 4 registers of 16 lanes (sum[j] = pieces [j kG, j kG + kG)
//             of 64 / n vectors), combined (sum0 + sum2) + (sum1 + sum3), then reduced.
// A sum kept in these lanes with an FMA chain per lane, then reduced here, is llama.cpp's sum
// whatever the vector width: narrower vectors hold a 16-lane register in several pieces.
//
// Per-target header (included once per Highway target, like Highway's own -inl.h files).
#if defined(LLMSVC_HAL_CPU_GGML_SUM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LLMSVC_HAL_CPU_GGML_SUM_INL_H_
#undef LLMSVC_HAL_CPU_GGML_SUM_INL_H_
#else
#define LLMSVC_HAL_CPU_GGML_SUM_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {

// llama.cpp's f32 registers have 16 lanes; its single-token dot products take 4 of them (64
// elements) per step.
constexpr int kGgmlLanes = 16;
constexpr int kGgmlStep = 64;

#if HWY_HAVE_SCALABLE || HWY_TARGET == HWY_SCALAR
template <class DF, class V>
HWY_INLINE float Hsum(DF df, V v) {
  return hwy::HWY_NAMESPACE::GetLane(hwy::HWY_NAMESPACE::SumOfLanes(df, v));
}
#else
template <class DF, class V>
HWY_INLINE float Hsum(DF df, V v) {
  namespace hn = hwy::HWY_NAMESPACE;
  if constexpr (hn::MaxLanes(DF()) > 4) {
    const hn::Half<DF> dh;
    return Hsum(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else if constexpr (hn::MaxLanes(DF()) == 4) {
    const V t = hn::Add(v, hn::Shuffle1032(v));
    return hn::GetLane(hn::Add(t, hn::Shuffle2301(t)));
  } else {
    return hn::GetLane(hn::SumOfLanes(df, v));
  }
}
#endif

#if !HWY_HAVE_SCALABLE
// Vectors of DF per 16-lane register.
template <class DF>
constexpr int PiecesPer16() {
  constexpr int n = static_cast<int>(hwy::HWY_NAMESPACE::MaxLanes(DF()));
  return n >= kGgmlLanes ? 1 : kGgmlLanes / n;
}

// pieces: PiecesPer16<DF>() vectors (overwritten).
template <class DF, class V>
HWY_INLINE float Reduce16(DF df, V* pieces) {
  for (int c = PiecesPer16<DF>() / 2; c >= 1; c /= 2) {
    for (int i = 0; i < c; ++i) pieces[i] = hwy::HWY_NAMESPACE::Add(pieces[i + c], pieces[i]);
  }
  return Hsum(df, pieces[0]);
}

// acc: 4 * PiecesPer16<DF>() vectors, register j = acc[j kG .. j kG + kG).
template <class DF, class V>
HWY_INLINE float VecDotSum(DF df, const V* acc) {
  constexpr int kG = PiecesPer16<DF>();
  V t[kG];
  for (int h = 0; h < kG; ++h) {
    t[h] = hwy::HWY_NAMESPACE::Add(hwy::HWY_NAMESPACE::Add(acc[h], acc[2 * kG + h]),
                                   hwy::HWY_NAMESPACE::Add(acc[kG + h], acc[3 * kG + h]));
  }
  return Reduce16(df, t);
}
#endif  // HWY_HAVE_SCALABLE

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard
