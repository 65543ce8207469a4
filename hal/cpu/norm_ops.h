// SPDX-License-Identifier: Apache-2.0
// Normalization ops on the CPU (Highway, dynamic dispatch). Single-threaded over the rows
// given; CpuDevice splits rows across its pool.
#pragma once

#include <cstdint>

namespace llmsvc::hal::cpu {

// For each of n_rows rows of dim floats: out = x / sqrt(mean(x^2) + eps) * weight, as ggml's
// rms_norm followed by mul. weight may be null (no scale); out may alias x.
void rms_norm_rows(const float* x, const float* weight, int64_t n_rows, int dim, float eps, float* out);

}  // namespace llmsvc::hal::cpu
