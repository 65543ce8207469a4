// SPDX-License-Identifier: Apache-2.0
// RopeTable::prepare: ggml_rope_cache_init's f32 recurrence and libm's cosf/sinf.
#include "hal/host/rope_table.h"

#include <algorithm>
#include <cmath>

namespace llmsvc::hal {

void RopeTable::prepare(int n_tokens, int rot_dims, const int32_t* positions, float freq_base, float freq_scale) {
  if (rot_dims == rot_dims_ && freq_base == freq_base_ && freq_scale == freq_scale_ &&
      positions_.size() == static_cast<size_t>(n_tokens) && std::equal(positions_.begin(), positions_.end(), positions)) {
    return;
  }
  positions_.assign(positions, positions + n_tokens);
  rot_dims_ = rot_dims;
  freq_base_ = freq_base;
  freq_scale_ = freq_scale;
  half_ = rot_dims / 2;
  cos_.resize(static_cast<size_t>(n_tokens) * half_);
  sin_.resize(cos_.size());
  // theta_scale and the running product are f32 exactly as in ggml_rope_cache_init.
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(rot_dims));
  for (int t = 0; t < n_tokens; ++t) {
    float theta = static_cast<float>(positions[t]);
    for (int i = 0; i < half_; ++i) {
      const float th = freq_scale * theta;
      cos_[static_cast<size_t>(t) * half_ + i] = std::cos(th);
      sin_[static_cast<size_t>(t) * half_ + i] = std::sin(th);
      theta *= theta_scale;
    }
  }
}

}  // namespace llmsvc::hal
