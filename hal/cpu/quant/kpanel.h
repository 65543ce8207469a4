// SPDX-License-Identifier: Apache-2.0
// K-panel layout: the CPU kernels' repacked form of the K-quants (Q4_K, Q5_K, Q6_K), the
// same size as the GGUF bytes give or take 3%.
//
// Rows are grouped in panels of 16 as for the legacy types (panel.h); each superblock of 256
// columns is 8 sub-blocks of 32 whose quants use the legacy panel order (vector g of a
// sub-block holds k = 4g..4g+3 of every row at bytes 4r..4r+3, Q4/Q5 as nibble pairs), and
// the integer sub-block scales are unpacked to one byte per row so a vector load gives them.
// Per panel, plane by plane, indexed by superblock s (0..nsb):
//   qs   nsb * 2048   8 sub-blocks x 4 x 64 bytes of nibbles (vector h: low = g h, high = g h+4)
//   qh   Q5_K: nsb * 512   8 sub-blocks x 8 u64 masks (bit i of mask g = bit 4 of byte i of vector g)
//        Q6_K: nsb * 1024  8 sub-blocks x {bit 4, bit 5} x 8 u64 masks
//   sc   Q4_K/Q5_K: nsb * 128  [sub-block][row] u8 6-bit scales;  Q6_K: nsb * 256  [16-group][row] int8
//   mn   Q4_K/Q5_K only: nsb * 128  [sub-block][row] u8 6-bit mins
//   d    nsb * 32   16 fp16 super-scales;  dmin (Q4_K/Q5_K)  nsb * 32
// so that w[r][k] = d[r] * sc[j][r] * u[r][k] - dmin[r] * mn[j][r]  (Q4_K, Q5_K; j = k / 32)
//      or w[r][k] = d[r] * sc[k/16][r] * (u[r][k] - 32)           (Q6_K).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hal/weight_type.h"

namespace llmsvc::hal::cpu {

enum class KPanelKind { q4_k, q5_k, q6_k };

struct KPanelFormat {
  KPanelKind kind;
  int qh_bytes;  // per superblock: 0, 512 or 1024
  int sc_bytes;  // per superblock: 128 or 256
  bool has_min;

  size_t qh_offset(int64_t nsb) const { return static_cast<size_t>(nsb) * 2048; }
  size_t sc_offset(int64_t nsb) const { return qh_offset(nsb) + static_cast<size_t>(nsb) * qh_bytes; }
  size_t mn_offset(int64_t nsb) const { return sc_offset(nsb) + static_cast<size_t>(nsb) * sc_bytes; }
  size_t d_offset(int64_t nsb) const { return mn_offset(nsb) + (has_min ? static_cast<size_t>(nsb) * 128 : 0); }
  size_t dmin_offset(int64_t nsb) const { return d_offset(nsb) + static_cast<size_t>(nsb) * 32; }
  size_t panel_bytes(int64_t nsb) const {
    const size_t n = d_offset(nsb) + static_cast<size_t>(nsb) * (has_min ? 64 : 32);
    return (n + 63) & ~size_t{63};
  }
};

// The K-panel format of a weight type, or nullptr.
const KPanelFormat* kpanel_format(WeightType t);

// Repacks panels [p_begin, p_end) of a rows x cols K-quant weight into dst
// (ceil(rows / 16) * panel_bytes(cols / 256) bytes); missing rows of the last panel are zero.
void pack_kpanels(const KPanelFormat& f, WeightType t, const void* src, size_t row_bytes, int64_t rows, int64_t cols,
                  uint8_t* dst, int64_t p_begin, int64_t p_end);

// Dequantizes row r of packed K-panels into out[0..cols), bit-identical to dequantize_row.
// layout_cols: the columns the panels were packed with (0: cols; more: a column prefix).
void unpack_kpanel_row(const KPanelFormat& f, const uint8_t* panels, int64_t cols, int64_t r, float* out,
                       int64_t layout_cols = 0);

}  // namespace llmsvc::hal::cpu
