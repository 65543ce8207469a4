// SPDX-License-Identifier: Apache-2.0
// Compression of a context's KV at the end of a call (LLMS tolerance-aware compression):
// which chunks may be compressed, the bit allocation over them, and applying it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "policy/kv_chunk_store.h"

namespace llmsvc::policy {

// Chunks [0, n) that a call's end may compress: full chunks, without the one that holds the
// last evaluated position (an empty prompt re-evaluates it, so it stays f16).
int compressible_chunks(const KvSequence& seq, int n_evaluated);

// Information density of chunks [0, n) (KvSequence::density).
std::vector<double> chunk_densities(const KvSequence& seq, int n);

// Narrows resident chunk c to bits[c] bits (8, 4 or 2) where that is narrower than its
// format; a chunk never widens (bits lost to an earlier, lower density are not regained).
// Non-resident chunks are skipped. Stops at the first failure (e.g. out of budget for the
// new form), leaving that chunk and the later ones as they were.
Status apply_bits(KvSequence& seq, std::span<const uint8_t> bits);

// Below this many compressible chunks, compress_context narrows chunks to 8 bits only (q8
// costs +0.016 % perplexity); from it on, the allocation meets the ratio. Chunks only narrow,
// and a young context's densities are not yet informative: allocating at the first call
// (3 chunks for 64 tokens) fixed the attention sink (chunk 0, which ends ~11x the median
// density and carries all of int4's loss) at 4 bits for good. So a context shorter than
// 16 chunks (256 tokens at C = 16) holds its KV at 8 bits rather than ratio x 8.
inline constexpr int kAllocationHorizonChunks = 16;

// The whole step: densities of the compressible chunks, allocate_bits at `ratio` (of the
// 8-bit base) with each chunk capped at its current width, apply_bits; 8 bits only below
// kAllocationHorizonChunks. ratio <= 0: nothing.
Status compress_context(KvSequence& seq, int n_evaluated, double ratio);

}  // namespace llmsvc::policy
