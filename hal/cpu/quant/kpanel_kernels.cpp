// K-panel GEMM kernels (Q4_K / Q5_K / Q6_K with Q8_K activations).
//   AVX3_DL: per 32-column sub-block, 8 vpdpbusd give 16 rows' integer dots, vpmulld applies
//            the sub-block scales, vpdpwssd the mins; one float FMA per superblock.
//   Anything else: portable scalar code over the same layout.
#include "hal/cpu/quant/kpanel_kernels.h"

#include <algorithm>
#include <cstring>

#include "hal/cpu/quant/fp16.h"

#include "hal/cpu/quant/hwy_targets.h"  // before any Highway header
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/cpu/quant/kpanel_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {

#undef LLMSVC_KATTR
#if HWY_TARGET == HWY_AVX3_DL
#define LLMSVC_KATTR __attribute__((target(HWY_TARGET_STR ",avx512vnni")))
#else
#define LLMSVC_KATTR
#endif
#define LLMSVC_UNROLL _Pragma("GCC unroll 16")

template <KPanelKind K>
struct KKind {
  static constexpr bool kQ5 = K == KPanelKind::q5_k;
  static constexpr bool kQ6 = K == KPanelKind::q6_k;
  static constexpr bool kMin = !kQ6;
  static constexpr int kQhBytes = kQ6 ? 1024 : (kQ5 ? 512 : 0);
  static constexpr int kScBytes = kQ6 ? 256 : 128;
};

constexpr int kMaxTokens = 4;

// One panel's planes and T consecutive tokens of one token group: token t's 32-block b is at
// xq + 32 * (b * xstride + t) (its half sums at xs16[b * xstride + t]), its superblock s
// scale at xd[s * xstride + t].
struct KTileArgs {
  const uint8_t* qs;
  const uint8_t* qh;
  const uint8_t* sc;
  const uint8_t* mn;
  const uint16_t* d;
  const uint16_t* dmin;
  int64_t nsb;
  const int8_t* xq;
  const int32_t* xs16;
  const float* xd;
  int64_t xstride;
  float* y;
  int64_t ldy;
  int valid_rows;
};

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

#if HWY_TARGET == HWY_AVX3_DL
template <KPanelKind K, int T>
LLMSVC_KATTR HWY_NOINLINE void KTile(const KTileArgs& a) {
  using Kd = KKind<K>;
  __m512 acc[T];
  LLMSVC_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  const int64_t xs = a.xstride;
  for (int64_t s = 0; s < a.nsb; ++s) {
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.d + 16 * s)));
    if constexpr (Kd::kMin) {
      // Mins: sum_j mn[j][r] * (sum of token 32-block j), as int16 pairs (both halves of 16).
      const __m512 dminw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.dmin + 16 * s)));
      __m512i mnp[8];
      LLMSVC_UNROLL
      for (int j = 0; j < 8; ++j) {
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.mn + 128 * s + 16 * j)));
        mnp[j] = _mm512_or_si512(v, _mm512_slli_epi32(v, 16));
      }
      LLMSVC_UNROLL
      for (int t = 0; t < T; ++t) {
        __m512i imin = _mm512_setzero_si512();
        LLMSVC_UNROLL
        for (int j = 0; j < 8; ++j) imin = _mm512_dpwssd_epi32(imin, mnp[j], _mm512_set1_epi32(a.xs16[(8 * s + j) * xs + t]));
        acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(dminw, _mm512_set1_ps(a.xd[s * xs + t])), acc[t]);
      }
    }
    __m512i isum[T];
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      const int64_t b = 8 * s + j;
      const uint8_t* qs = a.qs + 2048 * s + 256 * j;
      __m512i v[8];
      LLMSVC_UNROLL
      for (int h = 0; h < 4; ++h) {
        const __m512i w = _mm512_load_si512(qs + 64 * h);
        v[h] = _mm512_and_si512(w, lo4);
        v[h + 4] = _mm512_and_si512(_mm512_srli_epi16(w, 4), lo4);
      }
      if constexpr (Kd::kQ5) {
        const uint64_t* m = reinterpret_cast<const uint64_t*>(a.qh + 512 * s + 64 * j);
        LLMSVC_UNROLL
        for (int g = 0; g < 8; ++g) v[g] = _mm512_mask_add_epi8(v[g], _cvtu64_mask64(m[g]), v[g], _mm512_set1_epi8(0x10));
      }
      if constexpr (Kd::kQ6) {
        const uint64_t* m = reinterpret_cast<const uint64_t*>(a.qh + 1024 * s + 128 * j);
        LLMSVC_UNROLL
        for (int g = 0; g < 8; ++g) {
          v[g] = _mm512_mask_add_epi8(v[g], _cvtu64_mask64(m[g]), v[g], _mm512_set1_epi8(0x10));
          v[g] = _mm512_mask_add_epi8(v[g], _cvtu64_mask64(m[8 + g]), v[g], _mm512_set1_epi8(0x20));
        }
        const __m512i sc0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.sc + 256 * s + 32 * j)));
        const __m512i sc1 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.sc + 256 * s + 32 * j + 16)));
        __m512i t0[T], t1[T];
        LLMSVC_UNROLL
        for (int t = 0; t < T; ++t) {
          // Zero point 32 folded in: sum (u - 32) x = sum u x - 32 * (sum of x over the 16).
          const int32_t pk = a.xs16[b * xs + t];
          t0[t] = _mm512_set1_epi32(-32 * static_cast<int16_t>(pk & 0xFFFF));
          t1[t] = _mm512_set1_epi32(-32 * (pk >> 16));
        }
        LLMSVC_UNROLL
        for (int g = 0; g < 4; ++g) {
          LLMSVC_UNROLL
          for (int t = 0; t < T; ++t) {
            const int8_t* xb = a.xq + 32 * (b * xs + t);
            t0[t] = _mm512_dpbusd_epi32(t0[t], v[g], _mm512_set1_epi32(load_i32(xb + 4 * g)));
            t1[t] = _mm512_dpbusd_epi32(t1[t], v[g + 4], _mm512_set1_epi32(load_i32(xb + 16 + 4 * g)));
          }
        }
        LLMSVC_UNROLL
        for (int t = 0; t < T; ++t) {
          isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(t0[t], sc0), _mm512_mullo_epi32(t1[t], sc1)));
        }
      } else {
        const __m512i scv = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.sc + 128 * s + 16 * j)));
        __m512i tmp[T];
        LLMSVC_UNROLL
        for (int t = 0; t < T; ++t) tmp[t] = _mm512_setzero_si512();
        LLMSVC_UNROLL
        for (int g = 0; g < 8; ++g) {
          LLMSVC_UNROLL
          for (int t = 0; t < T; ++t) {
            tmp[t] = _mm512_dpbusd_epi32(tmp[t], v[g], _mm512_set1_epi32(load_i32(a.xq + 32 * (b * xs + t) + 4 * g)));
          }
        }
        LLMSVC_UNROLL
        for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(tmp[t], scv));
      }
    }
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dw, _mm512_set1_ps(a.xd[s * xs + t])), acc[t]);
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << a.valid_rows) - 1);
  LLMSVC_UNROLL
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.y + t * a.ldy, rows, acc[t]);
}

#else

// Portable reference over the K-panel layout.
template <KPanelKind K, int T>
void KTile(const KTileArgs& a) {
  using Kd = KKind<K>;
  float acc[T][16] = {};
  const int64_t xs = a.xstride;
  for (int64_t s = 0; s < a.nsb; ++s) {
    for (int r = 0; r < 16; ++r) {
      const float dw = fp16_to_fp32(a.d[16 * s + r]);
      const float dmin = Kd::kMin ? fp16_to_fp32(a.dmin[16 * s + r]) : 0.f;
      for (int t = 0; t < T; ++t) {
        int32_t isum = 0, imin = 0;
        for (int j = 0; j < 8; ++j) {
          const int64_t b = 8 * s + j;
          const int8_t* xb = a.xq + 32 * (b * xs + t);
          int32_t dot[2] = {0, 0};
          for (int k = 0; k < 32; ++k) {
            const int g = k / 4, i = 4 * r + k % 4;
            const uint8_t byte = a.qs[2048 * s + 256 * j + (g % 4) * 64 + i];
            int u = g < 4 ? (byte & 0xF) : (byte >> 4);
            if constexpr (Kd::kQ5) u |= ((a.qh[512 * s + 64 * j + 8 * g + i / 8] >> (i % 8)) & 1) << 4;
            if constexpr (Kd::kQ6) {
              u |= ((a.qh[1024 * s + 128 * j + 8 * g + i / 8] >> (i % 8)) & 1) << 4;
              u |= ((a.qh[1024 * s + 128 * j + 64 + 8 * g + i / 8] >> (i % 8)) & 1) << 5;
              u -= 32;
            }
            dot[k / 16] += u * xb[k];
          }
          if constexpr (Kd::kQ6) {
            isum += dot[0] * static_cast<int8_t>(a.sc[256 * s + 32 * j + r]) +
                    dot[1] * static_cast<int8_t>(a.sc[256 * s + 32 * j + 16 + r]);
          } else {
            const int32_t pk = a.xs16[b * xs + t];
            isum += (dot[0] + dot[1]) * a.sc[128 * s + 16 * j + r];
            imin += a.mn[128 * s + 16 * j + r] * (static_cast<int16_t>(pk & 0xFFFF) + (pk >> 16));
          }
        }
        const float dx = a.xd[s * xs + t];
        if constexpr (Kd::kMin) acc[t][r] -= static_cast<float>(imin) * (dmin * dx);
        acc[t][r] += static_cast<float>(isum) * (dw * dx);
      }
    }
  }
  for (int t = 0; t < T; ++t) std::copy(acc[t], acc[t] + a.valid_rows, a.y + t * a.ldy);
}
#endif

template <KPanelKind K>
void KGemmKind(const KPanelGemmArgs& g) {
  const KPanelFormat& f = *g.fmt;
  const ActQ8K& x = *g.x;
  const int64_t nsb = g.cols / 256;
  const size_t pb = f.panel_bytes(nsb);
  for (int64_t p = g.p_begin; p < g.p_end; ++p) {
    const uint8_t* panel = g.panels + static_cast<size_t>(p) * pb;
    KTileArgs a{};
    a.qs = panel;
    a.qh = panel + f.qh_offset(nsb);
    a.sc = panel + f.sc_offset(nsb);
    a.mn = panel + f.mn_offset(nsb);
    a.d = reinterpret_cast<const uint16_t*>(panel + f.d_offset(nsb));
    a.dmin = reinterpret_cast<const uint16_t*>(panel + f.dmin_offset(nsb));
    a.nsb = nsb;
    a.ldy = g.ldy;
    a.valid_rows = static_cast<int>(std::min<int64_t>(16, g.rows - p * 16));
    for (int t0 = g.t_begin; t0 < g.t_end;) {
      const int group = t0 / kTokenGroup;
      const int n = std::min({kMaxTokens, g.t_end - t0, x.group_size(group) - t0 % kTokenGroup});
      const int64_t xi = x.index(t0, 0);
      a.xq = x.q + 32 * xi;
      a.xs16 = x.s16 + xi;
      a.xd = x.d + x.index_sb(t0, 0);
      a.xstride = x.group_size(group);
      a.y = g.y + t0 * g.ldy + p * 16;
      switch (n) {
        case 1: KTile<K, 1>(a); break;
        case 2: KTile<K, 2>(a); break;
        case 3: KTile<K, 3>(a); break;
        default: KTile<K, 4>(a); break;
      }
      t0 += n;
    }
  }
}

void KPanelGemm(const KPanelGemmArgs& g) {
  switch (g.fmt->kind) {
    case KPanelKind::q4_k: KGemmKind<KPanelKind::q4_k>(g); break;
    case KPanelKind::q5_k: KGemmKind<KPanelKind::q5_k>(g); break;
    case KPanelKind::q6_k: KGemmKind<KPanelKind::q6_k>(g); break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal::cpu {
HWY_EXPORT(KPanelGemm);

void kpanel_gemm(const KPanelGemmArgs& a) { HWY_DYNAMIC_DISPATCH(KPanelGemm)(a); }
}  // namespace llmsvc::hal::cpu
#endif
