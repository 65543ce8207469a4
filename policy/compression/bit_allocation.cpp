// SPDX-License-Identifier: Apache-2.0
// Exact bit allocation: a multiple-choice knapsack over each chunk's bits above 2.
#include "policy/compression/bit_allocation.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace llmsvc::policy {

double quant_error(int bits) {
  const double levels = std::ldexp(1.0, bits) - 1.0;
  return 1.0 / (levels * levels);
}

std::vector<uint8_t> allocate_bits(std::span<const double> density, double ratio, std::span<const uint8_t> max_bits,
                                   std::span<const uint8_t> widths) {
  const size_t n = density.size();
  std::vector<uint8_t> bits(n, 2);
  if (n == 0) return bits;
  ratio = std::clamp(ratio, 0.0, 1.0);
  // Bits above the floor of 2 per chunk that the budget allows, at most 6 per chunk.
  const int64_t budget = static_cast<int64_t>(std::floor(ratio * 8.0 * static_cast<double>(n) + 1e-9));
  const int64_t extra = std::clamp<int64_t>(budget - 2 * static_cast<int64_t>(n), 0, 6 * static_cast<int64_t>(n));
  if (extra == 0) return bits;
  const size_t W = static_cast<size_t>(extra) + 1;
  // Chunks are decided from the last to the first, so that when the table is read back from
  // the first chunk, ties (met first from the widest width) favour the earlier chunks.
  // best[w]: the least loss of chunks [i, n) within w extra bits; pick[i][w]: chunk i's width.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> best(W, 0.0), next(W);
  std::vector<uint8_t> pick(n * W, 2);
  for (size_t i = n; i-- > 0;) {
    const double d = std::max(0.0, density[i]);
    const int cap = max_bits.empty() ? 8 : std::min<int>(max_bits[i], 8);
    for (size_t w = 0; w < W; ++w) {
      double v = kInf;
      uint8_t choice = 2;
      for (uint8_t b : widths) {
        const size_t cost = static_cast<size_t>(b) - 2;
        if (b > cap || cost > w) continue;
        const double loss = d * quant_error(b) + best[w - cost];
        if (loss < v) {
          v = loss;
          choice = b;
        }
      }
      next[w] = v;
      pick[i * W + w] = choice;
    }
    best.swap(next);
  }
  size_t w = W - 1;
  for (size_t i = 0; i < n; ++i) {
    bits[i] = pick[i * W + w];
    w -= static_cast<size_t>(bits[i]) - 2;
  }
  return bits;
}

double allocation_loss(std::span<const double> density, std::span<const uint8_t> bits) {
  double loss = 0;
  for (size_t i = 0; i < density.size(); ++i) loss += std::max(0.0, density[i]) * quant_error(bits[i]);
  return loss;
}

}  // namespace llmsvc::policy
