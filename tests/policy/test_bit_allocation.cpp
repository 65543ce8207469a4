// allocate_bits: meets the budget, is monotone in density, and is optimal (checked against
// exhaustive search over every assignment of small instances).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "policy/bit_allocation.h"

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

// Brute force over all 3^n assignments within the budget (and the caps, when given).
double best_loss(const std::vector<double>& d, double ratio, const std::vector<uint8_t>& cap = {}) {
  const int n = static_cast<int>(d.size());
  int combos = 1;
  for (int i = 0; i < n; ++i) combos *= 3;
  double best = INFINITY;
  for (int c = 0; c < combos; ++c) {
    std::vector<uint8_t> b(n);
    int x = c, sum = 0;
    for (int i = 0; i < n; ++i, x /= 3) sum += b[i] = static_cast<uint8_t>(2 << (x % 3));
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
  }
}

// Chunks only narrow: with each chunk capped at its current width (16 = f16, 8, 4, 2) the
// allocation stays within the caps, and is optimal among assignments that do.
TEST(BitAllocation, CappedOptimalAgainstExhaustiveSearch) {
  std::mt19937 rng(11);
  std::exponential_distribution<double> dens(1.0);
  const uint8_t caps[] = {16, 8, 4, 2};
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 7);
    std::vector<double> d(n);
    std::vector<uint8_t> cap(n);
    for (int i = 0; i < n; ++i) {
      d[i] = dens(rng);
      cap[i] = caps[rng() % 4];
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

}  // namespace
}  // namespace llmsvc::policy
