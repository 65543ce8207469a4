// SPDX-License-Identifier: Apache-2.0
// Rotary position embedding on the CPU, computed as ggml computes it so results are
// llama.cpp's bit for bit: theta for pair i is pos * base^(-2i/rot_dims), built in f32 by
// repeated multiplication, scaled by freq_scale, rotated with f32 cosf/sinf as
// (fma(x0, c, -(x1 s)), fma(x0, s, x1 c)) (fused on FMA targets, else the same rounding in software).
#pragma once

#include <cstdint>
#include <vector>

#include "hal/device.h"

namespace llmsvc::hal::cpu {

// The (cos, sin) of every token's angles. A forward pass ropes q and k of every layer at the
// same positions: the table is built once and reused while its inputs stay the same.
class RopeTable {
 public:
  // Makes the table hold these tokens' angles (rebuilt only when they differ from the last).
  void prepare(int n_tokens, int rot_dims, const int32_t* positions, float freq_base, float freq_scale);
  const float* cos(int t) const { return cos_.data() + static_cast<size_t>(t) * half_; }
  const float* sin(int t) const { return sin_.data() + static_cast<size_t>(t) * half_; }

 private:
  std::vector<int32_t> positions_;
  int rot_dims_ = 0;
  float freq_base_ = 0, freq_scale_ = 0;
  int half_ = 0;
  std::vector<float> cos_, sin_;
};

// In place on tokens [t_begin, t_end) of x (n_tokens x n_heads x head_dim); rotates the
// first rot_dims (even) of each head by the table's angles and leaves the rest. Single-threaded.
void rope_tokens(float* x, int t_begin, int t_end, int n_heads, int head_dim, int rot_dims, const RopeTable& table,
                 RopeStyle style);

}  // namespace llmsvc::hal::cpu
