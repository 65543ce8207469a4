// SPDX-License-Identifier: Apache-2.0
// Tolerance-aware bit allocation (LLMS): give each KV chunk one of the widths {8, 4, 3, 2}
// so that the context's average meets a global ratio of the 8-bit base, keeping the most
// information.
//
// Chunks are equal in size, so the budget is a count of bits: sum(bits_i) <= ratio * 8 * n.
// The loss of a chunk at b bits is density_i * err(b), with err(b) = 1 / (2^b - 1)^2, the
// relative mean square error of the codec's b-bit rounding (its step is range / (2^b - 1)).
// The optimum is found exactly as a multiple-choice knapsack over the bits above 2 per
// chunk: O(n * budget) = O(n^2) time, O(n^2) bytes of choices (n = 256 chunks: about 0.4 MB).
//
// Chunks only narrow (a compressed chunk cannot regain bits), so a chunk may be capped at its
// current width; budget a cap makes unusable goes to the other chunks instead of being lost.
// The 3-bit width lets a dense chunk (the attention sink above all) keep 8 bits paid by
// chunks that lose little at 3 bits, where with {8, 4, 2} two chunks had to drop to 2.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace llmsvc::policy {

// The widths a chunk may get, widest first; 2 must be among them (every chunk's floor).
inline constexpr uint8_t kKvWidths[] = {8, 4, 3, 2};

// bits[i] in `widths` for chunk i; ratio in (0, 1] (1: all 8 bits; 0.25 and below: all 2).
// max_bits: empty (no caps), or each chunk's widest allowed width (its current format's bits:
// 16, 8, 4, 3 or 2; 16 allows 8). Among equal losses the earlier chunks get the wider widths.
std::vector<uint8_t> allocate_bits(std::span<const double> density, double ratio,
                                   std::span<const uint8_t> max_bits = {},
                                   std::span<const uint8_t> widths = kKvWidths);

// err(b) above.
double quant_error(int bits);

// The loss an assignment incurs (for tests and benchmarks).
double allocation_loss(std::span<const double> density, std::span<const uint8_t> bits);

}  // namespace llmsvc::policy
