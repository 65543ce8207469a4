// AMX int8 panel GEMM (x86-64 only; elsewhere amx_available() is false).
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

// tmm0/1: C (16 tokens x 16 rows int32), tmm2/3: A (16 tokens x 32 int8), tmm4/5: B (8 x 64 u8).
LLMSVC_AMX_ATTR void load_config() {
  TileConfig cfg{};
  cfg.palette = 1;
  for (int i = 0; i < 2; ++i) {
    cfg.rows[i] = 16;
    cfg.colsb[i] = 64;
    cfg.rows[2 + i] = 16;
    cfg.colsb[2 + i] = 32;
    cfg.rows[4 + i] = 8;
    cfg.colsb[4 + i] = 64;
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

// Expands one panel's 4/5-bit quants to the 8 x 64-byte B tile of every block.
template <PanelKind K>
LLMSVC_AMX_ATTR void unpack_panel(const uint8_t* qs, const uint64_t* qh, int64_t nb, uint8_t* out) {
  using Kd = Kind<K>;
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b, qs += Kd::kQsBytes, out += 512) {
    __m512i v[8];
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
    LLMSVC_UNROLL
    for (int g = 0; g < 8; ++g) _mm512_store_si512(out + 64 * g, v[g]);
  }
}

// acc[t] += block b's int32 results (c: 16 tokens x 16 rows) times the block scales.
template <PanelKind K>
LLMSVC_AMX_ATTR inline void scale_block(__m512* acc, const int32_t* c, const uint16_t* d, const uint16_t* m,
                                        const float* xd, const float* xs, const int32_t* xc) {
  using Kd = Kind<K>;
  const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d)));
  __m512 mw = _mm512_setzero_ps();
  if constexpr (Kd::kMin) mw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(m)));
  LLMSVC_UNROLL
  for (int t = 0; t < kTokenGroup; ++t) {
    __m512i ci = _mm512_load_si512(c + 16 * t);
    if constexpr (!Kd::kMin) ci = _mm512_add_epi32(ci, _mm512_set1_epi32(xc[t]));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ci), _mm512_mul_ps(dw, _mm512_set1_ps(xd[t])), acc[t]);
    if constexpr (Kd::kMin) acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xs[t]), acc[t]);
  }
}

// Starts blocks b (and b + 1 when < nb) on the tile unit; their int32 results land in
// c[0..255] (and c[256..511]) once the tile stores complete.
LLMSVC_AMX_ATTR inline void issue_pair(int64_t b, int64_t nb, const int8_t* xq, const uint8_t* bt, int32_t* c) {
  _tile_zero(0);
  _tile_loadd(2, xq + 512 * b, 32);
  _tile_loadd(4, bt + 512 * b, 64);
  _tile_dpbsud(0, 2, 4);
  if (b + 1 < nb) {
    _tile_zero(1);
    _tile_loadd(3, xq + 512 * (b + 1), 32);
    _tile_loadd(5, bt + 512 * (b + 1), 64);
    _tile_dpbsud(1, 3, 5);
    _tile_stored(1, c + 256, 64);
  }
  _tile_stored(0, c, 64);
}

// One panel (16 rows) x one full token group. The tile unit runs a pair of blocks ahead of
// the AVX-512 scaling (double-buffered through cbuf), so both units work at once.
template <PanelKind K>
LLMSVC_AMX_ATTR void tile_group(const uint8_t* bt, const uint16_t* d, const uint16_t* m, int64_t nb, const int8_t* xq,
                                const float* xd, const float* xs, const int32_t* xc, int32_t* cbuf, float* y,
                                int64_t ldy, int valid_rows) {
  __m512 acc[kTokenGroup];
  LLMSVC_UNROLL
  for (int t = 0; t < kTokenGroup; ++t) acc[t] = _mm512_setzero_ps();
  int slot = 0;
  issue_pair(0, nb, xq, bt, cbuf);
  for (int64_t b = 0; b < nb; b += 2, slot ^= 1) {
    if (b + 2 < nb) issue_pair(b + 2, nb, xq, bt, cbuf + 512 * (slot ^ 1));
    const int32_t* c = cbuf + 512 * slot;
    scale_block<K>(acc, c, d + 16 * b, m + 16 * b, xd + 16 * b, xs + 16 * b, xc + 16 * b);
    if (b + 1 < nb) {
      scale_block<K>(acc, c + 256, d + 16 * (b + 1), m + 16 * (b + 1), xd + 16 * (b + 1), xs + 16 * (b + 1),
                     xc + 16 * (b + 1));
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << valid_rows) - 1);
  LLMSVC_UNROLL
  for (int t = 0; t < kTokenGroup; ++t) _mm512_mask_storeu_ps(y + t * ldy, rows, acc[t]);
}

// Panels per chunk: a chunk's (unpacked) weights stay in L2 while every token group passes
// over them, and each group's activations stay in L1 across the chunk's panels.
int64_t chunk_panels(int64_t nb) { return std::max<int64_t>(1, (256 << 10) / (nb * 512)); }

template <PanelKind K>
LLMSVC_AMX_ATTR void gemm(const PanelGemmArgs& g, uint8_t* scratch) {
  using Kd = Kind<K>;
  const PanelFormat& f = *g.fmt;
  const ActQ8& x = *g.x;
  const int64_t nb = g.cols / 32;
  const size_t pb = f.panel_bytes(nb);
  const int64_t chunk = chunk_panels(nb);
  int32_t* cbuf = reinterpret_cast<int32_t*>(scratch);  // 2 slots x 2 blocks x 16 x 16 int32
  uint8_t* bbuf = scratch + 4096;                       // chunk x nb x 512 unpacked quants
  load_config();
  for (int64_t p0 = g.p_begin; p0 < g.p_end; p0 += chunk) {
    const int64_t p1 = std::min(g.p_end, p0 + chunk);
    if constexpr (!Kd::kQ8) {
      for (int64_t p = p0; p < p1; ++p) {
        const uint8_t* panel = g.panels + static_cast<size_t>(p) * pb;
        unpack_panel<K>(panel, reinterpret_cast<const uint64_t*>(panel + f.qh_offset(nb)), nb,
                        bbuf + static_cast<size_t>(p - p0) * nb * 512);
      }
      LLMSVC_COMPILER_BARRIER();
    }
    for (int t0 = g.t_begin; t0 < g.t_end; t0 += kTokenGroup) {
      const int64_t xi = x.index(t0, 0);  // a full group: block b of token t at xi + 16 b + t
      for (int64_t p = p0; p < p1; ++p) {
        const uint8_t* panel = g.panels + static_cast<size_t>(p) * pb;
        // Q8_0 quants are already in B-tile form.
        const uint8_t* bt = Kd::kQ8 ? panel : bbuf + static_cast<size_t>(p - p0) * nb * 512;
        tile_group<K>(bt, reinterpret_cast<const uint16_t*>(panel + f.d_offset(nb)),
                      reinterpret_cast<const uint16_t*>(panel + f.m_offset(nb)), nb, x.q + 32 * xi, x.d + xi,
                      x.s + xi, x.bias + xi, cbuf, g.y + static_cast<int64_t>(t0) * g.ldy + p * kPanelRows, g.ldy,
                      static_cast<int>(std::min<int64_t>(kPanelRows, g.rows - p * kPanelRows)));
      }
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
  const int64_t nb = cols / 32;
  return 4096 + static_cast<size_t>(chunk_panels(nb) * nb) * 512;
#else
  (void)cols;
  return 0;
#endif
}

}  // namespace llmsvc::hal::cpu
