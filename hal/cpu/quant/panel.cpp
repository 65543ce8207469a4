// SPDX-License-Identifier: Apache-2.0
// Panel repacking (GGUF blocks <-> 16-row interleaved panels); runs once per weight at load.
#include "hal/cpu/quant/panel.h"

#include <cstring>

#include "hal/weight_blocks.h"
#include "hal/host/fp16.h"

namespace llmsvc::hal::cpu {
namespace {

constexpr PanelFormat kQ4_0{PanelKind::q4_0, 256, 0, false, 8};
constexpr PanelFormat kQ4_1{PanelKind::q4_1, 256, 0, true, 0};
constexpr PanelFormat kQ5_0{PanelKind::q5_0, 256, 64, false, 16};
constexpr PanelFormat kQ5_1{PanelKind::q5_1, 256, 64, true, 0};
constexpr PanelFormat kQ8_0{PanelKind::q8_0, 512, 0, false, 128};

// The 32 stored unsigned quants and the scales of one GGUF block.
struct Unpacked {
  uint8_t u[kQK];
  uint16_t d, m;
};

void nibbles(const uint8_t* qs, uint8_t* u) {
  for (int j = 0; j < kQK / 2; ++j) {
    u[j] = qs[j] & 0x0F;
    u[j + kQK / 2] = qs[j] >> 4;
  }
}

void high_bits(const uint8_t* qh, uint8_t* u) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  for (int j = 0; j < kQK; ++j) u[j] |= static_cast<uint8_t>(((h >> j) & 1u) << 4);
}

Unpacked read_block(WeightType t, const uint8_t* p) {
  Unpacked b{};
  switch (t) {
    case WeightType::Q4_0: {
      const auto* x = reinterpret_cast<const BlockQ4_0*>(p);
      nibbles(x->qs, b.u);
      b.d = x->d;
      break;
    }
    case WeightType::Q4_1: {
      const auto* x = reinterpret_cast<const BlockQ4_1*>(p);
      nibbles(x->qs, b.u);
      b.d = x->d;
      b.m = x->m;
      break;
    }
    case WeightType::Q5_0: {
      const auto* x = reinterpret_cast<const BlockQ5_0*>(p);
      nibbles(x->qs, b.u);
      high_bits(x->qh, b.u);
      b.d = x->d;
      break;
    }
    case WeightType::Q5_1: {
      const auto* x = reinterpret_cast<const BlockQ5_1*>(p);
      nibbles(x->qs, b.u);
      high_bits(x->qh, b.u);
      b.d = x->d;
      b.m = x->m;
      break;
    }
    case WeightType::Q8_0: {
      const auto* x = reinterpret_cast<const BlockQ8_0*>(p);
      for (int j = 0; j < kQK; ++j) b.u[j] = static_cast<uint8_t>(x->qs[j] + 128);
      b.d = x->d;
      break;
    }
    default:
      break;
  }
  return b;
}

}  // namespace

const PanelFormat* panel_format(WeightType t) {
  switch (t) {
    case WeightType::Q4_0: return &kQ4_0;
    case WeightType::Q4_1: return &kQ4_1;
    case WeightType::Q5_0: return &kQ5_0;
    case WeightType::Q5_1: return &kQ5_1;
    case WeightType::Q8_0: return &kQ8_0;
    default: return nullptr;
  }
}

void pack_panels(const PanelFormat& f, WeightType t, const void* src, size_t row_bytes, int64_t rows, int64_t cols,
                 uint8_t* dst, int64_t p_begin, int64_t p_end) {
  const int64_t nb = cols / kQK;
  const size_t pb = f.panel_bytes(nb), bsz = block_bytes(t);
  for (int64_t p = p_begin; p < p_end; ++p) {
    uint8_t* panel = dst + static_cast<size_t>(p) * pb;
    std::memset(panel, 0, pb);  // padding rows stay zero: d = m = 0
    for (int r = 0; r < kPanelRows; ++r) {
      const int64_t row = p * kPanelRows + r;
      if (row >= rows) break;
      const uint8_t* srow = static_cast<const uint8_t*>(src) + static_cast<size_t>(row) * row_bytes;
      for (int64_t b = 0; b < nb; ++b) {
        const Unpacked blk = read_block(t, srow + static_cast<size_t>(b) * bsz);
        uint8_t* qs = panel + static_cast<size_t>(b) * f.qs_bytes;
        for (int k = 0; k < kQK; ++k) {
          const int g = k / 4, i = 4 * r + k % 4;
          if (f.qs_bytes == 512) {
            qs[g * 64 + i] = blk.u[k];
          } else if (g < 4) {
            qs[g * 64 + i] |= blk.u[k] & 0x0F;
          } else {
            qs[(g - 4) * 64 + i] |= static_cast<uint8_t>((blk.u[k] & 0x0F) << 4);
          }
          if (f.qh_bytes && (blk.u[k] & 0x10)) {
            uint8_t* qh = panel + f.qh_offset(nb) + static_cast<size_t>(b) * 64 + g * 8;
            qh[i / 8] |= static_cast<uint8_t>(1u << (i % 8));  // little-endian u64 bit i
          }
        }
        std::memcpy(panel + f.d_offset(nb) + static_cast<size_t>(b) * 32 + r * 2, &blk.d, 2);
        if (f.has_min) std::memcpy(panel + f.m_offset(nb) + static_cast<size_t>(b) * 32 + r * 2, &blk.m, 2);
      }
    }
  }
}

void unpack_panel_row(const PanelFormat& f, const uint8_t* panels, int64_t cols, int64_t r, float* out,
                      int64_t layout_cols) {
  const int64_t nb = cols / kQK, lnb = (layout_cols > 0 ? layout_cols : cols) / kQK;
  const uint8_t* panel = panels + static_cast<size_t>(r / kPanelRows) * f.panel_bytes(lnb);
  const int lane = static_cast<int>(r % kPanelRows);
  for (int64_t b = 0; b < nb; ++b, out += kQK) {
    const uint8_t* qs = panel + static_cast<size_t>(b) * f.qs_bytes;
    uint16_t dh, mh = 0;
    std::memcpy(&dh, panel + f.d_offset(lnb) + static_cast<size_t>(b) * 32 + lane * 2, 2);
    if (f.has_min) std::memcpy(&mh, panel + f.m_offset(lnb) + static_cast<size_t>(b) * 32 + lane * 2, 2);
    const float d = fp16_to_fp32(dh), m = fp16_to_fp32(mh);
    for (int k = 0; k < kQK; ++k) {
      const int g = k / 4, i = 4 * lane + k % 4;
      int u;
      if (f.qs_bytes == 512) {
        u = qs[g * 64 + i];
      } else {
        u = g < 4 ? (qs[g * 64 + i] & 0x0F) : (qs[(g - 4) * 64 + i] >> 4);
      }
      if (f.qh_bytes) {
        const uint8_t* qh = panel + f.qh_offset(lnb) + static_cast<size_t>(b) * 64 + g * 8;
        u |= ((qh[i / 8] >> (i % 8)) & 1) << 4;
      }
      // Same float operations as dequantize_row, so both give identical values.
      out[k] = f.has_min ? static_cast<float>(u) * d + m : static_cast<float>(u - f.zero_point) * d;
    }
  }
}

}  // namespace llmsvc::hal::cpu
