// RoPE: per token, one table of (cos, sin) shared by all heads, then the rotation.
#include "hal/cpu/rope_ops.h"

#include <cmath>
#include <cstddef>
#include <vector>

namespace llmsvc::hal::cpu {

void rope_tokens(float* x, int t_begin, int t_end, int n_heads, int head_dim, int rot_dims, const int32_t* positions,
                 float freq_base, float freq_scale, RopeStyle style) {
  const int half = rot_dims / 2;
  // theta_scale and the running product are f32 exactly as in ggml_rope_cache_init.
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(rot_dims));
  std::vector<float> cs(2 * static_cast<size_t>(half));
  for (int t = t_begin; t < t_end; ++t) {
    float theta = static_cast<float>(positions[t]);
    for (int i = 0; i < half; ++i) {
      const float th = freq_scale * theta;
      cs[2 * i] = std::cos(th);
      cs[2 * i + 1] = std::sin(th);
      theta *= theta_scale;
    }
    float* row = x + static_cast<size_t>(t) * n_heads * head_dim;
    for (int h = 0; h < n_heads; ++h) {
      float* v = row + static_cast<size_t>(h) * head_dim;
      // ggml writes x0*c - x1*s and x0*s + x1*c; its build (gcc, GNU C: fp-contract=fast)
      // fuses the products with x0 into FMAs (checked against its outputs). We do the same.
      if (style == RopeStyle::normal) {
        // Adjacent pairs (x[2i], x[2i+1]).
        for (int i = 0; i < half; ++i) {
          const float c = cs[2 * i], s = cs[2 * i + 1];
          const float x0 = v[2 * i], x1 = v[2 * i + 1];
          v[2 * i] = std::fma(x0, c, -(x1 * s));
          v[2 * i + 1] = std::fma(x0, s, x1 * c);
        }
      } else {
        // Split halves (x[i], x[i + rot_dims/2]).
        for (int i = 0; i < half; ++i) {
          const float c = cs[2 * i], s = cs[2 * i + 1];
          const float x0 = v[i], x1 = v[i + half];
          v[i] = std::fma(x0, c, -(x1 * s));
          v[i + half] = std::fma(x0, s, x1 * c);
        }
      }
    }
  }
}

}  // namespace llmsvc::hal::cpu
