// Exact bit allocation by enumerating monotone splits over the density order, per cap group.
#include "policy/bit_allocation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace llmsvc::policy {
namespace {

double err(int bits) { return std::ldexp(1.0, -2 * bits); }  // 4^-bits

// Chunks sorted by density (densest first, ties to the earlier chunk) and the prefix sums
// of their densities (negative densities count as 0).
struct Group {
  std::vector<int64_t> order;
  std::vector<double> prefix;
  int64_t size() const { return static_cast<int64_t>(order.size()); }
  // Total density of sorted entries [a, b).
  double sum(int64_t a, int64_t b) const { return prefix[b] - prefix[a]; }
};

Group make_group(std::span<const double> density, std::vector<int64_t> members) {
  Group g{std::move(members), {}};
  std::stable_sort(g.order.begin(), g.order.end(), [&](int64_t a, int64_t b) { return density[a] > density[b]; });
  g.prefix.assign(g.order.size() + 1, 0.0);
  for (size_t k = 0; k < g.order.size(); ++k) g.prefix[k + 1] = g.prefix[k] + std::max(0.0, density[g.order[k]]);
  return g;
}

}  // namespace

std::vector<uint8_t> allocate_bits(std::span<const double> density, double ratio, std::span<const uint8_t> max_bits) {
  const int64_t n = static_cast<int64_t>(density.size());
  std::vector<uint8_t> bits(density.size(), 2);
  if (n == 0) return bits;
  ratio = std::clamp(ratio, 0.0, 1.0);
  // Budget in units of 2 bits: each chunk costs 4 (8 bits), 2 (4 bits) or 1 (2 bits).
  const int64_t budget = static_cast<int64_t>(std::floor(ratio * 4.0 * static_cast<double>(n) + 1e-9));
  // Groups by cap: up to 8 bits (wide), up to 4 (mid); chunks capped at 2 have no choice.
  std::vector<int64_t> wide_members, mid_members;
  for (int64_t i = 0; i < n; ++i) {
    const int cap = max_bits.empty() ? 8 : max_bits[i];
    if (cap >= 8) wide_members.push_back(i);
    else if (cap >= 4) mid_members.push_back(i);
  }
  const Group wide = make_group(density, std::move(wide_members));
  const Group mid = make_group(density, std::move(mid_members));
  const int64_t a = wide.size(), m = mid.size();
  double best = INFINITY;
  int64_t best8 = 0, best4 = 0, best_mid4 = 0;
  for (int64_t n8 = 0; n8 <= a && budget - n - 3 * n8 >= 0; ++n8) {
    for (int64_t k4 = 0; k4 <= m; ++k4) {
      // Every chunk at 2 bits costs n; an 8-bit chunk adds 3, a 4-bit one 1. The rest of the
      // budget widens uncapped chunks to 4 bits (each widening lowers the loss).
      const int64_t room = budget - n - 3 * n8 - k4;
      if (room < 0) break;
      const int64_t n4 = std::min(room, a - n8);
      const double loss = wide.sum(0, n8) * err(8) + wide.sum(n8, n8 + n4) * err(4) + wide.sum(n8 + n4, a) * err(2) +
                          mid.sum(0, k4) * err(4) + mid.sum(k4, m) * err(2);
      if (loss < best) {
        best = loss;
        best8 = n8;
        best4 = n4;
        best_mid4 = k4;
      }
    }
  }
  for (int64_t k = 0; k < a; ++k) bits[wide.order[k]] = k < best8 ? 8 : k < best8 + best4 ? 4 : 2;
  for (int64_t k = 0; k < m; ++k) bits[mid.order[k]] = k < best_mid4 ? 4 : 2;
  return bits;
}

double allocation_loss(std::span<const double> density, std::span<const uint8_t> bits) {
  double loss = 0;
  for (size_t i = 0; i < density.size(); ++i) loss += std::max(0.0, density[i]) * err(bits[i]);
  return loss;
}

}  // namespace llmsvc::policy
