// Elementwise ops on the CPU (Highway, dynamic dispatch): gated activations, add, scale.
// Single-threaded over the range given; CpuDevice splits ranges across its pool.
#pragma once

#include <cstddef>

namespace llmsvc::hal::cpu {

// gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x).
void swiglu_range(float* gate, const float* up, size_t n);
// gate[i] = gelu(gate[i]) * up[i] with the tanh approximation ggml's gelu uses,
// 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), evaluated in f32 (ggml rounds through an
// f16 table; the difference is below f16 precision).
void geglu_range(float* gate, const float* up, size_t n);
// y[i] += x[i]
void add_range(float* y, const float* x, size_t n);
// x[i] *= s
void scale_range(float* x, size_t n, float s);

}  // namespace llmsvc::hal::cpu
