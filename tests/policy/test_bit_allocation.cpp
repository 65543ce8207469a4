// SPDX-License-Identifier: Apache-2.0
// allocate_bits: meets the budget, is monotone in density, and is optimal (checked against
// exhaustive search over every assignment of small instances, for {8, 4, 3, 2} and {8, 4, 2}).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "policy/compression/bit_allocation.h"

namespace llmsvc::policy {
namespace {

int total_bits(const std::vector<uint8_t>& b) {
  int s = 0;
  for (uint8_t x : b) s += x;
  return s;
}

TEST(BitAllocation, ExtremesAndBudget) {
  const std::vector<double> d = {0.5, 0.1, 0.9, 0.3};
  EXPECT_EQ(allocate_bits(d, 1.0), (std::vector<uint8_t>{8, 8, 8, 8}));
  EXPECT_EQ(allocate_bits(d, 0.25), (std::vector<uint8_t>{2, 2, 2, 2}));
  EXPECT_EQ(allocate_bits(d, 0.0), (std::vector<uint8_t>{2, 2, 2, 2}));
  EXPECT_TRUE(allocate_bits({}, 0.5).empty());
  for (double r : {0.3, 0.5, 0.75}) EXPECT_LE(total_bits(allocate_bits(d, r)), r * 8 * d.size() + 1e-9) << r;
}

// Brute force over every assignment of `widths` within the budget (and the caps, when given).
double best_loss(const std::vector<double>& d, double ratio, const std::vector<uint8_t>& cap = {},
                 std::span<const uint8_t> widths = kKvWidths) {
  const int n = static_cast<int>(d.size()), k = static_cast<int>(widths.size());
  int combos = 1;
  for (int i = 0; i < n; ++i) combos *= k;
  double best = INFINITY;
  for (int c = 0; c < combos; ++c) {
    std::vector<uint8_t> b(n);
    int x = c, sum = 0;
    for (int i = 0; i < n; ++i, x /= k) sum += b[i] = widths[x % k];
    if (sum > std::floor(ratio * 8 * n + 1e-9)) continue;
    bool fits = true;
    for (int i = 0; i < n && !cap.empty(); ++i) fits = fits && b[i] <= cap[i];
    if (!fits) continue;
    best = std::min(best, allocation_loss(d, b));
  }
  return best;
}

TEST(BitAllocation, OptimalAgainstExhaustiveSearch) {
  std::mt19937 rng(7);
  std::exponential_distribution<double> dens(1.0);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 7);
    std::vector<double> d(n);
    for (double& x : d) x = dens(rng);
    const double ratio = 0.25 + 0.75 * (rng() % 1000) / 1000.0;
    const auto bits = allocate_bits(d, ratio);
    ASSERT_LE(total_bits(bits), std::floor(ratio * 8 * n + 1e-9));
    EXPECT_NEAR(allocation_loss(d, bits), best_loss(d, ratio), 1e-12 * (1 + best_loss(d, ratio))) << trial;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (d[i] > d[j]) {
          EXPECT_GE(bits[i], bits[j]);
        }
      }
    }
    // Without the 3-bit width (the paper's {8, 4, 2}): optimal among those widths.
    constexpr uint8_t kNo3[] = {8, 4, 2};
    const auto bits842 = allocate_bits(d, ratio, {}, kNo3);
    for (uint8_t b : bits842) EXPECT_NE(b, 3);
    const double best842 = best_loss(d, ratio, {}, kNo3);
    EXPECT_NEAR(allocation_loss(d, bits842), best842, 1e-12 * (1 + best842)) << trial;
  }
}

// Chunks only narrow: with each chunk capped at its current width (16 = f16, 8, 4, 3, 2) the
// allocation stays within the caps, and is optimal among assignments that do.
TEST(BitAllocation, CappedOptimalAgainstExhaustiveSearch) {
  std::mt19937 rng(11);
  std::exponential_distribution<double> dens(1.0);
  const uint8_t caps[] = {16, 8, 4, 3, 2};
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 7);
    std::vector<double> d(n);
    std::vector<uint8_t> cap(n);
    for (int i = 0; i < n; ++i) {
      d[i] = dens(rng);
      cap[i] = caps[rng() % 5];
    }
    const double ratio = 0.25 + 0.75 * (rng() % 1000) / 1000.0;
    const auto bits = allocate_bits(d, ratio, cap);
    ASSERT_LE(total_bits(bits), std::floor(ratio * 8 * n + 1e-9));
    for (int i = 0; i < n; ++i) EXPECT_LE(bits[i], cap[i]) << trial;
    const double best = best_loss(d, ratio, cap);
    EXPECT_NEAR(allocation_loss(d, bits), best, 1e-12 * (1 + best)) << trial;
  }
}

TEST(BitAllocation, CapsFreeBudgetForOthers) {
  // Two chunks already at 2 bits: at 50% the other two share the 12 bits left, 8 + 4. Planning
  // without the caps gives 4 bits each, and applying that would leave 4 of the 16 bits unused.
  const std::vector<double> d = {1.0, 1.0, 1.0, 1.0};
  const std::vector<uint8_t> cap = {2, 2, 16, 16};
  EXPECT_EQ(allocate_bits(d, 0.5, cap), (std::vector<uint8_t>{2, 2, 8, 4}));
  // Without caps the same densities get 4 bits each; caps of 16 change nothing.
  EXPECT_EQ(allocate_bits(d, 0.5), (std::vector<uint8_t>{4, 4, 4, 4}));
  EXPECT_EQ(allocate_bits(d, 0.5, std::vector<uint8_t>(4, 16)), allocate_bits(d, 0.5));
}

TEST(BitAllocation, HalfRatioKeepsTheDensestAtEightBits) {
  // At 50% (4 bits on average) with one very dense chunk among flat ones, the dense one
  // keeps 8 bits and pays with 2-bit chunks elsewhere only when that loses less.
  std::vector<double> d(8, 1.0);
  d[3] = 1000.0;
  const auto bits = allocate_bits(d, 0.5);
  EXPECT_EQ(bits[3], 8);
  EXPECT_LE(total_bits(bits), 32);
}

TEST(BitAllocation, SinkKeepsEightBitsPaidByThreeBitChunks) {
  // An attention-sink-like chunk 20x denser than 15 flat ones, at 50%: it keeps 8 bits and
  // four of the others pay at 3 bits (4 x (err(3) - err(4)) < 20 x (err(4) - err(8))). With
  // {8, 4, 2} two would have to drop to 2 bits, which costs more than the sink gains.
  std::vector<double> d(16, 1.0);
  d[0] = 20.0;
  const auto bits = allocate_bits(d, 0.5);
  EXPECT_EQ(bits[0], 8);
  EXPECT_EQ(std::count(bits.begin(), bits.end(), 3), 4);
  EXPECT_EQ(std::count(bits.begin(), bits.end(), 2), 0);
  EXPECT_EQ(total_bits(bits), 64);
  EXPECT_EQ(quant_error(4), 1.0 / 225);
  constexpr uint8_t kNo3[] = {8, 4, 2};
  EXPECT_EQ(allocate_bits(d, 0.5, {}, kNo3), std::vector<uint8_t>(16, 4));
}

}  // namespace
}  // namespace llmsvc::policy
