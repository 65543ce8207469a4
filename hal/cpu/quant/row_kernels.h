// SPDX-License-Identifier: Apache-2.0
// Row-major GEMM kernels for the float weight types (F32 / F16 / BF16: float FMAs, converting
// on the fly). Dispatched per CPU. F32 and F16 follow llama.cpp's summation orders (bits):
// llamafile's GEMM for several tokens where it takes the shape, ggml_vec_dot_f32 / _f16 else.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hal/weight_type.h"

namespace llmsvc::hal::cpu {

struct RowGemmArgs {
  WeightType type = WeightType::F32;
  const uint8_t* w = nullptr;  // row 0
  size_t row_bytes = 0;
  int64_t cols = 0;
  int64_t rows = 0;                // the weight's rows (llama.cpp's order depends on the shape)
  int64_t r_begin = 0, r_end = 0;  // rows to compute
  const float* x = nullptr;        // [n_tokens][cols]
  int n_tokens = 0;
  float* y = nullptr;  // y[t * ldy + r]
  int64_t ldy = 0;
};

void row_gemm(const RowGemmArgs& a);

}  // namespace llmsvc::hal::cpu
