// SPDX-License-Identifier: Apache-2.0
// Integer GEMM kernels over K-panel-packed weights (see kpanel.h), dispatched per CPU:
// ggml's Q4_K / Q5_K / Q6_K x Q8_K dot products (integer sub-block scales, fp32 per superblock).
#pragma once

#include <cstdint>

#include "hal/cpu/quant/act_quant.h"
#include "hal/cpu/quant/kpanel.h"

namespace llmsvc::hal::cpu {

struct KPanelGemmArgs {
  const KPanelFormat* fmt = nullptr;
  const uint8_t* panels = nullptr;  // panel 0 of the weight
  int64_t cols = 0;                 // columns summed over (x's cols)
  // Columns the panels were packed with (0: cols): the plane offsets and the panel stride
  // follow it. More than cols for a column prefix of a weight (CpuWeight views).
  int64_t layout_cols = 0;
  int64_t rows = 0;                 // valid rows (outputs past it are not written)
  int64_t p_begin = 0, p_end = 0;   // panels to compute
  const ActQ8K* x = nullptr;
  int t_begin = 0, t_end = 0;       // tokens to compute
  float* y = nullptr;               // y[t * ldy + r]
  int64_t ldy = 0;
  // Several tokens: this call's scratch for one panel's quants widened to bytes and its scale
  // pairs (kpanel_unpack_bytes(cols), 64-aligned), unpacked once per panel, not per token pair.
  uint8_t* unpacked = nullptr;
};

// The scratch bytes of KPanelGemmArgs::unpacked for weights of `cols` columns (the summed
// superblocks only: KPanelGemmArgs::cols, not layout_cols).
inline size_t kpanel_unpack_bytes(int64_t cols) { return static_cast<size_t>(cols / 256) * (4096 + 512); }

void kpanel_gemm(const KPanelGemmArgs& a);

}  // namespace llmsvc::hal::cpu
