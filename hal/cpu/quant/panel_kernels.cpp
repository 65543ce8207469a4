// Panel GEMM kernels: one register-blocked micro-kernel per instruction set.
//
// Each call of a micro-kernel computes one panel (16 rows) for up to kMaxTokens tokens: the
// block's weights are unpacked once into registers and reused for every token, each token
// costing 8 int8 dot-product instructions per block plus the scale FMAs.
//   AVX3_DL (AVX-512 VNNI): vpdpbusd, u8 weights x s8 activations, 16 rows per vector.
//   AVX3 (AVX-512 BW) and AVX2: vpmaddubsw + vpmaddwd (Q8_0 via the sign trick).
//   Anything else (NEON, SSE4, ...): portable scalar code over the same layout.
#include "hal/cpu/quant/panel_kernels.h"

#include <algorithm>
#include <cstring>

#include "hal/cpu/quant/fp16.h"

#include "hal/cpu/quant/hwy_targets.h"  // before any Highway header
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "hal/cpu/quant/panel_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace llmsvc::hal::cpu {
namespace HWY_NAMESPACE {

// Highway 1.0.3's AVX3_DL target string names "avxvnni" but not "avx512vnni"; add it.
#undef LLMSVC_KATTR
#undef LLMSVC_HAVE_ONE_TOKEN_TILE
#if HWY_TARGET == HWY_AVX3_DL
#define LLMSVC_KATTR __attribute__((target(HWY_TARGET_STR ",avx512vnni")))
#else
#define LLMSVC_KATTR
#endif

template <PanelKind K>
struct Kind {
  static constexpr bool kQ8 = K == PanelKind::q8_0;
  static constexpr bool kQ5 = K == PanelKind::q5_0 || K == PanelKind::q5_1;
  static constexpr bool kMin = K == PanelKind::q4_1 || K == PanelKind::q5_1;
  static constexpr int kQsBytes = kQ8 ? 512 : 256;
};

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

#define LLMSVC_UNROLL _Pragma("GCC unroll 16")

// One panel's planes and the activations of T consecutive tokens of one token group: token
// t's quants for block b are at xq + b * 32 * xstride + 32 * t, its scale at xd + b * xstride + t.
struct TileArgs {
  const uint8_t* qs;
  const uint64_t* qh;
  const uint16_t* d;
  const uint16_t* m;
  int64_t nb;
  const int8_t* xq;
  const float* xd;
  const float* xs;
  const int32_t* xc;
  int64_t xstride;  // tokens in the group
  float* y;         // y for the first token, row 0 of the panel
  int64_t ldy;
  int valid_rows;   // rows of this panel to write (16 except for the last panel)
};

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kMaxTokens = 8;

template <PanelKind K, int T>
LLMSVC_KATTR HWY_NOINLINE void Tile(const TileArgs& a) {
  using Kd = Kind<K>;
  __m512 acc[T];
  LLMSVC_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  const int8_t* xq = a.xq;
  const float* xd = a.xd;
  const float* xs = a.xs;
  const int32_t* xc = a.xc;
  const uint8_t* qs = a.qs;
  const int64_t xstride = a.xstride;

  for (int64_t b = 0; b < a.nb; ++b, qs += Kd::kQsBytes, xq += 32 * xstride, xd += xstride, xs += xstride, xc += xstride) {
    __m512i v[8];
    if constexpr (Kd::kQ8) {
      LLMSVC_UNROLL
      for (int g = 0; g < 8; ++g) v[g] = _mm512_load_si512(qs + 64 * g);
    } else {
      LLMSVC_UNROLL
      for (int h = 0; h < 4; ++h) {
        const __m512i p = _mm512_load_si512(qs + 64 * h);
        v[h] = _mm512_and_si512(p, lo4);
        v[h + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), lo4);
      }
      if constexpr (Kd::kQ5) {
        const __m512i bit4 = _mm512_set1_epi8(0x10);
        LLMSVC_UNROLL
        for (int g = 0; g < 8; ++g) v[g] = _mm512_mask_add_epi8(v[g], _cvtu64_mask64(a.qh[b * 8 + g]), v[g], bit4);
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.d + b * 16)));
    __m512 mw = _mm512_setzero_ps();
    if constexpr (Kd::kMin) mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.m + b * 16)));

#if HWY_TARGET == HWY_AVX3
    // No VNNI: pre-sign Q8 weights for vpmaddubsw (|w| unsigned, sign moved onto x).
    __m512i wabs[Kd::kQ8 ? 8 : 1];
    if constexpr (Kd::kQ8) {
      for (int g = 0; g < 8; ++g) {
        v[g] = _mm512_xor_si512(v[g], _mm512_set1_epi8(static_cast<char>(0x80)));
        wabs[g] = _mm512_abs_epi8(v[g]);
      }
    }
    const __m512i ones16 = _mm512_set1_epi16(1);
#endif

#if HWY_TARGET == HWY_AVX3_DL
    // g outer, tokens inner: T independent dpbusd chains in flight instead of one 8-deep chain.
    // A single token splits its chain in two for the same reason.
    constexpr int kChains = T == 1 ? 2 : 1;
    __m512i ai[T * kChains];
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) {
      ai[t * kChains] = Kd::kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(xc[t]);
      if constexpr (kChains == 2) ai[1] = _mm512_setzero_si512();
    }
    LLMSVC_UNROLL
    for (int g = 0; g < 8; ++g) {
      LLMSVC_UNROLL
      for (int t = 0; t < T; ++t) {
        __m512i& acc_i = ai[t * kChains + (kChains == 2 ? g % 2 : 0)];
        acc_i = _mm512_dpbusd_epi32(acc_i, v[g], _mm512_set1_epi32(load_i32(xq + 32 * t + 4 * g)));
      }
    }
    if constexpr (kChains == 2) ai[0] = _mm512_add_epi32(ai[0], ai[1]);
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[t * kChains]), _mm512_mul_ps(dw, _mm512_set1_ps(xd[t])), acc[t]);
      if constexpr (Kd::kMin) acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xs[t]), acc[t]);
    }
#else
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) {
      const int8_t* xb = xq + 32 * t;
      __m512i ai;
      if constexpr (Kd::kQ8) {
        ai = _mm512_setzero_si512();
        for (int g = 0; g < 8; ++g) {
          const __m512i bx = _mm512_set1_epi32(load_i32(xb + 4 * g));
          const __m512i sx = _mm512_mask_sub_epi8(bx, _mm512_movepi8_mask(v[g]), _mm512_setzero_si512(), bx);
          ai = _mm512_add_epi32(ai, _mm512_madd_epi16(_mm512_maddubs_epi16(wabs[g], sx), ones16));
        }
      } else {
        // 16-bit partial sums stay below 2^15: 8 products of 4 bits or 4 of 5 bits per lane pair.
        constexpr int kGroup = Kd::kQ5 ? 4 : 8;
        ai = Kd::kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(xc[t]);
        for (int g0 = 0; g0 < 8; g0 += kGroup) {
          __m512i s16 = _mm512_setzero_si512();
          for (int g = g0; g < g0 + kGroup; ++g) {
            s16 = _mm512_add_epi16(s16, _mm512_maddubs_epi16(v[g], _mm512_set1_epi32(load_i32(xb + 4 * g))));
          }
          ai = _mm512_add_epi32(ai, _mm512_madd_epi16(s16, ones16));
        }
      }
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), _mm512_mul_ps(dw, _mm512_set1_ps(xd[t])), acc[t]);
      if constexpr (Kd::kMin) acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xs[t]), acc[t]);
    }
#endif
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << a.valid_rows) - 1);
  LLMSVC_UNROLL
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.y + t * a.ldy, rows, acc[t]);
}

#if HWY_TARGET == HWY_AVX3_DL
// Decode (one token): NP consecutive panels at once, sharing the activation broadcasts and
// giving the memory system NP independent weight streams. pb: bytes per panel.
template <PanelKind K, int NP>
LLMSVC_KATTR HWY_NOINLINE void TileOneToken(const TileArgs& a, size_t pb, int64_t rows_left) {
  using Kd = Kind<K>;
  __m512 acc[NP];
  LLMSVC_UNROLL
  for (int p = 0; p < NP; ++p) acc[p] = _mm512_setzero_ps();
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  const int8_t* xq = a.xq;
  for (int64_t b = 0; b < a.nb; ++b, xq += 32) {
    __m512i xb[8];
    LLMSVC_UNROLL
    for (int g = 0; g < 8; ++g) xb[g] = _mm512_set1_epi32(load_i32(xq + 4 * g));
    const __m512 dx = _mm512_set1_ps(a.xd[b]);
    LLMSVC_UNROLL
    for (int p = 0; p < NP; ++p) {
      const uint8_t* qs = a.qs + p * pb + b * Kd::kQsBytes;
      __m512i v[8];
      if constexpr (Kd::kQ8) {
        LLMSVC_UNROLL
        for (int g = 0; g < 8; ++g) v[g] = _mm512_load_si512(qs + 64 * g);
      } else {
        LLMSVC_UNROLL
        for (int h = 0; h < 4; ++h) {
          const __m512i w = _mm512_load_si512(qs + 64 * h);
          v[h] = _mm512_and_si512(w, lo4);
          v[h + 4] = _mm512_and_si512(_mm512_srli_epi16(w, 4), lo4);
        }
        if constexpr (Kd::kQ5) {
          const uint64_t* qh = reinterpret_cast<const uint64_t*>(reinterpret_cast<const uint8_t*>(a.qh) + p * pb) + b * 8;
          LLMSVC_UNROLL
          for (int g = 0; g < 8; ++g) v[g] = _mm512_mask_add_epi8(v[g], _cvtu64_mask64(qh[g]), v[g], _mm512_set1_epi8(0x10));
        }
      }
      __m512i ai0 = Kd::kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(a.xc[b]);
      __m512i ai1 = _mm512_setzero_si512();
      LLMSVC_UNROLL
      for (int g = 0; g < 8; g += 2) {
        ai0 = _mm512_dpbusd_epi32(ai0, v[g], xb[g]);
        ai1 = _mm512_dpbusd_epi32(ai1, v[g + 1], xb[g + 1]);
      }
      const uint16_t* d = reinterpret_cast<const uint16_t*>(reinterpret_cast<const uint8_t*>(a.d) + p * pb) + b * 16;
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d)));
      acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(ai0, ai1)), _mm512_mul_ps(dw, dx), acc[p]);
      if constexpr (Kd::kMin) {
        const uint16_t* m = reinterpret_cast<const uint16_t*>(reinterpret_cast<const uint8_t*>(a.m) + p * pb) + b * 16;
        const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(m)));
        acc[p] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a.xs[b]), acc[p]);
      }
    }
  }
  LLMSVC_UNROLL
  for (int p = 0; p < NP; ++p) {
    const int64_t n = std::min<int64_t>(kPanelRows, rows_left - p * kPanelRows);
    _mm512_mask_storeu_ps(a.y + p * kPanelRows, static_cast<__mmask16>((1u << n) - 1), acc[p]);
  }
}
#define LLMSVC_HAVE_ONE_TOKEN_TILE 1
#endif

#elif HWY_TARGET == HWY_AVX2
constexpr int kMaxTokens = 4;

// The 32 bytes of a Q5 high-bit mask (bit i -> byte i) as 0x10 / 0x00 bytes.
inline __m256i expand_bit4(uint32_t mask) {
  const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i sel = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(mask)), shuf);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, sel), sel), _mm256_set1_epi8(0x10));
}

// One half panel (8 rows: bytes 32*half .. 32*half+31 of each vector) for T tokens.
template <PanelKind K, int T>
HWY_NOINLINE void HalfTile(const TileArgs& a, int half) {
  using Kd = Kind<K>;
  __m256 acc[T];
  LLMSVC_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i lo4 = _mm256_set1_epi8(0x0F);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const int64_t xstride = a.xstride;
  for (int64_t b = 0; b < a.nb; ++b) {
    __m256i v[8];
    const uint8_t* qs = a.qs + b * Kd::kQsBytes + 32 * half;
    if constexpr (Kd::kQ8) {
      for (int g = 0; g < 8; ++g) {
        v[g] = _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(qs + 64 * g)),
                                _mm256_set1_epi8(static_cast<char>(0x80)));
      }
    } else {
      for (int h = 0; h < 4; ++h) {
        const __m256i p = _mm256_load_si256(reinterpret_cast<const __m256i*>(qs + 64 * h));
        v[h] = _mm256_and_si256(p, lo4);
        v[h + 4] = _mm256_and_si256(_mm256_srli_epi16(p, 4), lo4);
      }
      if constexpr (Kd::kQ5) {
        for (int g = 0; g < 8; ++g) {
          v[g] = _mm256_or_si256(v[g], expand_bit4(static_cast<uint32_t>(a.qh[b * 8 + g] >> (32 * half))));
        }
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.d + b * 16 + 8 * half)));
    __m256 mw = _mm256_setzero_ps();
    if constexpr (Kd::kMin) mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.m + b * 16 + 8 * half)));
    const int8_t* xq = a.xq + b * 32 * xstride;
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) {
      const int8_t* xb = xq + 32 * t;
      const int64_t xi = b * xstride + t;
      __m256i ai;
      if constexpr (Kd::kQ8) {
        ai = _mm256_setzero_si256();
        for (int g = 0; g < 8; ++g) {
          const __m256i bx = _mm256_set1_epi32(load_i32(xb + 4 * g));
          ai = _mm256_add_epi32(ai, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(v[g]), _mm256_sign_epi8(bx, v[g])), ones16));
        }
      } else {
        constexpr int kGroup = Kd::kQ5 ? 4 : 8;
        ai = Kd::kMin ? _mm256_setzero_si256() : _mm256_set1_epi32(a.xc[xi]);
        for (int g0 = 0; g0 < 8; g0 += kGroup) {
          __m256i s16 = _mm256_setzero_si256();
          for (int g = g0; g < g0 + kGroup; ++g) {
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[g], _mm256_set1_epi32(load_i32(xb + 4 * g))));
          }
          ai = _mm256_add_epi32(ai, _mm256_madd_epi16(s16, ones16));
        }
      }
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ai), _mm256_mul_ps(dw, _mm256_set1_ps(a.xd[xi])), acc[t]);
      if constexpr (Kd::kMin) acc[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(a.xs[xi]), acc[t]);
    }
  }
  const int n = std::clamp(a.valid_rows - 8 * half, 0, 8);
  for (int t = 0; t < T; ++t) {
    float* dst = a.y + t * a.ldy + 8 * half;
    if (n == 8) {
      _mm256_storeu_ps(dst, acc[t]);
    } else {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, acc[t]);
      std::copy(tmp, tmp + n, dst);
    }
  }
}

template <PanelKind K, int T>
void Tile(const TileArgs& a) {
  HalfTile<K, T>(a, 0);
  if (a.valid_rows > 8) HalfTile<K, T>(a, 1);
}

#else
constexpr int kMaxTokens = 4;

// Portable reference over the panel layout (also what tests compare the SIMD paths with).
template <PanelKind K, int T>
void Tile(const TileArgs& a) {
  using Kd = Kind<K>;
  float acc[T][kPanelRows] = {};
  for (int64_t b = 0; b < a.nb; ++b) {
    const uint8_t* qs = a.qs + b * Kd::kQsBytes;
    for (int r = 0; r < kPanelRows; ++r) {
      uint8_t u[32];
      for (int k = 0; k < 32; ++k) {
        const int g = k / 4, i = 4 * r + k % 4;
        if constexpr (Kd::kQ8) {
          u[k] = qs[g * 64 + i];
        } else {
          u[k] = static_cast<uint8_t>(g < 4 ? (qs[g * 64 + i] & 0x0F) : (qs[(g - 4) * 64 + i] >> 4));
          if constexpr (Kd::kQ5) u[k] = static_cast<uint8_t>(u[k] | (((a.qh[b * 8 + g] >> i) & 1u) << 4));
        }
      }
      const float dw = fp16_to_fp32(a.d[b * 16 + r]);
      const float mw = Kd::kMin ? fp16_to_fp32(a.m[b * 16 + r]) : 0.f;
      for (int t = 0; t < T; ++t) {
        const int64_t xi = b * a.xstride + t;
        const int8_t* xb = a.xq + 32 * xi;
        int32_t ai = Kd::kMin ? 0 : a.xc[xi];
        for (int k = 0; k < 32; ++k) ai += static_cast<int32_t>(u[k]) * xb[k];
        acc[t][r] += static_cast<float>(ai) * (dw * a.xd[xi]);
        if constexpr (Kd::kMin) acc[t][r] += mw * a.xs[xi];
      }
    }
  }
  for (int t = 0; t < T; ++t) std::copy(acc[t], acc[t] + a.valid_rows, a.y + t * a.ldy);
}
#endif

template <PanelKind K>
void GemmKind(const PanelGemmArgs& g) {
  const PanelFormat& f = *g.fmt;
  const ActQ8& x = *g.x;
  const int64_t nb = g.cols / 32;
  const size_t pb = f.panel_bytes(nb);
#if defined(LLMSVC_HAVE_ONE_TOKEN_TILE)
  if (x.n_tokens == 1) {
    constexpr int kPanels = 4;
    for (int64_t p = g.p_begin; p < g.p_end;) {
      const uint8_t* panel = g.panels + static_cast<size_t>(p) * pb;
      TileArgs a{};
      a.qs = panel;
      a.qh = reinterpret_cast<const uint64_t*>(panel + f.qh_offset(nb));
      a.d = reinterpret_cast<const uint16_t*>(panel + f.d_offset(nb));
      a.m = reinterpret_cast<const uint16_t*>(panel + f.m_offset(nb));
      a.nb = nb;
      a.xq = x.q;
      a.xd = x.d;
      a.xs = x.s;
      a.xc = x.corr;
      a.xstride = 1;
      a.y = g.y + p * kPanelRows;
      const int64_t rows_left = g.rows - p * kPanelRows;
      const int64_t n = std::min<int64_t>(kPanels, g.p_end - p);
      switch (n) {
        case 4: TileOneToken<K, 4>(a, pb, rows_left); break;
        case 3: TileOneToken<K, 3>(a, pb, rows_left); break;
        case 2: TileOneToken<K, 2>(a, pb, rows_left); break;
        default: TileOneToken<K, 1>(a, pb, rows_left); break;
      }
      p += n;
    }
    return;
  }
#endif
  for (int64_t p = g.p_begin; p < g.p_end; ++p) {
    const uint8_t* panel = g.panels + static_cast<size_t>(p) * pb;
    TileArgs a{};
    a.qs = panel;
    a.qh = reinterpret_cast<const uint64_t*>(panel + f.qh_offset(nb));
    a.d = reinterpret_cast<const uint16_t*>(panel + f.d_offset(nb));
    a.m = reinterpret_cast<const uint16_t*>(panel + f.m_offset(nb));
    a.nb = nb;
    a.ldy = g.ldy;
    a.valid_rows = static_cast<int>(std::min<int64_t>(kPanelRows, g.rows - p * kPanelRows));
    for (int t0 = g.t_begin; t0 < g.t_end;) {
      // Tokens t0 .. t0+n-1 lie in one token group.
      const int group = t0 / kTokenGroup;
      const int in_group = t0 % kTokenGroup;
      const int n = std::min({kMaxTokens, g.t_end - t0, x.group_size(group) - in_group});
      const int64_t xi = x.index(t0, 0);
      a.xq = x.q + 32 * xi;
      a.xd = x.d + xi;
      a.xs = x.s + xi;
      a.xc = x.corr + xi;
      a.xstride = x.group_size(group);
      a.y = g.y + t0 * g.ldy + p * kPanelRows;
      switch (n) {
        case 1: Tile<K, 1>(a); break;
        case 2: Tile<K, 2>(a); break;
        case 3: Tile<K, 3>(a); break;
        case 4: Tile<K, 4>(a); break;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
        case 5: Tile<K, 5>(a); break;
        case 6: Tile<K, 6>(a); break;
        case 7: Tile<K, 7>(a); break;
        case 8: Tile<K, 8>(a); break;
#endif
        default: break;
      }
      t0 += n;
    }
  }
}

void PanelGemm(const PanelGemmArgs& g) {
  switch (g.fmt->kind) {
    case PanelKind::q4_0: GemmKind<PanelKind::q4_0>(g); break;
    case PanelKind::q4_1: GemmKind<PanelKind::q4_1>(g); break;
    case PanelKind::q5_0: GemmKind<PanelKind::q5_0>(g); break;
    case PanelKind::q5_1: GemmKind<PanelKind::q5_1>(g); break;
    case PanelKind::q8_0: GemmKind<PanelKind::q8_0>(g); break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace llmsvc::hal::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace llmsvc::hal::cpu {
HWY_EXPORT(PanelGemm);

void panel_gemm(const PanelGemmArgs& a) { HWY_DYNAMIC_DISPATCH(PanelGemm)(a); }
}  // namespace llmsvc::hal::cpu
#endif
