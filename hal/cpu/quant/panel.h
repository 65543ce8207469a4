// SPDX-License-Identifier: Apache-2.0
// Panel layout: the CPU kernels' repacked form of the 32-element block types (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0), the same size as the GGUF bytes.
//
// Rows are grouped in panels of 16 (the last one padded with zero rows). Within a panel the
// quants of each 32-column block are interleaved for int8 dot-product instructions: vector
// g (g = 0..7) holds, for every row r, the 4 consecutive quants k = 4g..4g+3 at bytes
// 4r..4r+3 (the "VNNI" order of vpdpbusd), so one instruction multiplies 16
// rows by 4 broadcast activations and the block's scales are plain 16-lane vectors.
//
// A panel is laid out plane by plane, each plane indexed by block b (0..nb):
//   qs    nb * kQsBytes   Q4/Q5: 4 x 64 bytes; byte i of vector h holds vector h (low nibble)
//                         and vector h + 4 (high nibble). Q8: 8 x 64 bytes of (q + 128).
//   qh    nb * 64         Q5 only: 8 little-endian u64 masks, bit i of mask g = bit 4 of byte i of vector g
//   d     nb * 32         16 fp16 row scales
//   m     nb * 32         _1 types only: 16 fp16 row mins
// so that w[r][k] = d[r] * (u[r][k] - zero_point) + m[r], where u is the stored unsigned quant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hal/weight_type.h"

namespace llmsvc::hal::cpu {

constexpr int kPanelRows = 16;

enum class PanelKind { q4_0, q4_1, q5_0, q5_1, q8_0 };

struct PanelFormat {
  PanelKind kind;
  int qs_bytes;    // per block
  int qh_bytes;    // per block (0 or 64)
  bool has_min;    // m plane present
  int zero_point;  // subtracted from the stored unsigned quants (0 for _1 types)

  // Per-panel byte offsets of the planes for nb blocks, and the panel's total size (64-aligned).
  size_t qh_offset(int64_t nb) const { return static_cast<size_t>(nb) * qs_bytes; }
  size_t d_offset(int64_t nb) const { return static_cast<size_t>(nb) * (qs_bytes + qh_bytes); }
  size_t m_offset(int64_t nb) const { return d_offset(nb) + static_cast<size_t>(nb) * 32; }
  size_t panel_bytes(int64_t nb) const {
    const size_t n = d_offset(nb) + static_cast<size_t>(nb) * (has_min ? 64 : 32);
    return (n + 63) & ~size_t{63};
  }
};

// The panel format of a weight type, or nullptr when the type is not panel-packed.
const PanelFormat* panel_format(WeightType t);

// Repacks rows [0, rows) of a GGUF weight (row stride row_bytes) into panels at dst, which
// holds ceil(rows / 16) * panel_bytes(cols / 32) bytes. Panels [p_begin, p_end) only.
void pack_panels(const PanelFormat& f, WeightType t, const void* src, size_t row_bytes, int64_t rows, int64_t cols,
                 uint8_t* dst, int64_t p_begin, int64_t p_end);

// Dequantizes row r of packed panels (the inverse of pack_panels) into out[0..cols).
// layout_cols: the columns the panels were packed with (0: cols; more: a column prefix).
void unpack_panel_row(const PanelFormat& f, const uint8_t* panels, int64_t cols, int64_t r, float* out,
                      int64_t layout_cols = 0);

}  // namespace llmsvc::hal::cpu
