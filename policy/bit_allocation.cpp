// Exact bit allocation by enumerating monotone splits over the density order.
#include "policy/bit_allocation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace llmsvc::policy {
namespace {

double err(int bits) { return std::ldexp(1.0, -2 * bits); }  // 4^-bits

}  // namespace

std::vector<uint8_t> allocate_bits(std::span<const double> density, double ratio) {
  const int64_t n = static_cast<int64_t>(density.size());
  std::vector<uint8_t> bits(density.size(), 2);
  if (n == 0) return bits;
  ratio = std::clamp(ratio, 0.0, 1.0);
  // Budget in units of 2 bits: each chunk costs 4 (8 bits), 2 (4 bits) or 1 (2 bits).
  const int64_t budget = static_cast<int64_t>(std::floor(ratio * 4.0 * static_cast<double>(n) + 1e-9));
  std::vector<int64_t> order(density.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return density[a] > density[b]; });
  // prefix[k]: total density of the k densest chunks.
  std::vector<double> prefix(density.size() + 1, 0.0);
  for (int64_t k = 0; k < n; ++k) prefix[k + 1] = prefix[k] + std::max(0.0, density[order[k]]);
  double best = INFINITY;
  int64_t best8 = 0, best4 = 0;
  for (int64_t n8 = 0; n8 <= n; ++n8) {
    // Cost: 4*n8 + 2*n4 + (n - n8 - n4) <= budget  =>  n4 <= budget - n - 3*n8.
    const int64_t room = budget - n - 3 * n8;
    if (room < 0) break;
    const int64_t n4 = std::min(room, n - n8);
    const double loss = prefix[n8] * err(8) + (prefix[n8 + n4] - prefix[n8]) * err(4) + (prefix[n] - prefix[n8 + n4]) * err(2);
    if (loss < best) {
      best = loss;
      best8 = n8;
      best4 = n4;
    }
  }
  for (int64_t k = 0; k < n; ++k) bits[order[k]] = k < best8 ? 8 : k < best8 + best4 ? 4 : 2;
  return bits;
}

double allocation_loss(std::span<const double> density, std::span<const uint8_t> bits) {
  double loss = 0;
  for (size_t i = 0; i < density.size(); ++i) loss += std::max(0.0, density[i]) * err(bits[i]);
  return loss;
}

}  // namespace llmsvc::policy
