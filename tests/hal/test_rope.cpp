// SPDX-License-Identifier: Apache-2.0
// RoPE, both styles: against a double-precision reference at small positions, and bit for
// bit against ggml's f32 recipe (theta built by repeated f32 multiplication, cosf / sinf, two
// products fused as llama.cpp's build fuses them) at large ones, where the two differ by
// more than rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include "hal/cpu/cpu_device.h"

namespace llmsvc::hal::cpu {
namespace {

struct Shape {
  int n_tokens, n_heads, head_dim, rot_dims;
};

std::vector<float> random_input(const Shape& s, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(s.n_tokens) * s.n_heads * s.head_dim);
  for (float& v : x) v = u(rng);
  return x;
}

// Rotates pair (i0, i1) of every head of token t by angle[t][i]; double or float math.
template <class T>
std::vector<float> rotate(const std::vector<float>& x, const Shape& s, RopeStyle style,
                          const std::vector<std::vector<T>>& angle) {
  std::vector<float> y = x;
  const int half = s.rot_dims / 2;
  for (int t = 0; t < s.n_tokens; ++t)
    for (int h = 0; h < s.n_heads; ++h) {
      float* v = &y[(static_cast<size_t>(t) * s.n_heads + h) * s.head_dim];
      for (int i = 0; i < half; ++i) {
        const int i0 = style == RopeStyle::normal ? 2 * i : i;
        const int i1 = style == RopeStyle::normal ? 2 * i + 1 : i + half;
        const T c = std::cos(angle[t][i]), sn = std::sin(angle[t][i]);
        const T x0 = v[i0], x1 = v[i1];
        if constexpr (std::is_same_v<T, float>) {
          // ggml's rope as its build computes it: the products with x0 fused.
          v[i0] = std::fma(x0, c, -(x1 * sn));
          v[i1] = std::fma(x0, sn, x1 * c);
        } else {
          v[i0] = static_cast<float>(x0 * c - x1 * sn);
          v[i1] = static_cast<float>(x0 * sn + x1 * c);
        }
      }
    }
  return y;
}

struct RopeCase {
  RopeStyle style;
  int threads;
};

class RopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeTest, MatchesDoubleReferenceAtSmallPositions) {
  const auto [style, threads] = GetParam();
  const Shape s{20, 9, 64, 64};
  const float base = 10000.0f, fscale = 1.0f;
  std::mt19937 rng(1);
  std::vector<float> x = random_input(s, rng);
  std::vector<int32_t> pos(s.n_tokens);
  for (int t = 0; t < s.n_tokens; ++t) pos[t] = 3 * t;  // not contiguous, starts at 0
  std::vector<std::vector<double>> angle(s.n_tokens, std::vector<double>(s.rot_dims / 2));
  for (int t = 0; t < s.n_tokens; ++t)
    for (int i = 0; i < s.rot_dims / 2; ++i) angle[t][i] = fscale * pos[t] * std::pow(double(base), -2.0 * i / s.rot_dims);
  const std::vector<float> want = rotate(x, s, style, angle);
  CpuDevice dev(threads);
  dev.rope(x.data(), s.n_tokens, s.n_heads, s.head_dim, s.rot_dims, pos.data(), base, fscale, style);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], want[i], 2e-5) << i;
}

TEST_P(RopeTest, FollowsGgmlF32RecipeAtLargePositions) {
  const auto [style, threads] = GetParam();
  // Partial rotation (rot_dims < head_dim), a freq_scale, positions in the thousands.
  const Shape s{12, 4, 128, 96};
  const float base = 1000000.0f, fscale = 0.125f;
  std::mt19937 rng(2);
  std::vector<float> x = random_input(s, rng);
  const std::vector<float> orig = x;
  std::vector<int32_t> pos(s.n_tokens);
  for (int t = 0; t < s.n_tokens; ++t) pos[t] = 5000 + 997 * t;
  // ggml: theta_scale = powf(base, -2/n_dims); theta_i = theta_{i-1} * theta_scale in f32.
  const float theta_scale = std::pow(base, -2.0f / s.rot_dims);
  std::vector<std::vector<float>> angle(s.n_tokens, std::vector<float>(s.rot_dims / 2));
  for (int t = 0; t < s.n_tokens; ++t) {
    float theta = static_cast<float>(pos[t]);
    for (int i = 0; i < s.rot_dims / 2; ++i, theta *= theta_scale) angle[t][i] = fscale * theta;
  }
  const std::vector<float> want = rotate(x, s, style, angle);
  CpuDevice dev(threads);
  dev.rope(x.data(), s.n_tokens, s.n_heads, s.head_dim, s.rot_dims, pos.data(), base, fscale, style);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], want[i]) << i;  // llama.cpp's bits
  // Dimensions past rot_dims are untouched.
  for (int r = 0; r < s.n_tokens * s.n_heads; ++r)
    for (int d = s.rot_dims; d < s.head_dim; ++d) ASSERT_EQ(x[r * s.head_dim + d], orig[r * s.head_dim + d]);
}

TEST_P(RopeTest, PositionZeroIsIdentity) {
  const auto [style, threads] = GetParam();
  const Shape s{1, 3, 64, 64};
  std::mt19937 rng(3);
  std::vector<float> x = random_input(s, rng);
  const std::vector<float> orig = x;
  const int32_t pos = 0;
  CpuDevice dev(threads);
  dev.rope(x.data(), 1, s.n_heads, s.head_dim, s.rot_dims, &pos, 10000.0f, 1.0f, style);
  EXPECT_EQ(x, orig);
}

INSTANTIATE_TEST_SUITE_P(Styles, RopeTest,
                         ::testing::Values(RopeCase{RopeStyle::normal, 1}, RopeCase{RopeStyle::normal, 2},
                                           RopeCase{RopeStyle::neox, 1}, RopeCase{RopeStyle::neox, 2}),
                         [](const auto& info) {
                           return std::string(info.param.style == RopeStyle::normal ? "normal" : "neox") + "_" +
                                  std::to_string(info.param.threads) + "t";
                         });

// The two styles pair different elements: on the same input they must differ.
TEST(Rope, StylesPairDifferentElements) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8}, b = a;
  const int32_t pos = 1;
  CpuDevice dev(1);
  dev.rope(a.data(), 1, 1, 8, 8, &pos, 10000.0f, 1.0f, RopeStyle::normal);
  dev.rope(b.data(), 1, 1, 8, 8, &pos, 10000.0f, 1.0f, RopeStyle::neox);
  // Pair 0 rotates by exactly 1 radian in both styles: (x0, x1) vs (x0, x4).
  EXPECT_NEAR(a[0], 1 * std::cos(1.0) - 2 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(a[1], 1 * std::sin(1.0) + 2 * std::cos(1.0), 1e-6);
  EXPECT_NEAR(b[0], 1 * std::cos(1.0) - 5 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(b[4], 1 * std::sin(1.0) + 5 * std::cos(1.0), 1e-6);
}

}  // namespace
}  // namespace llmsvc::hal::cpu
