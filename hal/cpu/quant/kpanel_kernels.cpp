// SPDX-License-Identifier: Apache-2.0
// K-panel GEMM kernels (Q4_K / Q5_K / Q6_K with Q8_K activations), all in ggml's order (see
// KTile), so every target gives llama.cpp's bits.
//   AVX3_DL: per 32-column sub-block and lane, vpdpbusd gives 16 rows' 4-product sums; for
//            two sub-blocks at a time one vpdpwssd scales them into the lane; 8 float FMAs
//            per superblock. Several tokens: the panel is unpacked to bytes once per call.
//   Anything else: portable scalar code over the same layout.
#include "hal/cpu/quant/kpanel_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hal/host/fp16.h"

#include "hal/host/hwy_targets.h"  // before any Highway header
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

// One panel's planes and T consecutive tokens of one token group: token t's 32-block b is at
// xq + 32 * (b * xstride + t) (its half sums at xs16[b * xstride + t], its Q6_K zero-point
// terms at xz6 + 8 * (b * xstride + t)), its superblock s scale at xd[s * xstride + t].
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
  const int32_t* xz6;
  const float* xd;
  int64_t xstride;
  float* y;
  int64_t ldy;
  int valid_rows;
  const uint8_t* wu;  // the panel unpacked (KUnpack), or null
};

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ggml's order (ggml_vec_dot_q{4,5,6}_K_q8_K, AVX2, the build the goldens come from), per
// (row, token): 8 int32 lanes per superblock, lane g = sum over the sub-blocks of
// scale * (sum of the 4 products k = 4g..4g+3), exact; lane_g += d_w d_x * float(lane) by FMA
// across superblocks; then hsum_float_8. The mins (Q4_K, Q5_K) with dmin' = -(d_x dmin_w):
//   Q4_K: 4 float lanes i, m_i = fma(dmin', mn_2i bsum_2i + mn_2i+1 bsum_2i+1, m_i), folded
//         (m0 + m2) + (m1 + m3), added last;
//   Q5_K: one FMA chain over the integer sum of the 8 products, added last.
// (Q6_K's products are (u - 32) x: the integer term starts at the zero point's -32 sum(x).)
#if HWY_TARGET == HWY_AVX3_DL
constexpr int kMaxTokens = 2;
constexpr int64_t kPrefetchSb = 2;
constexpr int kUnpackTokens = 4;  // tokens per call from which panels are unpacked first

// ggml's hsum_float_8 over 8 lane vectors, one row per vector lane.
LLMSVC_KATTR inline __m512 hsum8(const __m512* a) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6])),
                       _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7])));
}

// The weights of sub-block j, lane g (0..7) for 16 rows as bytes (4 per row): nibble, plus
// the Q5_K / Q6_K high bits.
template <KPanelKind K>
LLMSVC_KATTR inline __m512i k_weights(const KTileArgs& a, int64_t s, int j, int g, __m512i packed, __m512i lo4) {
  using Kd = KKind<K>;
  __m512i w = g < 4 ? _mm512_and_si512(packed, lo4) : _mm512_and_si512(_mm512_srli_epi16(packed, 4), lo4);
  if constexpr (Kd::kQ5) {
    const uint64_t* m = reinterpret_cast<const uint64_t*>(a.qh + 512 * s + 64 * j);
    w = _mm512_mask_add_epi8(w, _cvtu64_mask64(m[g]), w, _mm512_set1_epi8(0x10));
  }
  if constexpr (Kd::kQ6) {
    const uint64_t* m = reinterpret_cast<const uint64_t*>(a.qh + 1024 * s + 128 * j);
    w = _mm512_mask_add_epi8(w, _cvtu64_mask64(m[g]), w, _mm512_set1_epi8(0x10));
    w = _mm512_mask_add_epi8(w, _cvtu64_mask64(m[8 + g]), w, _mm512_set1_epi8(0x20));
  }
  return w;
}

// The scales of sub-blocks j and j + 1 (Q6_K: of their 16-column halves h) as int16 pairs,
// (scale of j, scale of j + 1) in the 32-bit lane of each row.
template <KPanelKind K>
LLMSVC_KATTR inline __m512i k_scale_pairs(const KTileArgs& a, int64_t s, int j, int h) {
  if constexpr (KKind<K>::kQ6) {
    const uint8_t* p = a.sc + 256 * s + 16 * (2 * j + h);
    const __m128i s0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i s1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32));
    return _mm512_cvtepi8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(s0, s1), _mm_unpacklo_epi8(s0, s1)));
  } else {
    const uint8_t* p = a.sc + 128 * s + 16 * j;
    const __m128i s0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i s1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    return _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(s0, s1), _mm_unpacklo_epi8(s0, s1)));
  }
}

// One panel's weights as bytes, 8 lanes x 64 per sub-block (high bits merged), then its scale
// pairs, 64 bytes per sub-block pair (Q6_K: and half): what KTile would otherwise unpack for
// every token pair. kpanel_unpack_bytes(cols) bytes.
template <KPanelKind K>
LLMSVC_KATTR HWY_NOINLINE void KUnpack(const KTileArgs& a, uint8_t* out) {
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  uint8_t* su = out + a.nsb * 4096;
  for (int64_t s = 0; s < a.nsb; ++s) {
    for (int j = 0; j < 8; ++j) {
      const uint8_t* qs = a.qs + 2048 * s + 256 * j;
      LLMSVC_UNROLL
      for (int g = 0; g < 8; ++g) {
        const __m512i w = k_weights<K>(a, s, j, g, _mm512_load_si512(qs + 64 * (g % 4)), lo4);
        _mm512_store_si512(out + (8 * s + j) * 512 + 64 * g, w);
      }
    }
    for (int j = 0; j < 8; j += 2) {
      _mm512_store_si512(su + (8 * s + j) * 64, k_scale_pairs<K>(a, s, j, 0));
      if constexpr (KKind<K>::kQ6) _mm512_store_si512(su + (8 * s + j + 1) * 64, k_scale_pairs<K>(a, s, j, 1));
    }
  }
}

// Per pair of sub-blocks (j, j + 1) and lane g, two vpdpbusd give the 16 rows' 4-product sums
// (|sum| < 2^15), one masked vpshufb puts the second into the upper 16 bits of the first,
// and vpdpwssd adds scale_j * sum_j + scale_j+1 * sum_j+1 to the lane. kUnpacked: weights and
// scale pairs from KUnpack's copy (a.wu).
template <KPanelKind K, int T, bool kUnpacked = false>
LLMSVC_KATTR HWY_NOINLINE void KTile(const KTileArgs& a) {
  using Kd = KKind<K>;
  __m512 acc[T][8];
  LLMSVC_UNROLL
  for (int t = 0; t < T; ++t) {
    LLMSVC_UNROLL
    for (int g = 0; g < 8; ++g) acc[t][g] = _mm512_setzero_ps();
  }
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  // Bytes 2, 3 of each 32-bit lane <- bytes 0, 1 of the same lane.
  const __m512i to_hi16 = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 1, 0, 0, 4, 5, 0, 0, 8, 9, 0, 0, 12, 13));
  const __mmask64 hi16 = 0xCCCCCCCCCCCCCCCCull;
  const int64_t xs = a.xstride;
  for (int64_t s = 0; s < a.nsb; ++s) {
    __m512i isum[T][8];
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) {
      LLMSVC_UNROLL
      for (int g = 0; g < 8; ++g) isum[t][g] = _mm512_setzero_si512();
    }
    for (int j = 0; j < 8; j += 2) {
      if constexpr (T == 1) {
        // Decode streams the weight: ask for superblock s + kPrefetchSb meanwhile.
        const int64_t sp = s + kPrefetchSb;
        LLMSVC_UNROLL
        for (int l = 0; l < 8; ++l) _mm_prefetch(reinterpret_cast<const char*>(a.qs + 2048 * sp + 256 * j + 64 * l), _MM_HINT_T0);
        LLMSVC_UNROLL
        for (int l = 0; l < Kd::kQhBytes / 256; ++l) {
          _mm_prefetch(reinterpret_cast<const char*>(a.qh + Kd::kQhBytes * sp + Kd::kQhBytes / 8 * j + 64 * l), _MM_HINT_T0);
        }
        if (j < Kd::kScBytes / 32) _mm_prefetch(reinterpret_cast<const char*>(a.sc + Kd::kScBytes * sp + 32 * j), _MM_HINT_T0);
        if (Kd::kMin && j == 4) {
          _mm_prefetch(reinterpret_cast<const char*>(a.mn + 128 * sp), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(a.mn + 128 * sp + 64), _MM_HINT_T0);
        }
        if (j == 6) {
          _mm_prefetch(reinterpret_cast<const char*>(a.d + 16 * sp), _MM_HINT_T0);
          if constexpr (Kd::kMin) _mm_prefetch(reinterpret_cast<const char*>(a.dmin + 16 * sp), _MM_HINT_T0);
        }
      }
      __m512i sc_lo, sc_hi;
      if constexpr (kUnpacked) {
        const uint8_t* su = a.wu + a.nsb * 4096 + (8 * s + j) * 64;
        sc_lo = _mm512_load_si512(su);
        sc_hi = Kd::kQ6 ? _mm512_load_si512(su + 64) : sc_lo;
      } else {
        sc_lo = k_scale_pairs<K>(a, s, j, 0);
        sc_hi = Kd::kQ6 ? k_scale_pairs<K>(a, s, j, 1) : sc_lo;
      }
      const uint8_t* qs = a.qs + 2048 * s + 256 * j;
      LLMSVC_UNROLL
      for (int h = 0; h < 4; ++h) {
        __m512i p0 = lo4, p1 = lo4;  // the packed quants (unused when unpacked)
        if constexpr (!kUnpacked) p0 = _mm512_load_si512(qs + 64 * h), p1 = _mm512_load_si512(qs + 256 + 64 * h);
        LLMSVC_UNROLL
        for (int g = h; g < 8; g += 4) {
          __m512i w0, w1;
          if constexpr (kUnpacked) {
            w0 = _mm512_load_si512(a.wu + (8 * s + j) * 512 + 64 * g);
            w1 = _mm512_load_si512(a.wu + (8 * s + j + 1) * 512 + 64 * g);
          } else {
            w0 = k_weights<K>(a, s, j, g, p0, lo4);
            w1 = k_weights<K>(a, s, j + 1, g, p1, lo4);
          }
          LLMSVC_UNROLL
          for (int t = 0; t < T; ++t) {
            const int64_t o0 = (8 * s + j) * xs + t, o1 = o0 + xs;
            __m512i d0 = Kd::kQ6 ? _mm512_set1_epi32(a.xz6[8 * o0 + g]) : _mm512_setzero_si512();
            __m512i d1 = Kd::kQ6 ? _mm512_set1_epi32(a.xz6[8 * o1 + g]) : _mm512_setzero_si512();
            d0 = _mm512_dpbusd_epi32(d0, w0, _mm512_set1_epi32(load_i32(a.xq + 32 * o0 + 4 * g)));
            d1 = _mm512_dpbusd_epi32(d1, w1, _mm512_set1_epi32(load_i32(a.xq + 32 * o1 + 4 * g)));
            isum[t][g] = _mm512_dpwssd_epi32(isum[t][g], _mm512_mask_shuffle_epi8(d0, hi16, d1, to_hi16), g < 4 ? sc_lo : sc_hi);
          }
        }
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.d + 16 * s)));
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(a.xd[s * xs + t]));
      LLMSVC_UNROLL
      for (int g = 0; g < 8; ++g) acc[t][g] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(isum[t][g]), acc[t][g]);
    }
  }
  __m512 out[T];
  LLMSVC_UNROLL
  for (int t = 0; t < T; ++t) out[t] = hsum8(acc[t]);
  if constexpr (Kd::kMin) {
    constexpr int kM = Kd::kQ5 ? 1 : 4;
    __m512 m[T][kM];
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) {
      LLMSVC_UNROLL
      for (int i = 0; i < kM; ++i) m[t][i] = _mm512_setzero_ps();
    }
    for (int64_t s = 0; s < a.nsb; ++s) {
      const __m512 dminw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.dmin + 16 * s)));
      // mn in both int16 halves, against (lo, hi) half sums: mn * (sum of the 32-block).
      __m512i mnp[8];
      LLMSVC_UNROLL
      for (int j = 0; j < 8; ++j) {
        const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.mn + 128 * s + 16 * j)));
        mnp[j] = _mm512_or_si512(v, _mm512_slli_epi32(v, 16));
      }
      LLMSVC_UNROLL
      for (int t = 0; t < T; ++t) {
        const __m512 dmn = _mm512_mul_ps(dminw, _mm512_set1_ps(-a.xd[s * xs + t]));
        __m512i p[4];
        LLMSVC_UNROLL
        for (int i = 0; i < 4; ++i) {
          p[i] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mnp[2 * i], _mm512_set1_epi32(a.xs16[(8 * s + 2 * i) * xs + t]));
          p[i] = _mm512_dpwssd_epi32(p[i], mnp[2 * i + 1], _mm512_set1_epi32(a.xs16[(8 * s + 2 * i + 1) * xs + t]));
        }
        if constexpr (Kd::kQ5) {
          const __m512i sum = _mm512_add_epi32(_mm512_add_epi32(p[0], p[1]), _mm512_add_epi32(p[2], p[3]));
          m[t][0] = _mm512_fmadd_ps(dmn, _mm512_cvtepi32_ps(sum), m[t][0]);
        } else {
          LLMSVC_UNROLL
          for (int i = 0; i < kM; ++i) m[t][i] = _mm512_fmadd_ps(dmn, _mm512_cvtepi32_ps(p[i]), m[t][i]);
        }
      }
    }
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) {
      if constexpr (Kd::kQ5) {
        out[t] = _mm512_add_ps(out[t], m[t][0]);
      } else {
        out[t] = _mm512_add_ps(out[t], _mm512_add_ps(_mm512_add_ps(m[t][0], m[t][2]), _mm512_add_ps(m[t][1], m[t][3])));
      }
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << a.valid_rows) - 1);
  LLMSVC_UNROLL
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.y + t * a.ldy, rows, out[t]);
}

#else
constexpr int kMaxTokens = 1;

// Portable code over the K-panel layout, ggml's operations in ggml's order.
template <KPanelKind K, int T, bool kUnpacked = false>
void KTile(const KTileArgs& a) {
  using Kd = KKind<K>;
  const int64_t xs = a.xstride;
  for (int r = 0; r < a.valid_rows; ++r) {
    for (int t = 0; t < T; ++t) {
      float acc[8] = {}, m[4] = {};
      for (int64_t s = 0; s < a.nsb; ++s) {
        int32_t lane[8] = {};
        for (int j = 0; j < 8; ++j) {
          const int8_t* xb = a.xq + 32 * ((8 * s + j) * xs + t);
          for (int g = 0; g < 8; ++g) {
            int32_t dot = 0;
            for (int k = 4 * g; k < 4 * g + 4; ++k) {
              const int i = 4 * r + k % 4;
              const uint8_t byte = a.qs[2048 * s + 256 * j + (g % 4) * 64 + i];
              int u = g < 4 ? (byte & 0xF) : (byte >> 4);
              if constexpr (Kd::kQ5) u |= ((a.qh[512 * s + 64 * j + 8 * g + i / 8] >> (i % 8)) & 1) << 4;
              if constexpr (Kd::kQ6) {
                u |= ((a.qh[1024 * s + 128 * j + 8 * g + i / 8] >> (i % 8)) & 1) << 4;
                u |= ((a.qh[1024 * s + 128 * j + 64 + 8 * g + i / 8] >> (i % 8)) & 1) << 5;
                u -= 32;
              }
              dot += u * xb[k];
            }
            const int32_t sc = Kd::kQ6 ? static_cast<int8_t>(a.sc[256 * s + 32 * j + 16 * (g / 4) + r])
                                       : a.sc[128 * s + 16 * j + r];
            lane[g] += sc * dot;
          }
        }
        const float dx = a.xd[s * xs + t];
        const float dd = fp16_to_fp32(a.d[16 * s + r]) * dx;
        for (int g = 0; g < 8; ++g) acc[g] = std::fma(dd, static_cast<float>(lane[g]), acc[g]);
        if constexpr (Kd::kMin) {
          const float dmn = fp16_to_fp32(a.dmin[16 * s + r]) * -dx;
          int32_t p[4];
          for (int i = 0; i < 4; ++i) {
            p[i] = 0;
            for (int j = 2 * i; j < 2 * i + 2; ++j) {
              const int32_t pk = a.xs16[(8 * s + j) * xs + t];
              p[i] += a.mn[128 * s + 16 * j + r] * (static_cast<int16_t>(pk & 0xFFFF) + (pk >> 16));
            }
          }
          if constexpr (Kd::kQ5) {
            m[0] = std::fma(dmn, static_cast<float>(p[0] + p[1] + p[2] + p[3]), m[0]);
          } else {
            for (int i = 0; i < 4; ++i) m[i] = std::fma(dmn, static_cast<float>(p[i]), m[i]);
          }
        }
      }
      float out = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
      if constexpr (Kd::kQ5) out += m[0];
      if constexpr (Kd::kMin && !Kd::kQ5) out += (m[0] + m[2]) + (m[1] + m[3]);
      a.y[t * a.ldy + r] = out;
    }
  }
}
#endif

template <KPanelKind K>
void KGemmKind(const KPanelGemmArgs& g) {
  const KPanelFormat& f = *g.fmt;
  const ActQ8K& x = *g.x;
  // nsb superblocks are summed (and unpacked); the panels hold lnsb (a column prefix: more),
  // which place the planes and space the panels. KTile indexes each plane from its start.
  const int64_t nsb = g.cols / 256;
  const int64_t lnsb = (g.layout_cols > 0 ? g.layout_cols : g.cols) / 256;
  const size_t pb = f.panel_bytes(lnsb);
  for (int64_t p = g.p_begin; p < g.p_end; ++p) {
    const uint8_t* panel = g.panels + static_cast<size_t>(p) * pb;
    KTileArgs a{};
    a.qs = panel;
    a.qh = panel + f.qh_offset(lnsb);
    a.sc = panel + f.sc_offset(lnsb);
    a.mn = panel + f.mn_offset(lnsb);
    a.d = reinterpret_cast<const uint16_t*>(panel + f.d_offset(lnsb));
    a.dmin = reinterpret_cast<const uint16_t*>(panel + f.dmin_offset(lnsb));
    a.nsb = nsb;
    a.ldy = g.ldy;
    a.valid_rows = static_cast<int>(std::min<int64_t>(16, g.rows - p * 16));
#if HWY_TARGET == HWY_AVX3_DL
    // Enough tokens pass over the panel: unpack it once for all of them.
    const bool unpacked = g.unpacked != nullptr && g.t_end - g.t_begin >= kUnpackTokens;
    if (unpacked) {
      KUnpack<K>(a, g.unpacked);
      a.wu = g.unpacked;
    }
#else
    constexpr bool unpacked = false;
#endif
    for (int t0 = g.t_begin; t0 < g.t_end;) {
      const int group = t0 / kTokenGroup;
      const int n = std::min({kMaxTokens, g.t_end - t0, x.group_size(group) - t0 % kTokenGroup});
      const int64_t xi = x.index(t0, 0);
      a.xq = x.q + 32 * xi;
      a.xs16 = x.s16 + xi;
      a.xz6 = x.z6 + 8 * xi;
      a.xd = x.d + x.index_sb(t0, 0);
      a.xstride = x.group_size(group);
      a.y = g.y + t0 * g.ldy + p * 16;
      if (kMaxTokens >= 2 && n >= 2) {
        if (unpacked) {
          KTile<K, kMaxTokens, true>(a);
        } else {
          KTile<K, kMaxTokens>(a);
        }
      } else if (unpacked) {
        KTile<K, 1, true>(a);
      } else {
        KTile<K, 1>(a);
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
