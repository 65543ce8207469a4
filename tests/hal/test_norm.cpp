// SPDX-License-Identifier: Apache-2.0
// RMSNorm against a double-precision reference (odd row lengths for vector tails, with and
// without a weight, in place, rows split across threads) and against llama.cpp's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "hal/cpu/cpu_device.h"
#include "tests/common/simd_targets.h"

namespace llmsvc::hal::cpu {
namespace {

std::vector<float> reference(const std::vector<float>& x, const float* w, int rows, int dim, float eps) {
  std::vector<float> y(x.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double scale = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i) y[r * dim + i] = static_cast<float>(x[r * dim + i] * scale * (w ? w[i] : 1.0f));
  }
  return y;
}

TEST(RmsNorm, MatchesReference) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  test::for_each_simd_target([&] {
    for (int threads : {1, 2})
      for (int dim : {1, 7, 64, 576, 1000, 2048})
        for (int rows : {1, 3, 200})
          for (bool weighted : {false, true})
            for (bool in_place : {false, true}) {
              SCOPED_TRACE(::testing::Message() << threads << "t dim " << dim << " rows " << rows << " w " << weighted
                                                << " in_place " << in_place);
              std::vector<float> x(static_cast<size_t>(rows) * dim), w(dim);
              for (float& v : x) v = u(rng);
              for (float& v : w) v = u(rng);
              const float eps = 1e-5f;
              const std::vector<float> want = reference(x, weighted ? w.data() : nullptr, rows, dim, eps);
              CpuDevice dev(threads);
              std::vector<float> out(x.size());
              float* dst = in_place ? x.data() : out.data();
              dev.rms_norm(x.data(), weighted ? w.data() : nullptr, rows, dim, eps, dst);
              for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(dst[i], want[i], 1e-5f * (1 + std::fabs(want[i]))) << i;
            }
  });
}

// ggml_compute_forward_rms_norm_f32 then the weight's ggml_mul: squares added one by one in
// double, mean and scale in float, (x * scale) * w.
std::vector<float> ggml_reference(const std::vector<float>& x, const float* w, int rows, int dim, float eps) {
  std::vector<float> y(x.size());
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int i = 0; i < dim; ++i) sum += static_cast<double>(x[r * dim + i] * x[r * dim + i]);
    const float mean = static_cast<float>(sum / dim);
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int i = 0; i < dim; ++i) y[r * dim + i] = x[r * dim + i] * scale * (w ? w[i] : 1.0f);
  }
  return y;
}

// Bit for bit llama.cpp's, also on rows whose squares span many orders of magnitude (where
// adding them in another order than ggml's would round differently).
TEST(RmsNorm, MatchesGgmlBitForBit) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  test::for_each_simd_target([&] {
    for (int dim : {7, 64, 576, 2048})
      for (bool wide : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "dim " << dim << " wide " << wide);
        const int rows = 50;
        std::vector<float> x(static_cast<size_t>(rows) * dim), w(dim);
        for (float& v : x) v = u(rng);
        if (wide) {
          // One large value per row, the others so small that added to it one by one each
          // vanishes, while added among themselves first they would not.
          for (int r = 0; r < rows; ++r) {
            for (int i = 0; i < dim; ++i) x[r * dim + i] = std::ldexp(x[r * dim + i], -7);
            x[r * dim + r % dim] = std::ldexp(1.0f + std::fabs(u(rng)), 20);
          }
        }
        for (float& v : w) v = u(rng);
        const std::vector<float> want = ggml_reference(x, w.data(), rows, dim, 1e-5f);
        CpuDevice dev(2);
        std::vector<float> out(x.size());
        dev.rms_norm(x.data(), w.data(), rows, dim, 1e-5f, out.data());
        for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], want[i]) << i;
      }
  });
}

// eps dominates a zero row: the output is zero, not NaN.
TEST(RmsNorm, ZeroRowStaysFinite) {
  CpuDevice dev(1);
  std::vector<float> x(64, 0.0f), out(64, NAN);
  dev.rms_norm(x.data(), nullptr, 1, 64, 1e-6f, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace llmsvc::hal::cpu
