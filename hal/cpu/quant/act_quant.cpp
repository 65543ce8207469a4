// SPDX-License-Identifier: Apache-2.0
// Activation quantization to int8 blocks (Highway for Q8; Q8K scalar, it feeds only K-quants).
#include "hal/cpu/quant/act_quant.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "hal/host/fp16.h"

#include "hal/host/hwy_targets.h"  // before any Highway header
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/cpu/quant/act_quant.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#endif

#ifndef LLMSVC_HAL_CPU_QUANT_ACT_QUANT_WALK_
#define LLMSVC_HAL_CPU_QUANT_ACT_QUANT_WALK_
namespace llmsvc::hal::cpu {
// The (token, block) of consecutive storage entries, without a division per entry.
struct EntryWalk {
  const ActQ8& a;
  int token, in_group, group_size;
  int64_t block;
  EntryWalk(const ActQ8& act, int64_t o) : a(act) {
    a.entry(o, &token, &block);
    in_group = token % kTokenGroup;
    group_size = a.group_size(token / kTokenGroup);
  }
  void next() {
    ++token;
    if (++in_group < group_size) return;
    token -= in_group;
    in_group = 0;
    if (++block < a.nb()) return;
    block = 0;
    token += group_size;
    group_size = a.group_size(token / kTokenGroup);
  }
};
}  // namespace llmsvc::hal::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// AVX-512 with hardware fp16 rounding (F16C): the decode path quantizes one row per matmul,
// so this per-block work is on the critical path of every small matmul.
void QuantizeQ8(const float* x, const ActQ8& a, int64_t o_begin, int64_t o_end, int32_t zero_point) {
  if (o_begin >= o_end) return;
  EntryWalk e(a, o_begin);
  for (int64_t o = o_begin; o < o_end; ++o, e.next()) {
    const float* xb = x + e.token * a.cols + e.block * 32;
    const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.f;
    const __m512 vid = _mm512_set1_ps(amax != 0.f ? 127.f / amax : 0.f);
    // |x * id| <= 127, so the conversion (round to nearest even) never saturates.
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
    const __m256i q8 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtsepi32_epi8(q0)),
                                               _mm512_cvtsepi32_epi8(q1), 1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.q + o * 32), q8);
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    a.d[o] = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    a.s[o] = _cvtsh_ss(_cvtss_sh(d * static_cast<float>(sum), _MM_FROUND_TO_NEAREST_INT));
    // Sums of the 8 groups of 4: pairs of bytes, then pairs of pairs.
    const __m256i g4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q8), _mm256_set1_epi16(1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.bias + o * 8),
                        _mm256_sub_epi32(_mm256_set1_epi32(kGroupBias), _mm256_mullo_epi32(g4, _mm256_set1_epi32(zero_point))));
  }
}
#else
void QuantizeQ8(const float* x, const ActQ8& a, int64_t o_begin, int64_t o_end, int32_t zero_point) {
  const hn::CappedTag<float, 16> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  if (o_begin >= o_end) return;
  EntryWalk e(a, o_begin);
  for (int64_t o = o_begin; o < o_end; ++o, e.next()) {
    const float* xb = x + e.token * a.cols + e.block * 32;
    int8_t* qb = a.q + o * 32;
    auto vmax = hn::Zero(df);
    for (int i = 0; i < 32; i += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xb + i)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const float d = amax / 127.f;
    const auto vid = hn::Set(df, amax != 0.f ? 127.f / amax : 0.f);
    auto vsum = hn::Zero(di);
    for (int i = 0; i < 32; i += N) {
      const auto q = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + i), vid));
      vsum = hn::Add(vsum, q);
      hn::StoreU(hn::DemoteTo(d8, q), d8, qb + i);
    }
    const int32_t sum = hn::GetLane(hn::SumOfLanes(di, vsum));
    a.d[o] = fp16_to_fp32(fp32_to_fp16(d));
    a.s[o] = fp16_to_fp32(fp32_to_fp16(d * static_cast<float>(sum)));
    for (int g = 0; g < 8; ++g) {
      a.bias[o * 8 + g] = kGroupBias - zero_point * (qb[4 * g] + qb[4 * g + 1] + qb[4 * g + 2] + qb[4 * g + 3]);
    }
  }
}
#endif

// Stores superblock sb of token t: its quants q[256] and scale d, and the half-block sums.
inline void store_q8k(const ActQ8K& a, int t, int64_t sb, const int8_t* q, float d) {
  a.d[a.index_sb(t, sb)] = d;
  for (int b = 0; b < 8; ++b) {
    const int64_t o = a.index(t, sb * 8 + b);
    std::memcpy(a.q + 32 * o, q + 32 * b, 32);
    int lo = 0, hi = 0;
    for (int i = 0; i < 16; ++i) {
      lo += q[32 * b + i];
      hi += q[32 * b + 16 + i];
    }
    a.s16[o] = static_cast<int32_t>((static_cast<uint32_t>(hi) << 16) | (static_cast<uint32_t>(lo) & 0xFFFFu));
    for (int g = 0; g < 8; ++g) {
      const int8_t* qg = q + 32 * b + 4 * g;
      a.z6[8 * o + g] = -32 * (qg[0] + qg[1] + qg[2] + qg[3]);
    }
  }
}

// ggml's quantize_row_q8_K_ref for one superblock: the first value of largest magnitude
// maps to -127.
inline float quantize_superblock_ref(const float* xs, int8_t* q) {
  float amax = 0.f, vmax = 0.f;
  for (int j = 0; j < 256; ++j) {
    const float ax = std::fabs(xs[j]);
    if (ax > amax) {
      amax = ax;
      vmax = xs[j];
    }
  }
  if (amax == 0.f) {
    std::fill(q, q + 256, int8_t{0});
    return 0.f;
  }
  const float iscale = -127.f / vmax;
  for (int j = 0; j < 256; ++j) q[j] = static_cast<int8_t>(std::min(127, static_cast<int>(std::nearbyint(iscale * xs[j]))));
  return 1.f / iscale;
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
void QuantizeQ8K(const float* x, const ActQ8K& a, int t_begin, int t_end) {
  for (int t = t_begin; t < t_end; ++t) {
    for (int64_t sb = 0; sb < a.nsb(); ++sb) {
      const float* xs = x + t * a.cols + sb * 256;
      __m512 vmx = _mm512_set1_ps(-INFINITY), vmn = _mm512_set1_ps(INFINITY);
      for (int i = 0; i < 256; i += 16) {
        const __m512 v = _mm512_loadu_ps(xs + i);
        vmx = _mm512_max_ps(vmx, v);
        vmn = _mm512_min_ps(vmn, v);
      }
      const float mx = _mm512_reduce_max_ps(vmx), mn = _mm512_reduce_min_ps(vmn);
      alignas(64) int8_t q[256];
      float d;
      if (mx == -mn || !(mx > -mn || -mn > mx)) {
        d = quantize_superblock_ref(xs, q);  // tie (or NaN): which comes first decides the sign
      } else {
        const float vmax = mx > -mn ? mx : mn;
        const float iscale = -127.f / vmax;
        const __m512 vis = _mm512_set1_ps(iscale);
        for (int i = 0; i < 256; i += 16) {
          // Round to nearest even; +128 (the opposite extreme) saturates to 127 as ggml clamps.
          const __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xs + i), vis));
          _mm_store_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtsepi32_epi8(qi));
        }
        d = 1.f / iscale;
      }
      store_q8k(a, t, sb, q, d);
    }
  }
}
#else
void QuantizeQ8K(const float* x, const ActQ8K& a, int t_begin, int t_end) {
  const int64_t nsb = a.nsb();
  for (int t = t_begin; t < t_end; ++t) {
    for (int64_t sb = 0; sb < nsb; ++sb) {
      int8_t q[256];
      const float d = quantize_superblock_ref(x + t * a.cols + sb * 256, q);
      store_q8k(a, t, sb, q, d);
    }
  }
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal::cpu {
HWY_EXPORT(QuantizeQ8);
HWY_EXPORT(QuantizeQ8K);

namespace {
uint8_t* align64(uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}
}  // namespace

ActQ8 ActQ8::in(void* mem, int64_t cols, int n_tokens) {
  ActQ8 a;
  const size_t nblk = static_cast<size_t>(n_tokens) * static_cast<size_t>(cols / 32);
  uint8_t* p = static_cast<uint8_t*>(mem);
  a.q = reinterpret_cast<int8_t*>(p);
  p = align64(p + static_cast<size_t>(n_tokens) * static_cast<size_t>(cols));
  a.d = reinterpret_cast<float*>(p);
  p = align64(p + nblk * 4);
  a.s = reinterpret_cast<float*>(p);
  p = align64(p + nblk * 4);
  a.bias = reinterpret_cast<int32_t*>(p);
  a.cols = cols;
  a.n_tokens = n_tokens;
  return a;
}

void quantize_q8(const float* x, const ActQ8& a, int64_t o_begin, int64_t o_end, int32_t zero_point) {
  HWY_DYNAMIC_DISPATCH(QuantizeQ8)(x, a, o_begin, o_end, zero_point);
}

void quantize_q8_ref(const float* x, int8_t* q, float* d, float* s, int32_t* bias, int64_t n, int32_t zero_point) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32, q += 32) {
    float amax = 0.f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float db = amax / 127.f;
    const float id = amax != 0.f ? 127.f / amax : 0.f;
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      q[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
      sum += q[i];
    }
    d[b] = fp16_to_fp32(fp32_to_fp16(db));
    s[b] = fp16_to_fp32(fp32_to_fp16(db * static_cast<float>(sum)));
    for (int g = 0; g < 8; ++g) bias[8 * b + g] = kGroupBias - zero_point * (q[4 * g] + q[4 * g + 1] + q[4 * g + 2] + q[4 * g + 3]);
  }
}

ActQ8K ActQ8K::in(void* mem, int64_t cols, int n_tokens) {
  ActQ8K a;
  uint8_t* p = static_cast<uint8_t*>(mem);
  a.q = reinterpret_cast<int8_t*>(p);
  p = align64(p + static_cast<size_t>(n_tokens) * static_cast<size_t>(cols));
  a.d = reinterpret_cast<float*>(p);
  p = align64(p + static_cast<size_t>(n_tokens) * static_cast<size_t>(cols / 256) * 4);
  a.s16 = reinterpret_cast<int32_t*>(p);
  p = align64(p + static_cast<size_t>(n_tokens) * static_cast<size_t>(cols / 32) * 4);
  a.z6 = reinterpret_cast<int32_t*>(p);
  a.cols = cols;
  a.n_tokens = n_tokens;
  return a;
}

void quantize_q8k(const float* x, const ActQ8K& a, int t_begin, int t_end) {
  HWY_DYNAMIC_DISPATCH(QuantizeQ8K)(x, a, t_begin, t_end);
}

}  // namespace llmsvc::hal::cpu
#endif
