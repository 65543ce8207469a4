// SPDX-License-Identifier: Apache-2.0
// Gated activations, add, add_bias and scale against double-precision references and
// against llama.cpp's exact formulas, with lengths that exercise vector tails and the split
// across threads.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "hal/cpu/cpu_device.h"
#include "hal/host/fp16.h"
#include "ggml_expf_ref.h"
#include "tests/common/simd_targets.h"

namespace llmsvc::hal::cpu {
namespace {

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
}

// llama.cpp's own results, written plainly: ggml_v_expf (AVX-512) and ggml_v_silu for SwiGLU,
// the f16 GELU table for GEGLU (ggml_gelu_f32 as its build computes it, one FMA).
using test::ggml_expf_ref;
float ggml_swiglu(float x, float g) { return x / (1.0f + ggml_expf_ref(0.0f - x)) * g; }
float ggml_geglu(float x, float g) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x * g;
  const float h = fp16_to_fp32(fp32_to_fp16(x));
  const float gelu = 0.5f * h * (1.0f + std::tanh(0.79788456080286535587989211986876f * h *
                                                  std::fma(h, 0.044715f * h, 1.0f)));
  return fp16_to_fp32(fp32_to_fp16(gelu)) * g;
}

const size_t kSizes[] = {1, 5, 16, 17, 100, 1536, 40000};

void check_gated(bool gelu) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-12.0f, 12.0f);
  test::for_each_simd_target([&](int64_t target) {
    for (int threads : {1, 2})
      for (size_t n : kSizes) {
        SCOPED_TRACE(::testing::Message() << threads << "t n " << n);
        std::vector<float> g(n), up(n);
        for (float& v : g) v = u(rng);
        for (float& v : up) v = u(rng) / 4;
        if (n > 3) g[3] = -200.0f;  // far tail: must be -0, not NaN
        if (n > 4) g[4] = 95.0f;    // e^-x below f32's normal range
        std::vector<double> want(n);
        std::vector<float> exact(n);
        for (size_t i = 0; i < n; ++i) {
          want[i] = (gelu ? gelu_tanh(g[i]) : silu(g[i])) * up[i];
          exact[i] = gelu ? ggml_geglu(g[i], up[i]) : ggml_swiglu(g[i], up[i]);
        }
        CpuDevice dev(threads);
        if (gelu)
          dev.geglu(g.data(), up.data(), n);
        else
          dev.swiglu(g.data(), up.data(), n);
        // GELU goes through f16 (its input and its value): f16 precision.
        const double rel = gelu ? 2e-3 : 1e-5;
        for (size_t i = 0; i < n; ++i) ASSERT_NEAR(g[i], want[i], rel * (1 + std::fabs(want[i]))) << i;
        // llama.cpp's bits wherever FMA is native (the table path: everywhere).
        if (gelu || test::has_fma(target)) {
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(g[i], exact[i]) << i;
        }
      }
  });
}

TEST(Activation, Swiglu) { check_gated(false); }
TEST(Activation, Geglu) { check_gated(true); }

TEST(Activation, AddScaleBias) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  test::for_each_simd_target([&] {
    for (int threads : {1, 2})
      for (size_t n : kSizes) {
        std::vector<float> y(n), x(n);
        for (float& v : y) v = u(rng);
        for (float& v : x) v = u(rng);
        std::vector<float> want(n);
        for (size_t i = 0; i < n; ++i) want[i] = (y[i] + x[i]) * 0.5f;
        CpuDevice dev(threads);
        dev.add(y.data(), x.data(), n);
        dev.scale(y.data(), n, 0.5f);
        ASSERT_EQ(y, want) << threads << "t n " << n;  // exact: one rounding each, same as scalar
      }
    for (int threads : {1, 2})
      for (int rows : {1, 3, 100})
        for (int dim : {7, 64, 896}) {
          std::vector<float> y(static_cast<size_t>(rows) * dim), b(dim);
          for (float& v : y) v = u(rng);
          for (float& v : b) v = u(rng);
          std::vector<float> want = y;
          for (int r = 0; r < rows; ++r)
            for (int i = 0; i < dim; ++i) want[r * dim + i] += b[i];
          CpuDevice dev(threads);
          dev.add_bias(y.data(), b.data(), rows, dim);
          ASSERT_EQ(y, want) << threads << "t rows " << rows << " dim " << dim;
        }
  });
}

}  // namespace
}  // namespace llmsvc::hal::cpu
