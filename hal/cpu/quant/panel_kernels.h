// SPDX-License-Identifier: Apache-2.0
// Integer GEMM kernels over panel-packed weights (see panel.h), dispatched per CPU.
//
// Every target computes ggml's x86 dot product (ggml_vec_dot_q4_1_q8_1 and its siblings,
// and llamafile's GEMM for the types it takes) operation for operation, so results are
// llama.cpp's bits: per (row, token) 8 lane accumulators, lane g of block b gets
//   lane_g = fma(d_w[b] * d_x[b], P_g, lane_g),  P_g = sum_{k=4g}^{4g+3} w[k] q_x[k]  (exact int)
// and y = ((lane_0 + lane_4) + (lane_2 + lane_6)) + ((lane_1 + lane_5) + (lane_3 + lane_7)),
// plus, for Q4_1 / Q5_1, sum_b m_w[b] * s_x[b] as an FMA chain. P_g is read as a float through
// the activation's group bias (act_quant.h), which also holds the zero-point correction.
#pragma once

#include <cstdint>

#include "hal/cpu/quant/act_quant.h"
#include "hal/cpu/quant/panel.h"

namespace llmsvc::hal::cpu {

struct PanelGemmArgs {
  const PanelFormat* fmt = nullptr;
  const uint8_t* panels = nullptr;  // panel 0 of the weight
  int64_t cols = 0;                 // columns summed over (x's cols)
  // Columns the panels were packed with (0: cols): the plane offsets and the panel stride
  // follow it. More than cols for a column prefix of a weight (CpuWeight views).
  int64_t layout_cols = 0;
  int64_t rows = 0;                 // valid rows (outputs past it are not written)
  int64_t p_begin = 0, p_end = 0;   // panels to compute
  const ActQ8* x = nullptr;         // quantized with zero_point = fmt->zero_point
  int t_begin = 0, t_end = 0;       // tokens to compute
  float* y = nullptr;               // y[t * ldy + r]
  int64_t ldy = 0;
  // Several tokens: this call's scratch for panel_chunk(cols) panels' quants widened to bytes
  // (panel_unpack_bytes(cols)), so that they are unpacked once per call, not once per token.
  uint8_t* unpacked = nullptr;
};

// Panels unpacked at a time (their bytes stay in L2 while every token passes over them), and
// the scratch bytes of PanelGemmArgs::unpacked for weights of `cols` columns. Only the
// summed blocks are unpacked, so both take PanelGemmArgs::cols, not layout_cols.
inline int64_t panel_chunk(int64_t cols) {
  const int64_t per_panel = cols / 32 * 512;
  return per_panel >= (256 << 10) ? 1 : (256 << 10) / per_panel;
}
inline size_t panel_unpack_bytes(int64_t cols) { return static_cast<size_t>(panel_chunk(cols) * (cols / 32) * 512); }

void panel_gemm(const PanelGemmArgs& a);

}  // namespace llmsvc::hal::cpu
