// SPDX-License-Identifier: Apache-2.0
// Elementwise ops on the CPU (Highway, dynamic dispatch): gated activations, add, scale,
// with llama.cpp's exact results.
// Single-threaded over the range given; CpuDevice splits ranges across its pool.
#pragma once

#include <cstddef>

namespace llmsvc::hal::cpu {

// gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x) with ggml's vector expf.
void swiglu_range(float* gate, const float* up, size_t n);
// gate[i] = gelu(gate[i]) * up[i] as ggml_vec_geglu_f32: gelu(x) is read from a table of
// f16(tanh-approximation gelu) at f16(x) (0 for x <= -10, x for x >= 10).
void geglu_range(float* gate, const float* up, size_t n);
// y[i] += x[i]
void add_range(float* y, const float* x, size_t n);
// x[i] *= s
void scale_range(float* x, size_t n, float s);

}  // namespace llmsvc::hal::cpu
