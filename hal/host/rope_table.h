// SPDX-License-Identifier: Apache-2.0
// RopeTable: the (cos, sin) of RoPE's angles for a step's tokens, computed on the host as ggml
// computes them (theta for pair i is pos * base^(-2i/rot_dims), built in f32 by repeated
// multiplication, scaled by freq_scale, then f32 cosf/sinf). Every backend rotates by this one
// table (the CPU reads it, a GPU uploads it), so their rotations agree bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llmsvc::hal {

// The (cos, sin) of every token's angles. A forward pass ropes q and k of every layer at the
// same positions: the table is built once and reused while its inputs stay the same.
class RopeTable {
 public:
  // Makes the table hold these tokens' angles (rebuilt only when they differ from the last).
  void prepare(int n_tokens, int rot_dims, const int32_t* positions, float freq_base, float freq_scale);
  const float* cos(int t) const { return cos_.data() + static_cast<size_t>(t) * half_; }
  const float* sin(int t) const { return sin_.data() + static_cast<size_t>(t) * half_; }
  int half() const { return half_; }  // pairs rotated per token (rot_dims / 2)

 private:
  std::vector<int32_t> positions_;
  int rot_dims_ = 0;
  float freq_base_ = 0, freq_scale_ = 0;
  int half_ = 0;
  std::vector<float> cos_, sin_;
};

}  // namespace llmsvc::hal
