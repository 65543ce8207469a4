// Tolerance-aware bit allocation (LLMS): give each KV chunk 8, 4 or 2 bits so that the
// context's average meets a global ratio of the 8-bit base, keeping the most information.
//
// Chunks are equal in size, so the budget is a count of bits: sum(bits_i) <= ratio * 8 * n.
// The loss of a chunk at b bits is density_i * err(b), with err(b) the relative mean square
// error of b-bit rounding (4^-b, up to a constant). Because every chunk weighs the same,
// an exchange argument shows an optimal assignment is monotone in density (denser chunks
// never get fewer bits), so the optimum is found exactly by trying every split
// (top n8 at 8 bits, next n4 at 4, the rest at 2) with prefix sums: O(n log n).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace llmsvc::policy {

// bits[i] in {8, 4, 2} for chunk i; ratio in (0, 1] (1: all 8 bits; 0.25 and below: all 2).
// Ties in density go to the earlier chunk.
std::vector<uint8_t> allocate_bits(std::span<const double> density, double ratio);

// The loss an assignment incurs (for tests and benchmarks).
double allocation_loss(std::span<const double> density, std::span<const uint8_t> bits);

}  // namespace llmsvc::policy
