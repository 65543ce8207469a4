// SPDX-License-Identifier: Apache-2.0
// ggml_v_expf (ggml-cpu/vec.h, AVX-512) written plainly, for the tests that check llama.cpp's
// bits: exp(x) = 2^n * j(b) with n = round(x / ln 2), rounded once (_mm512_scalef_ps);
// |n| > 192 gives 0 or inf.
#pragma once

#include <cmath>

namespace llmsvc::test {

inline float ggml_expf_ref(float x) {
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  if (std::fabs(n) > 192) return n <= 0 ? 0.0f : INFINITY;
  return std::scalbn(j, static_cast<int>(n));
}

}  // namespace llmsvc::test
