// SPDX-License-Identifier: Apache-2.0
// K-panel repacking (GGUF K-quant superblocks <-> 16-row interleaved panels), once per weight.
#include "hal/cpu/quant/kpanel.h"

#include <cstring>

#include "hal/weight_blocks.h"
#include "hal/host/fp16.h"

namespace llmsvc::hal::cpu {
namespace {

constexpr KPanelFormat kQ4K{KPanelKind::q4_k, 0, 128, true};
constexpr KPanelFormat kQ5K{KPanelKind::q5_k, 512, 128, true};
constexpr KPanelFormat kQ6K{KPanelKind::q6_k, 1024, 256, false};

// One superblock in plain form: unsigned quants and unpacked integer scales.
struct Super {
  uint8_t u[kQK_K];  // Q4_K 0..15, Q5_K 0..31, Q6_K 0..63
  uint8_t sc[8], mn[8];  // Q4_K / Q5_K, per 32
  int8_t sc16[16];       // Q6_K, per 16
  uint16_t d, dmin;
};

Super read_super(WeightType t, const uint8_t* p) {
  Super s{};
  if (t == WeightType::Q6_K) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(p);
    for (int n = 0; n < 2; ++n) {
      const uint8_t* ql = b->ql + 64 * n;
      const uint8_t* qh = b->qh + 32 * n;
      uint8_t* u = s.u + 128 * n;
      for (int l = 0; l < 32; ++l) {
        u[l] = static_cast<uint8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
        u[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
        u[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
        u[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
      }
    }
    std::memcpy(s.sc16, b->scales, 16);
    s.d = b->d;
    return s;
  }
  // Q4_K / Q5_K: 64-element chunks c hold sub-blocks 2c (low nibbles) and 2c + 1 (high).
  const uint8_t* qs;
  const uint8_t* scales;
  const uint8_t* qh = nullptr;
  if (t == WeightType::Q4_K) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(p);
    qs = b->qs;
    scales = b->scales;
    s.d = b->d;
    s.dmin = b->dmin;
  } else {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(p);
    qs = b->qs;
    scales = b->scales;
    qh = b->qh;
    s.d = b->d;
    s.dmin = b->dmin;
  }
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      s.u[64 * c + l] = qs[32 * c + l] & 0xF;
      s.u[64 * c + 32 + l] = static_cast<uint8_t>(qs[32 * c + l] >> 4);
      if (qh) {
        s.u[64 * c + l] = static_cast<uint8_t>(s.u[64 * c + l] | (((qh[l] >> (2 * c)) & 1) << 4));
        s.u[64 * c + 32 + l] = static_cast<uint8_t>(s.u[64 * c + 32 + l] | (((qh[l] >> (2 * c + 1)) & 1) << 4));
      }
    }
  }
  for (int j = 0; j < 8; ++j) k_scale_min(j, scales, &s.sc[j], &s.mn[j]);
  return s;
}

void set_bit(uint8_t* mask64, int i) { mask64[i / 8] = static_cast<uint8_t>(mask64[i / 8] | (1u << (i % 8))); }
int get_bit(const uint8_t* mask64, int i) { return (mask64[i / 8] >> (i % 8)) & 1; }

}  // namespace

const KPanelFormat* kpanel_format(WeightType t) {
  switch (t) {
    case WeightType::Q4_K: return &kQ4K;
    case WeightType::Q5_K: return &kQ5K;
    case WeightType::Q6_K: return &kQ6K;
    default: return nullptr;
  }
}

void pack_kpanels(const KPanelFormat& f, WeightType t, const void* src, size_t row_bytes, int64_t rows, int64_t cols,
                  uint8_t* dst, int64_t p_begin, int64_t p_end) {
  const int64_t nsb = cols / kQK_K;
  const size_t pb = f.panel_bytes(nsb), bsz = block_bytes(t);
  for (int64_t p = p_begin; p < p_end; ++p) {
    uint8_t* panel = dst + static_cast<size_t>(p) * pb;
    std::memset(panel, 0, pb);  // padding rows stay zero: d = dmin = 0
    for (int r = 0; r < 16; ++r) {
      const int64_t row = p * 16 + r;
      if (row >= rows) break;
      const uint8_t* srow = static_cast<const uint8_t*>(src) + static_cast<size_t>(row) * row_bytes;
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const Super s = read_super(t, srow + static_cast<size_t>(sb) * bsz);
        uint8_t* qs = panel + static_cast<size_t>(sb) * 2048;
        uint8_t* qh = panel + f.qh_offset(nsb) + static_cast<size_t>(sb) * f.qh_bytes;
        for (int e = 0; e < kQK_K; ++e) {
          const int j = e / 32, k = e % 32, g = k / 4, i = 4 * r + k % 4;
          uint8_t& byte = qs[j * 256 + (g % 4) * 64 + i];
          byte = static_cast<uint8_t>(byte | ((s.u[e] & 0xF) << (g < 4 ? 0 : 4)));
          if (f.kind == KPanelKind::q5_k && (s.u[e] & 0x10)) set_bit(qh + j * 64 + g * 8, i);
          if (f.kind == KPanelKind::q6_k) {
            if (s.u[e] & 0x10) set_bit(qh + j * 128 + g * 8, i);
            if (s.u[e] & 0x20) set_bit(qh + j * 128 + 64 + g * 8, i);
          }
        }
        uint8_t* sc = panel + f.sc_offset(nsb) + static_cast<size_t>(sb) * f.sc_bytes;
        if (f.kind == KPanelKind::q6_k) {
          for (int m = 0; m < 16; ++m) sc[m * 16 + r] = static_cast<uint8_t>(s.sc16[m]);
        } else {
          uint8_t* mn = panel + f.mn_offset(nsb) + static_cast<size_t>(sb) * 128;
          for (int j = 0; j < 8; ++j) {
            sc[j * 16 + r] = s.sc[j];
            mn[j * 16 + r] = s.mn[j];
          }
          std::memcpy(panel + f.dmin_offset(nsb) + static_cast<size_t>(sb) * 32 + 2 * r, &s.dmin, 2);
        }
        std::memcpy(panel + f.d_offset(nsb) + static_cast<size_t>(sb) * 32 + 2 * r, &s.d, 2);
      }
    }
  }
}

void unpack_kpanel_row(const KPanelFormat& f, const uint8_t* panels, int64_t cols, int64_t r, float* out,
                       int64_t layout_cols) {
  const int64_t nsb = cols / kQK_K, lnsb = (layout_cols > 0 ? layout_cols : cols) / kQK_K;
  const uint8_t* panel = panels + static_cast<size_t>(r / 16) * f.panel_bytes(lnsb);
  const int lane = static_cast<int>(r % 16);
  for (int64_t sb = 0; sb < nsb; ++sb, out += kQK_K) {
    const uint8_t* qs = panel + static_cast<size_t>(sb) * 2048;
    const uint8_t* qh = panel + f.qh_offset(lnsb) + static_cast<size_t>(sb) * f.qh_bytes;
    const uint8_t* sc = panel + f.sc_offset(lnsb) + static_cast<size_t>(sb) * f.sc_bytes;
    const uint8_t* mn = panel + f.mn_offset(lnsb) + static_cast<size_t>(sb) * 128;
    uint16_t dh, dminh = 0;
    std::memcpy(&dh, panel + f.d_offset(lnsb) + static_cast<size_t>(sb) * 32 + 2 * lane, 2);
    if (f.has_min) std::memcpy(&dminh, panel + f.dmin_offset(lnsb) + static_cast<size_t>(sb) * 32 + 2 * lane, 2);
    const float d = fp16_to_fp32(dh), dmin = fp16_to_fp32(dminh);
    for (int e = 0; e < kQK_K; ++e) {
      const int j = e / 32, k = e % 32, g = k / 4, i = 4 * lane + k % 4;
      const uint8_t byte = qs[j * 256 + (g % 4) * 64 + i];
      int u = g < 4 ? (byte & 0xF) : (byte >> 4);
      if (f.kind == KPanelKind::q5_k) u |= get_bit(qh + j * 64 + g * 8, i) << 4;
      if (f.kind == KPanelKind::q6_k) {
        u |= get_bit(qh + j * 128 + g * 8, i) << 4;
        u |= get_bit(qh + j * 128 + 64 + g * 8, i) << 5;
        // As dequantize_row: d * scale * q, left to right.
        out[e] = d * static_cast<float>(static_cast<int8_t>(sc[(e / 16) * 16 + lane])) * static_cast<float>(u - 32);
      } else {
        const float d1 = d * static_cast<float>(sc[j * 16 + lane]), m1 = dmin * static_cast<float>(mn[j * 16 + lane]);
        out[e] = d1 * static_cast<float>(u) - m1;
      }
    }
  }
}

}  // namespace llmsvc::hal::cpu
