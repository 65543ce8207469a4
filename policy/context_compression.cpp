// Compression of a context's KV at the end of a call.
#include "policy/context_compression.h"

#include <algorithm>

#include "policy/bit_allocation.h"

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
  const std::vector<double> density = chunk_densities(seq, n);
  return apply_bits(seq, allocate_bits(density, ratio));
}

}  // namespace llmsvc::policy
