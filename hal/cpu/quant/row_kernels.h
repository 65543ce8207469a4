// Row-major GEMM kernels for the float weight types (F32 / F16 / BF16: float FMAs, converting
// on the fly). Dispatched per CPU.
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
  int64_t r_begin = 0, r_end = 0;  // rows to compute
  const float* x = nullptr;        // [n_tokens][cols]
  int n_tokens = 0;
  float* y = nullptr;  // y[t * ldy + r]
  int64_t ldy = 0;
};

void row_gemm(const RowGemmArgs& a);

}  // namespace llmsvc::hal::cpu
