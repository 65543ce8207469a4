// Tolerance-aware bit allocation (LLMS): give each KV chunk 8, 4 or 2 bits so that the
// context's average meets a global ratio of the 8-bit base, keeping the most information.
//
// Chunks are equal in size, so the budget is a count of bits: sum(bits_i) <= ratio * 8 * n.
// The loss of a chunk at b bits is density_i * err(b), with err(b) the relative mean square
// error of b-bit rounding (4^-b, up to a constant). Because every chunk weighs the same,
// an exchange argument shows an optimal assignment is monotone in density among chunks that
// may take the same widths (denser chunks never get fewer bits), so the optimum is found
// exactly by trying every split with prefix sums.
//
// Chunks only narrow (a compressed chunk cannot regain bits), so a chunk may be capped at its
// current width: without caps every split of the density order is tried (top n8 at 8 bits,
// next n4 at 4, the rest at 2: O(n log n)); with caps, the chunks capped at 4 are a second
// monotone group and every pair (8-bit count among the uncapped, 4-bit count among those
// capped at 4) is tried, the rest of the budget going to 4-bit uncapped chunks: O(n^2) at
// worst. Budget a cap makes unusable goes to the other chunks instead of being lost.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace llmsvc::policy {

// bits[i] in {8, 4, 2} for chunk i; ratio in (0, 1] (1: all 8 bits; 0.25 and below: all 2).
// max_bits: empty (no caps), or each chunk's widest allowed width (its current format's bits:
// 16, 8, 4 or 2; 16 allows 8). Ties in density go to the earlier chunk.
std::vector<uint8_t> allocate_bits(std::span<const double> density, double ratio,
                                   std::span<const uint8_t> max_bits = {});

// The loss an assignment incurs (for tests and benchmarks).
double allocation_loss(std::span<const double> density, std::span<const uint8_t> bits);

}  // namespace llmsvc::policy
