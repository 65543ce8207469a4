// SPDX-License-Identifier: Apache-2.0
// Panel GEMM kernels: one register-blocked micro-kernel per instruction set, all computing
// ggml's float operations in ggml's order (see panel_kernels.h), so every target gives the
// same bits.
//
// A 512-bit vector holds one group g of 4 columns for the 16 rows of a panel, so one int8
// dot-product instruction yields the 16 rows' lane-g partial sums of one token. Each (row,
// token) keeps its 8 lane accumulators in 8 vectors (one per g) across the blocks.
//   AVX3_DL (AVX-512 VNNI): vpdpbusd, u8 weights x s8 activations.
//   AVX3 (AVX-512 BW) and AVX2: vpmaddubsw + vpmaddwd (Q8_0 via the sign trick).
//   Anything else (NEON, SSE4, ...): portable scalar code over the same layout.
#include "hal/cpu/quant/panel_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hal/host/fp16.h"

#include "hal/host/hwy_targets.h"  // before any Highway header
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

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

#define LLMSVC_UNROLL _Pragma("GCC unroll 16")

// NP consecutive panels (pb bytes apart) and T consecutive tokens of one token group: token
// t's quants for block b are at xq + 32 * (b * xstride + t), its scale at xd[b * xstride + t],
// its 8 group biases at xb + 8 * (b * xstride + t).
struct TileArgs {
  const uint8_t* qs;
  const uint64_t* qh;
  const uint16_t* d;
  const uint16_t* m;
  const uint8_t* wu;  // the first panel's quants as bytes (512 per block), or null
  size_t pb;
  int64_t nb;
  const int8_t* xq;
  const float* xd;
  const float* xs;
  const int32_t* xb;
  int64_t xstride;
  float* y;         // y for the first token, row 0 of the first panel
  int64_t ldy;
  int64_t rows_left;  // rows from the first panel's row 0 on that exist (only those are written)
};

template <class T>
inline const T* in_panel(const T* p, size_t pb, int panel) {
  return reinterpret_cast<const T*>(reinterpret_cast<const uint8_t*>(p) + pb * panel);
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kMaxTokens = 2;
constexpr int kDecodePanels = 2;
constexpr int kPrefetchBlocks = 4;

// Lane sums of one group for one token: bias + sum of 4 products, per row.
//   w: the group's weights (u8, 16 rows x 4); x4: the token's 4 activations, broadcast.
//   For Q8_0 without VNNI, w holds the signed weights (the sign trick keeps vpmaddubsw exact).
template <PanelKind K>
LLMSVC_KATTR inline __m512i group_dot(__m512i bias, __m512i w, __m512i x4) {
#if HWY_TARGET == HWY_AVX3_DL
  return _mm512_dpbusd_epi32(bias, w, x4);
#else
  const __m512i ones16 = _mm512_set1_epi16(1);
  if constexpr (Kind<K>::kQ8) {
    const __m512i sx = _mm512_mask_sub_epi8(x4, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x4);
    return _mm512_add_epi32(bias, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), sx), ones16));
  } else {
    // 16-bit pair sums stay below 2^15: 2 products of at most 5 x 8 bits.
    return _mm512_add_epi32(bias, _mm512_madd_epi16(_mm512_maddubs_epi16(w, x4), ones16));
  }
#endif
}

// ggml's horizontal sum of its 8 lane accumulators (hsum_float_8), one row per vector lane.
LLMSVC_KATTR inline __m512 hsum8(const __m512* a) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6])),
                       _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7])));
}

// One panel's quants widened to bytes, 8 vectors of 64 per block: what the kernel would
// otherwise unpack for every token.
template <PanelKind K>
LLMSVC_KATTR HWY_NOINLINE void Unpack(const TileArgs& a, uint8_t* out) {
  using Kd = Kind<K>;
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < a.nb; ++b) {
    const uint8_t* qs = a.qs + b * Kd::kQsBytes;
    uint8_t* ob = out + b * 512;
    LLMSVC_UNROLL
    for (int h = 0; h < 4; ++h) {
      const __m512i p = _mm512_load_si512(qs + 64 * h);
      __m512i w0 = _mm512_and_si512(p, lo4), w1 = _mm512_and_si512(_mm512_srli_epi16(p, 4), lo4);
      if constexpr (Kd::kQ5) {
        const __m512i bit4 = _mm512_set1_epi8(0x10);
        w0 = _mm512_mask_add_epi8(w0, _cvtu64_mask64(a.qh[b * 8 + h]), w0, bit4);
        w1 = _mm512_mask_add_epi8(w1, _cvtu64_mask64(a.qh[b * 8 + h + 4]), w1, bit4);
      }
      _mm512_store_si512(ob + 64 * h, w0);
      _mm512_store_si512(ob + 64 * (h + 4), w1);
    }
  }
}

template <PanelKind K, int NP, int T, bool kUnpacked = false>
LLMSVC_KATTR HWY_INLINE void Tile(const TileArgs& a) {
  using Kd = Kind<K>;
  __m512 acc[NP][T][8];
  __m512 mins[NP][T];
  LLMSVC_UNROLL
  for (int p = 0; p < NP; ++p) {
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) {
      mins[p][t] = _mm512_setzero_ps();
      LLMSVC_UNROLL
      for (int g = 0; g < 8; ++g) acc[p][t][g] = _mm512_setzero_ps();
    }
  }
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  const __m512i vbias = _mm512_set1_epi32(kGroupBias);
  const __m512 fbias = _mm512_set1_ps(kGroupBiasF);
  const int64_t xstride = a.xstride;

  for (int64_t b = 0; b < a.nb; ++b) {
    const int64_t xi = b * xstride;
    const int8_t* xq = a.xq + 32 * xi;
    const int32_t* xb = a.xb + 8 * xi;
    LLMSVC_UNROLL
    for (int p = 0; p < NP; ++p) {
      const uint8_t* qs = a.qs + a.pb * p + b * Kd::kQsBytes;
      if constexpr (!kUnpacked) {
        // Streaming weights (decode): ask for them a few blocks ahead.
        for (int l = 0; l < Kd::kQsBytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(qs + kPrefetchBlocks * Kd::kQsBytes + l), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(in_panel(a.d, a.pb, p) + (b + kPrefetchBlocks) * 16), _MM_HINT_T0);
        if constexpr (Kd::kMin) _mm_prefetch(reinterpret_cast<const char*>(in_panel(a.m, a.pb, p) + (b + kPrefetchBlocks) * 16), _MM_HINT_T0);
      }
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in_panel(a.d, a.pb, p) + b * 16)));
      __m512 dd[T];
      LLMSVC_UNROLL
      for (int t = 0; t < T; ++t) dd[t] = _mm512_mul_ps(dw, _mm512_set1_ps(a.xd[xi + t]));
      __m512i packed[4];
      if constexpr (!Kd::kQ8 && !kUnpacked) {
        LLMSVC_UNROLL
        for (int h = 0; h < 4; ++h) packed[h] = _mm512_load_si512(qs + 64 * h);
      }
      LLMSVC_UNROLL
      for (int g = 0; g < 8; ++g) {
        __m512i w;
        if constexpr (kUnpacked && !Kd::kQ8) {
          w = _mm512_load_si512(a.wu + b * 512 + 64 * g);
        } else if constexpr (Kd::kQ8) {
          w = _mm512_load_si512(qs + 64 * g);
#if HWY_TARGET == HWY_AVX3
          w = _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80)));  // signed weights
#endif
        } else {
          w = g < 4 ? _mm512_and_si512(packed[g], lo4) : _mm512_and_si512(_mm512_srli_epi16(packed[g - 4], 4), lo4);
          if constexpr (Kd::kQ5) {
            const uint64_t* qh = in_panel(a.qh, a.pb, p) + b * 8;
            w = _mm512_mask_add_epi8(w, _cvtu64_mask64(qh[g]), w, _mm512_set1_epi8(0x10));
          }
        }
        LLMSVC_UNROLL
        for (int t = 0; t < T; ++t) {
          // Q8_0 without VNNI computes signed products directly: no zero-point term. Else the
          // bias comes from memory even when it is the constant: a load, not a register copy.
          const __m512i x4 = _mm512_set1_epi32(load_i32(xq + 32 * t + 4 * g));
          // No zero point (or Q8_0 without VNNI: signed products): the constant bias; else the
          // group's bias, loaded.
          const bool plain = Kd::kMin || (Kd::kQ8 && HWY_TARGET == HWY_AVX3);
          const __m512i bias = plain ? vbias : _mm512_set1_epi32(xb[8 * t + g]);
          const __m512 f = _mm512_sub_ps(_mm512_castsi512_ps(group_dot<K>(bias, w, x4)), fbias);
          acc[p][t][g] = _mm512_fmadd_ps(dd[t], f, acc[p][t][g]);
        }
      }
      if constexpr (Kd::kMin) {
        const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in_panel(a.m, a.pb, p) + b * 16)));
        LLMSVC_UNROLL
        for (int t = 0; t < T; ++t) mins[p][t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a.xs[xi + t]), mins[p][t]);
      }
    }
  }
  LLMSVC_UNROLL
  for (int p = 0; p < NP; ++p) {
    const int64_t n = std::min<int64_t>(kPanelRows, a.rows_left - p * kPanelRows);
    const __mmask16 rows = static_cast<__mmask16>((1u << n) - 1);
    LLMSVC_UNROLL
    for (int t = 0; t < T; ++t) {
      __m512 s = hsum8(acc[p][t]);
      if constexpr (Kd::kMin) s = _mm512_add_ps(s, mins[p][t]);
      _mm512_mask_storeu_ps(a.y + t * a.ldy + p * kPanelRows, rows, s);
    }
  }
}

// Decode: NP panels, one token.
template <PanelKind K, int NP>
LLMSVC_KATTR HWY_NOINLINE void TileDecode(const TileArgs& a) {
  Tile<K, NP, 1>(a);
}

// n consecutive tokens of one token group, one panel, kMaxTokens at a time.
template <PanelKind K, bool kUnpacked>
LLMSVC_KATTR HWY_NOINLINE void TileTokens(TileArgs a, int n) {
  for (; n >= kMaxTokens; n -= kMaxTokens) {
    Tile<K, 1, kMaxTokens, kUnpacked>(a);
    a.xq += 32 * kMaxTokens;
    a.xd += kMaxTokens;
    a.xs += kMaxTokens;
    a.xb += 8 * kMaxTokens;
    a.y += kMaxTokens * a.ldy;
  }
  if (n > 0) Tile<K, 1, 1, kUnpacked>(a);
}

#elif HWY_TARGET == HWY_AVX2
constexpr int kMaxTokens = 1;
constexpr int kDecodePanels = 1;

// The 32 bytes of a Q5 high-bit mask (bit i -> byte i) as 0x10 / 0x00 bytes.
inline __m256i expand_bit4(uint32_t mask) {
  const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i sel = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(mask)), shuf);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, sel), sel), _mm256_set1_epi8(0x10));
}

// One half panel (8 rows: bytes 32*half .. 32*half+31 of each vector) for one token.
template <PanelKind K>
HWY_NOINLINE void HalfTile(const TileArgs& a, int half) {
  using Kd = Kind<K>;
  __m256 acc[8];
  for (int g = 0; g < 8; ++g) acc[g] = _mm256_setzero_ps();
  __m256 mins = _mm256_setzero_ps();
  const __m256i lo4 = _mm256_set1_epi8(0x0F);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256 fbias = _mm256_set1_ps(kGroupBiasF);
  for (int64_t b = 0; b < a.nb; ++b) {
    const int64_t xi = b * a.xstride;
    const int8_t* xq = a.xq + 32 * xi;
    const uint8_t* qs = a.qs + b * Kd::kQsBytes + 32 * half;
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.d + b * 16 + 8 * half)));
    const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(a.xd[xi]));
    for (int g = 0; g < 8; ++g) {
      const __m256i x4 = _mm256_set1_epi32(load_i32(xq + 4 * g));
      __m256i ai;
      if constexpr (Kd::kQ8) {
        const __m256i w = _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(qs + 64 * g)),
                                           _mm256_set1_epi8(static_cast<char>(0x80)));
        ai = _mm256_add_epi32(_mm256_set1_epi32(kGroupBias),
                              _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x4, w)), ones16));
      } else {
        const __m256i p = _mm256_load_si256(reinterpret_cast<const __m256i*>(qs + 64 * (g % 4)));
        __m256i w = g < 4 ? _mm256_and_si256(p, lo4) : _mm256_and_si256(_mm256_srli_epi16(p, 4), lo4);
        if constexpr (Kd::kQ5) w = _mm256_or_si256(w, expand_bit4(static_cast<uint32_t>(a.qh[b * 8 + g] >> (32 * half))));
        const __m256i bias = _mm256_set1_epi32(Kd::kMin ? kGroupBias : a.xb[8 * xi + g]);
        ai = _mm256_add_epi32(bias, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x4), ones16));
      }
      acc[g] = _mm256_fmadd_ps(dd, _mm256_sub_ps(_mm256_castsi256_ps(ai), fbias), acc[g]);
    }
    if constexpr (Kd::kMin) {
      const __m256 mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.m + b * 16 + 8 * half)));
      mins = _mm256_fmadd_ps(mw, _mm256_set1_ps(a.xs[xi]), mins);
    }
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                           _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
  if constexpr (Kd::kMin) s = _mm256_add_ps(s, mins);
  const int n = static_cast<int>(std::clamp<int64_t>(a.rows_left - 8 * half, 0, 8));
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, s);
  std::copy(tmp, tmp + n, a.y + 8 * half);
}

template <PanelKind K, int NP, int T, bool kUnpacked = false>
void Tile(const TileArgs& a) {
  static_assert(NP == 1 && T == 1, "AVX2: one panel, one token per call");
  HalfTile<K>(a, 0);
  if (a.rows_left > 8) HalfTile<K>(a, 1);
}
#define LLMSVC_ONE_TOKEN_TILES 1

#else
constexpr int kMaxTokens = 1;
constexpr int kDecodePanels = 1;

// Portable code over the panel layout, with ggml's operations in ggml's order.
template <PanelKind K, int NP, int T, bool kUnpacked = false>
void Tile(const TileArgs& a) {
  static_assert(NP == 1 && T == 1, "portable: one panel, one token per call");
  using Kd = Kind<K>;
  const int rows = static_cast<int>(std::min<int64_t>(kPanelRows, a.rows_left));
  for (int r = 0; r < rows; ++r) {
    float acc[8] = {}, mins = 0.f;
    for (int64_t b = 0; b < a.nb; ++b) {
      const uint8_t* qs = a.qs + b * Kd::kQsBytes;
      const int64_t xi = b * a.xstride;
      const int8_t* xq = a.xq + 32 * xi;
      const float dd = fp16_to_fp32(a.d[b * 16 + r]) * a.xd[xi];
      for (int g = 0; g < 8; ++g) {
        int32_t ai = Kd::kMin ? kGroupBias : a.xb[8 * xi + g];
        for (int k = 0; k < 4; ++k) {
          const int i = 4 * r + k;
          int u;
          if constexpr (Kd::kQ8) {
            u = qs[g * 64 + i];
          } else {
            u = g < 4 ? (qs[g * 64 + i] & 0x0F) : (qs[(g - 4) * 64 + i] >> 4);
            if constexpr (Kd::kQ5) u |= static_cast<int>((a.qh[b * 8 + g] >> i) & 1u) << 4;
          }
          ai += u * xq[4 * g + k];
        }
        float f;
        std::memcpy(&f, &ai, 4);
        acc[g] = std::fma(dd, f - kGroupBiasF, acc[g]);
      }
      if constexpr (Kd::kMin) mins = std::fma(fp16_to_fp32(a.m[b * 16 + r]), a.xs[xi], mins);
    }
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    if constexpr (Kd::kMin) s += mins;
    a.y[r] = s;
  }
}
#define LLMSVC_ONE_TOKEN_TILES 1
#endif

#if defined(LLMSVC_ONE_TOKEN_TILES)
#undef LLMSVC_ONE_TOKEN_TILES
template <PanelKind K, int NP>
void TileDecode(const TileArgs& a) {
  Tile<K, NP, 1>(a);
}
template <PanelKind K, bool kUnpacked>
void TileTokens(TileArgs a, int n) {
  for (; n > 0; --n) {
    Tile<K, 1, 1, kUnpacked>(a);
    a.xq += 32;
    a.xd += 1;
    a.xs += 1;
    a.xb += 8;
    a.y += a.ldy;
  }
}
#endif

template <PanelKind K>
void GemmKind(const PanelGemmArgs& g) {
  const PanelFormat& f = *g.fmt;
  const ActQ8& x = *g.x;
  // nb blocks are summed; the panels hold lnb (a column prefix: more), which place the planes
  // and space the panels. The tiles index each plane from its start, so they sum the prefix.
  const int64_t nb = g.cols / 32;
  const int64_t lnb = (g.layout_cols > 0 ? g.layout_cols : g.cols) / 32;
  TileArgs a{};
  a.pb = f.panel_bytes(lnb);
  a.nb = nb;
  a.ldy = g.ldy;
  auto at_panel = [&](int64_t p) {
    const uint8_t* panel = g.panels + static_cast<size_t>(p) * a.pb;
    a.qs = panel;
    a.qh = reinterpret_cast<const uint64_t*>(panel + f.qh_offset(lnb));
    a.d = reinterpret_cast<const uint16_t*>(panel + f.d_offset(lnb));
    a.m = reinterpret_cast<const uint16_t*>(panel + f.m_offset(lnb));
    a.rows_left = g.rows - p * kPanelRows;
  };
  if (x.n_tokens == 1) {
    // Decode: kDecodePanels panels per call, the weight streams side by side.
    a.xq = x.q;
    a.xd = x.d;
    a.xs = x.s;
    a.xb = x.bias;
    a.xstride = 1;
    for (int64_t p = g.p_begin; p < g.p_end;) {
      at_panel(p);
      a.y = g.y + p * kPanelRows;
      if (kDecodePanels > 1 && g.p_end - p >= 2) {
        TileDecode<K, kDecodePanels>(a);
        p += kDecodePanels;
      } else {
        TileDecode<K, 1>(a);
        p += 1;
      }
    }
    return;
  }
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  constexpr bool kUnpack = !Kind<K>::kQ8;  // Q8_0 quants are bytes already
#else
  constexpr bool kUnpack = false;
#endif
  // Panels go in chunks whose unpacked quants stay in L2; each token group, its activations in
  // L1, passes over every panel of the chunk.
  const int64_t chunk = panel_chunk(g.cols);
  for (int64_t p0 = g.p_begin; p0 < g.p_end; p0 += chunk) {
    const int64_t p1 = std::min(g.p_end, p0 + chunk);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    if constexpr (kUnpack) {
      for (int64_t p = p0; p < p1; ++p) {
        at_panel(p);
        Unpack<K>(a, g.unpacked + (p - p0) * nb * 512);
      }
    }
#endif
    for (int t0 = g.t_begin; t0 < g.t_end;) {
      const int group = t0 / kTokenGroup;
      const int t_end = std::min(g.t_end, group * kTokenGroup + x.group_size(group));
      for (int64_t p = p0; p < p1; ++p) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
        // While the first token group passes, the next chunk comes from memory (into L2):
        // the first nb blocks of each plane, what the kernel reads (a column prefix skips the
        // rest of the panel; without one, the ranges are the whole panel).
        if (t0 == g.t_begin && p + chunk < g.p_end) {
          const char* next = reinterpret_cast<const char*>(g.panels + static_cast<size_t>(p + chunk) * a.pb);
          auto fetch = [next](size_t begin, size_t bytes) {
            for (size_t off = begin & ~size_t{63}; off < begin + bytes; off += 64) _mm_prefetch(next + off, _MM_HINT_T1);
          };
          fetch(0, static_cast<size_t>(nb) * f.qs_bytes);
          if (f.qh_bytes) fetch(f.qh_offset(lnb), static_cast<size_t>(nb) * f.qh_bytes);
          fetch(f.d_offset(lnb), static_cast<size_t>(nb) * 32);
          if (f.has_min) fetch(f.m_offset(lnb), static_cast<size_t>(nb) * 32);
        }
#endif
        at_panel(p);
        a.wu = kUnpack ? g.unpacked + (p - p0) * nb * 512 : nullptr;
        const int64_t xi = x.index(t0, 0);
        a.xq = x.q + 32 * xi;
        a.xd = x.d + xi;
        a.xs = x.s + xi;
        a.xb = x.bias + 8 * xi;
        a.xstride = x.group_size(group);
        a.y = g.y + t0 * g.ldy + p * kPanelRows;
        TileTokens<K, kUnpack>(a, t_end - t0);
      }
      t0 = t_end;
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
