// Integer GEMM kernels over panel-packed weights (see panel.h), dispatched per CPU.
//
// y[t][r] = sum_b d_w[r][b] * d_x[t][b] * (sum_k u[r][k] q_x[t][k] + corr[t][b]) + m_w[r][b] * s_x[t][b]
// i.e. exactly ggml's per-block integer dot products with fp32 accumulation.
#pragma once

#include <cstdint>

#include "hal/cpu/quant/act_quant.h"
#include "hal/cpu/quant/panel.h"

namespace llmsvc::hal::cpu {

struct PanelGemmArgs {
  const PanelFormat* fmt = nullptr;
  const uint8_t* panels = nullptr;  // panel 0 of the weight
  int64_t cols = 0;
  int64_t rows = 0;                 // valid rows (outputs past it are not written)
  int64_t p_begin = 0, p_end = 0;   // panels to compute
  const ActQ8* x = nullptr;         // quantized with zero_point = fmt->zero_point
  int t_begin = 0, t_end = 0;       // tokens to compute
  float* y = nullptr;               // y[t * ldy + r]
  int64_t ldy = 0;
};

void panel_gemm(const PanelGemmArgs& a);

}  // namespace llmsvc::hal::cpu
