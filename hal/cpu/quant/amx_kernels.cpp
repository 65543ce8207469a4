// AMX int8 panel GEMM (x86-64 only; elsewhere amx_available() is false), in ggml's order.
//
// ggml keeps, per (row, token), 8 lane sums per block: lane g the integer sum of the 4 products
// of columns 4g .. 4g+3, scaled and FMA-accumulated in f32 (see panel_kernels.h). The tile unit
// computes these lane sums for 2 rows x 8 lanes x 16 tokens per TDPBUSD: A holds one block of
// the 2 rows with row (r, g) keeping only its group's 4 bytes (the others zero), B the block's
// activations of 16 tokens (ActQ8's tile layout), C[(r, g)][t] the lane sums (started at the
// zero-point correction). AVX-512 then converts them (exact) and does ggml's FMAs, one vector
// per (r, g) with the 16 tokens in its lanes, so each block costs one multiply per row for the
// scales. A panel's A tiles are built once per call and serve every token group.
#include "hal/cpu/quant/amx_kernels.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define LLMSVC_HAVE_AMX_CODE 1
#endif

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 flags the deliberately undefined vectors inside its own AVX-512 intrinsics
// (_mm512_undefined_*) when they are used under a target attribute: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace llmsvc::hal::cpu {
namespace {
std::atomic<bool> g_disabled{false};
}  // namespace

#if defined(LLMSVC_HAVE_AMX_CODE)
namespace {

#define LLMSVC_AMX_ATTR \
  __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,f16c,fma,bmi2")))
#define LLMSVC_UNROLL _Pragma("GCC unroll 16")
// GCC's tile load intrinsics are asm without a memory clobber: order our stores before them.
#define LLMSVC_COMPILER_BARRIER() asm volatile("" ::: "memory")

constexpr int kArchReqXcompPerm = 0x1023;  // arch_prctl: ask for an XSAVE feature's state
constexpr int kXfeatureXtiledata = 18;
constexpr int kPairs = kPanelRows / 2;     // A tiles (2 rows each) per panel and block
constexpr size_t kATileBytes = 512;        // 16 rows x 32 bytes

bool detect_amx() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx = (d & (1u << 24)) && (d & (1u << 25));        // AMX-TILE, AMX-INT8
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 17)) && (b & (1u << 31));  // F, BW, DQ, VL
  const bool vnni = c & (1u << 11);
  if (!amx || !avx512 || !vnni) return false;
  if (std::getenv("LLMSVC_NO_AMX") != nullptr) return false;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

struct alignas(64) TileConfig {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// tmm0: A (16 rows (r, g) x 32 bytes), tmm1: B (8 quads x 16 tokens x 4 bytes), tmm2-7: C
// (16 rows (r, g) x 16 tokens, int32) of kDepth consecutive blocks, so that a block's lane sums
// are stored kDepth - 1 blocks after they were started: the tile unit's latency stays hidden.
constexpr int kDepth = 6;
LLMSVC_AMX_ATTR void load_config() {
  TileConfig cfg{};
  cfg.palette = 1;
  cfg.rows[0] = 16;
  cfg.colsb[0] = 32;
  cfg.rows[1] = 8;
  cfg.colsb[1] = 64;
  for (int i = 2; i < 2 + kDepth; ++i) {
    cfg.rows[i] = 16;
    cfg.colsb[i] = 64;
  }
  _tile_loadconfig(&cfg);
}

template <PanelKind K>
struct Kind {
  static constexpr bool kQ8 = K == PanelKind::q8_0;
  static constexpr bool kQ5 = K == PanelKind::q5_0 || K == PanelKind::q5_1;
  static constexpr bool kMin = K == PanelKind::q4_1 || K == PanelKind::q5_1;
  static constexpr int kQsBytes = kQ8 ? 512 : 256;
};

// A tiles of one panel: block b, pair p at out + (b * kPairs + p) * 512. Row i of pair p is
// (r = 2p + i / 8, g = i % 8): dword g = row r's bytes 4g .. 4g+3, the other 7 dwords zero.
template <PanelKind K>
LLMSVC_AMX_ATTR void expand_panel(const uint8_t* qs, const uint64_t* qh, int64_t nb, uint8_t* out) {
  using Kd = Kind<K>;
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b, qs += Kd::kQsBytes) {
    __m512i v[8];  // v[g]: dword r = row r's group g
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
        LLMSVC_UNROLL
        for (int g = 0; g < 8; ++g) v[g] = _mm512_mask_add_epi8(v[g], _cvtu64_mask64(qh[b * 8 + g]), v[g], _mm512_set1_epi8(0x10));
      }
    }
    for (int p = 0; p < kPairs; ++p) {
      uint8_t* tile = out + (b * kPairs + p) * kATileBytes;
      // Vector k holds rows 2k and 2k + 1: (r, g0 = 2k % 8) in lanes 0-7, (r, g0 + 1) in lanes 8-15.
      LLMSVC_UNROLL
      for (int k = 0; k < 8; ++k) {
        const int r = 2 * p + (2 * k) / 8, g0 = (2 * k) % 8;
        const __m512i idx = _mm512_set1_epi32(r);
        __m512i z = _mm512_maskz_permutexvar_epi32(static_cast<__mmask16>(1u << g0), idx, v[g0]);
        z = _mm512_mask_permutexvar_epi32(z, static_cast<__mmask16>(1u << (8 + g0 + 1)), idx, v[g0 + 1]);
        _mm512_store_si512(tile + 64 * k, z);
      }
    }
  }
}

// Block lane sums into tile 2 + slot (the tile intrinsics take register numbers as literals),
// and from there to memory.
template <bool kZeroPoint>
LLMSVC_AMX_ATTR inline void compute(int slot, const uint8_t* a_tile, const int8_t* b_tile, const int32_t* zc) {
  _tile_loadd(0, a_tile, 32);
  _tile_loadd(1, b_tile, 64);
#define LLMSVC_AMX_CASE(C)                    \
  case C - 2:                                 \
    if constexpr (kZeroPoint) {               \
      _tile_loadd(C, zc, 64);                 \
    } else {                                  \
      _tile_zero(C);                          \
    }                                         \
    _tile_dpbusd(C, 0, 1);                    \
    break;
  switch (slot) {
    LLMSVC_AMX_CASE(2)
    LLMSVC_AMX_CASE(3)
    LLMSVC_AMX_CASE(4)
    LLMSVC_AMX_CASE(5)
    LLMSVC_AMX_CASE(6)
    LLMSVC_AMX_CASE(7)
    default: break;
  }
#undef LLMSVC_AMX_CASE
}

LLMSVC_AMX_ATTR inline void store(int slot, int32_t* c) {
  switch (slot) {
    case 0: _tile_stored(2, c, 64); break;
    case 1: _tile_stored(3, c, 64); break;
    case 2: _tile_stored(4, c, 64); break;
    case 3: _tile_stored(5, c, 64); break;
    case 4: _tile_stored(6, c, 64); break;
    case 5: _tile_stored(7, c, 64); break;
    default: break;
  }
}

// acc[i] (row 2p + i / 8, lane i % 8) += d_w d_x * lane sum, for the 16 tokens in the lanes;
// mins[h] += m_w s_x (types with a min).
template <PanelKind K>
LLMSVC_AMX_ATTR inline void scale_block(__m512* acc, __m512* mins, const int32_t* c, const uint16_t* d,
                                        const uint16_t* m, const float* xd, const float* xs) {
  const __m512 vxd = _mm512_load_ps(xd);
  LLMSVC_UNROLL
  for (int h = 0; h < 2; ++h) {
    const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(d[h])), vxd);
    LLMSVC_UNROLL
    for (int g = 0; g < 8; ++g) {
      const int i = 8 * h + g;
      acc[i] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * i)), acc[i]);
    }
    if constexpr (Kind<K>::kMin) mins[h] = _mm512_fmadd_ps(_mm512_set1_ps(_cvtsh_ss(m[h])), _mm512_load_ps(xs), mins[h]);
  }
}

// One panel (16 rows) x one full token group: y[t][r] for the group's 16 tokens. at: the
// panel's A tiles; qv / zc / xd / xs: the group's block 0 in ActQ8's planes.
template <PanelKind K>
LLMSVC_AMX_ATTR void tile_group(const uint8_t* at, const uint16_t* d, const uint16_t* m, int64_t nb, const int8_t* qv,
                                const int32_t* zc, const float* xd, const float* xs, int32_t* cbuf, float* y,
                                int64_t ldy, int valid_rows) {
  using Kd = Kind<K>;
  constexpr bool kZp = !Kd::kMin;
  alignas(64) float out[kPanelRows][kTokenGroup];
  for (int p = 0; p < kPairs; ++p) {
    __m512 acc[16], mins[2];
    LLMSVC_UNROLL
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    mins[0] = mins[1] = _mm512_setzero_ps();
    const uint8_t* ap = at + p * kATileBytes;
    for (int64_t b = 0; b < nb + kDepth - 1; ++b) {
      if (b < nb) compute<kZp>(static_cast<int>(b % kDepth), ap + b * kPairs * kATileBytes, qv + b * 512, zc + b * 256);
      const int64_t j = b - (kDepth - 1);
      if (j < 0) continue;
      int32_t* c = cbuf + 256 * (j % 2);
      store(static_cast<int>(j % kDepth), c);
      scale_block<K>(acc, mins, c, d + 16 * j + 2 * p, m + 16 * j + 2 * p, xd + 16 * j, xs + 16 * j);
    }
    // hsum_float_8 over the lanes of each row, then the mins.
    LLMSVC_UNROLL
    for (int h = 0; h < 2; ++h) {
      const __m512* a = acc + 8 * h;
      __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6])),
                               _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7])));
      if constexpr (Kd::kMin) s = _mm512_add_ps(s, mins[h]);
      _mm512_store_ps(out[2 * p + h], s);
    }
  }
  for (int t = 0; t < kTokenGroup; ++t)
    for (int r = 0; r < valid_rows; ++r) y[t * ldy + r] = out[r][t];
}

template <PanelKind K>
LLMSVC_AMX_ATTR void gemm(const PanelGemmArgs& g, uint8_t* scratch) {
  const PanelFormat& f = *g.fmt;
  const ActQ8& x = *g.x;
  const int64_t nb = g.cols / 32;
  const size_t pb = f.panel_bytes(nb);
  int32_t* cbuf = reinterpret_cast<int32_t*>(scratch);  // 2 blocks x 16 x 16 int32
  uint8_t* at = scratch + 2048;                         // the panel's A tiles
  load_config();
  for (int64_t p = g.p_begin; p < g.p_end; ++p) {
    const uint8_t* panel = g.panels + static_cast<size_t>(p) * pb;
    expand_panel<K>(panel, reinterpret_cast<const uint64_t*>(panel + f.qh_offset(nb)), nb, at);
    LLMSVC_COMPILER_BARRIER();
    const auto* d = reinterpret_cast<const uint16_t*>(panel + f.d_offset(nb));
    const auto* m = reinterpret_cast<const uint16_t*>(panel + f.m_offset(nb));
    for (int t0 = g.t_begin; t0 < g.t_end; t0 += kTokenGroup) {
      const int64_t grp = t0 / kTokenGroup, xi = x.index(t0, 0);  // a full group: block b of token t at xi + 16 b + t
      tile_group<K>(at, d, m, nb, x.qv + grp * nb * 512, x.zc + grp * nb * 256, x.d + xi, x.s + xi, cbuf,
                    g.y + static_cast<int64_t>(t0) * g.ldy + p * kPanelRows, g.ldy,
                    static_cast<int>(std::min<int64_t>(kPanelRows, g.rows - p * kPanelRows)));
    }
  }
  _tile_release();
}

}  // namespace

bool amx_available() {
  static const bool ok = detect_amx();
  return ok;
}

void amx_panel_gemm(const PanelGemmArgs& g, uint8_t* scratch) {
  switch (g.fmt->kind) {
    case PanelKind::q4_0: gemm<PanelKind::q4_0>(g, scratch); break;
    case PanelKind::q4_1: gemm<PanelKind::q4_1>(g, scratch); break;
    case PanelKind::q5_0: gemm<PanelKind::q5_0>(g, scratch); break;
    case PanelKind::q5_1: gemm<PanelKind::q5_1>(g, scratch); break;
    case PanelKind::q8_0: gemm<PanelKind::q8_0>(g, scratch); break;
  }
}

#else  // no AMX code for this architecture / compiler

bool amx_available() { return false; }
void amx_panel_gemm(const PanelGemmArgs&, uint8_t*) {}

#endif

bool amx_enabled() { return !g_disabled.load(std::memory_order_relaxed) && amx_available(); }

void set_amx_enabled(bool enabled) { g_disabled.store(!enabled, std::memory_order_relaxed); }

size_t amx_scratch_bytes(int64_t cols) {
#if defined(LLMSVC_HAVE_AMX_CODE)
  return 2048 + static_cast<size_t>(cols / 32) * kPairs * kATileBytes;
#else
  (void)cols;
  return 0;
#endif
}

}  // namespace llmsvc::hal::cpu
