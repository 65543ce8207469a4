// SPDX-License-Identifier: Apache-2.0
// Rotary position embedding on the CPU, computed as ggml computes it so results are
// llama.cpp's bit for bit: theta for pair i is pos * base^(-2i/rot_dims), built in f32 by
// repeated multiplication, scaled by freq_scale, rotated with f32 cosf/sinf as
// (fma(x0, c, -(x1 s)), fma(x0, s, x1 c)) (fused on FMA targets, else the same rounding in software).
#pragma once

#include <cstdint>
#include <vector>

#include "hal/device.h"
#include "hal/host/rope_table.h"

namespace llmsvc::hal::cpu {

// In place on tokens [t_begin, t_end) of x (n_tokens x n_heads x head_dim); rotates the
// first rot_dims (even) of each head by the table's angles and leaves the rest. Single-threaded.
void rope_tokens(float* x, int t_begin, int t_end, int n_heads, int head_dim, int rot_dims, const RopeTable& table,
                 RopeStyle style);

}  // namespace llmsvc::hal::cpu
