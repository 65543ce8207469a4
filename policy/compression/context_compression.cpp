// SPDX-License-Identifier: Apache-2.0
// Compression of a context's KV at the end of a call.
#include "policy/compression/context_compression.h"

#include <algorithm>

#include "policy/compression/bit_allocation.h"

namespace llmsvc::policy {

int compressible_chunks(const KvSequence& seq, int n_evaluated) {
  const int C = seq.geometry().chunk_tokens;
  return std::min(seq.n_chunks(), std::max(0, (n_evaluated - 1) / C));
}

std::vector<double> chunk_densities(const KvSequence& seq, int n) {
  std::vector<double> d(static_cast<size_t>(std::max(n, 0)));
  for (int c = 0; c < n; ++c) d[c] = seq.density(c);
  return d;
}

Status apply_bits(KvSequence& seq, std::span<const uint8_t> bits) {
  const int n = std::min(seq.n_chunks(), static_cast<int>(bits.size()));
  for (int c = 0; c < n; ++c) {
    if (seq.state(c) != ChunkState::resident) continue;
    if (seq.held_elsewhere(c)) continue;  // a fork inside a call reads it: it must not change
    const auto to = static_cast<hal::KvFormat>(bits[c]);
    if (hal::kv_format_bits(to) >= hal::kv_format_bits(seq.format(c))) continue;
    LLMSVC_RETURN_IF_ERROR(seq.compress(c, to));
  }
  return Status::Ok();
}

Status compress_context(KvSequence& seq, int n_evaluated, double ratio) {
  if (ratio <= 0) return Status::Ok();
  const int n = compressible_chunks(seq, n_evaluated);
  if (n == 0) return Status::Ok();
  // A young context keeps 8 bits: its densities are not yet known well enough to narrow a
  // chunk for good (see kAllocationHorizonChunks).
  if (n < kAllocationHorizonChunks) return apply_bits(seq, std::vector<uint8_t>(static_cast<size_t>(n), 8));
  // Chunks only narrow: cap each at its current width, so that budget the allocation cannot
  // use on a chunk narrowed by an earlier call goes to the others instead of being lost.
  std::vector<uint8_t> cap(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) cap[c] = static_cast<uint8_t>(hal::kv_format_bits(seq.format(c)));
  return apply_bits(seq, allocate_bits(chunk_densities(seq, n), ratio, cap));
}

}  // namespace llmsvc::policy
