// SPDX-License-Identifier: Apache-2.0
// Row-major GEMM kernels for the float weight types (F32 / F16 / BF16: float FMAs, converting
// on the fly). Dispatched per CPU. F32 and F16 follow llama.cpp's summation orders (bits):
// llamafile's GEMM for several tokens where it takes the shape, ggml_vec_dot_f32 / _f16 else.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hal/weight_type.h"

namespace llmsvc::hal::cpu {

// Float weights with fewer columns than this (a LoRA adapter's B: K = its rank) have every
// dot product in llama.cpp's scalar tail; their kernel runs on rows side by side instead.
inline constexpr int64_t kSmallKCols = 64;
// Such a weight's values as floats in k-major panels of this many rows, packed once at load
// ([panel][k][row], whole panels only), so a decode step does not transpose them each time.
inline constexpr int64_t kKMajorRows = 16;

bool wants_kmajor(WeightType t, int64_t rows, int64_t cols);
size_t kmajor_floats(int64_t rows, int64_t cols);
void pack_kmajor(WeightType t, const uint8_t* w, size_t row_bytes, int64_t rows, int64_t cols, float* out);

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
  const float* kmajor = nullptr;  // pack_kmajor's panels of the weight, or nullptr
};

void row_gemm(const RowGemmArgs& a);

}  // namespace llmsvc::hal::cpu
