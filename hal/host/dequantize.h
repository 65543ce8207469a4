// SPDX-License-Identifier: Apache-2.0
// Scalar reference dequantization: GGUF weight rows to fp32, exactly as ggml computes them
// (shared by the CPU backend and the OpenCL device's load-time repacks).
#pragma once

#include <cstdint>

#include "hal/weight_type.h"

namespace llmsvc::hal {

// dst[0..n) = the n elements of the row at src (n a multiple of block_elems(type)).
void dequantize_row(WeightType type, const void* src, float* dst, int64_t n);

}  // namespace llmsvc::hal
