// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for chunk tables (runtime/core/persist/chunk_table.h): any byte string must
// either be refused with Code::io naming the table, or parse into a table that keeps the
// format's rules and encodes (at the current version) to bytes that parse to the same table.
//
// Random mutations almost never keep the trailing checksum valid, so each input is also run
// "resealed", its checksum recomputed, as a forger would: that copy reaches the field checks.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include <xxhash.h>

#include "hal/kv_format.h"
#include "runtime/core/persist/chunk_table.h"

namespace {

using namespace llmsvc;
using namespace llmsvc::persist;

void check(bool ok) {
  if (!ok) std::abort();
}

void exercise(std::span<const uint8_t> bytes) {
  auto t = parse_chunk_table(bytes);
  if (!t.ok()) {
    check(t.status().code() == Code::io);
    check(t.status().message().rfind("chunk table: ", 0) == 0);
    return;
  }
  const size_t C = static_cast<size_t>(t->chunk_tokens);
  check(t->chunk_tokens > 0 && t->chunk_tokens <= ChunkTable::kMaxChunkTokens && t->n_evaluated >= 0);
  check(t->chunks.size() == static_cast<size_t>((int64_t{t->n_evaluated} + t->chunk_tokens - 1) / t->chunk_tokens));
  for (const ChunkTable::Entry& e : t->chunks) {
    check(hal::kv_format_valid(e.format) && e.level >= 1 && e.level <= 100);
    check(e.mass.size() == C && e.seen.size() == C);
    for (float m : e.mass) check(std::isfinite(m) && m >= 0);
  }
  auto again = encode_chunk_table(*t);
  check(again.ok());
  auto back = parse_chunk_table(*again);
  check(back.ok());
  check(back->chunk_tokens == t->chunk_tokens && back->model_hash == t->model_hash && back->n_evaluated == t->n_evaluated);
  check(back->chunks.size() == t->chunks.size());
  for (size_t c = 0; c < t->chunks.size(); ++c) {
    const ChunkTable::Entry &a = t->chunks[c], &b = back->chunks[c];
    check(a.format == b.format && a.level == b.level && a.mass == b.mass && a.seen == b.seen);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  exercise(in);
  if (size >= 8) {
    std::vector<uint8_t> sealed(in.begin(), in.end());
    const uint64_t h = XXH3_64bits(sealed.data(), size - 8);
    for (int i = 0; i < 8; ++i) sealed[size - 8 + i] = static_cast<uint8_t>(h >> (8 * i));
    exercise(sealed);
  }
  return 0;
}
