// SPDX-License-Identifier: Apache-2.0
// KV swap of a sequence's chunks through its SwapStore: what a chunk file must hold to
// match a context (its meta), ahead-of-time swap-out of changed chunks, and loading chunks
// back. The engine decides when; this decides how.
//
// Every chunk holding evaluated positions is written, the partial last one included (as
// f16, its evaluated rows only): LCTRU evicts f16 chunks first, so the tail is the first to
// leave memory, and a chunk recomputed against compressed neighbours would not be the one
// that was computed before (restored chunks are bit-identical, recomputed ones are only
// when nothing is compressed). A file is rewritten whenever its chunk changed.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "policy/kv_chunk_store.h"
#include "policy/swap/chunk_file.h"
#include "policy/swap/swap_store.h"

namespace llmsvc::policy {

// Chained hashes of a context's tokens by chunk: hash c covers tokens [0, min((c+1)C, n)),
// so a chunk file never pairs with another history, nor with another prefix of it.
std::vector<uint64_t> chunk_token_hashes(std::span<const int32_t> tokens, int chunk_tokens);

// The meta of chunk c's file for a context whose positions [0, n_valid) are evaluated:
// positions [c*C, min((c+1)*C, n_valid)). `hashes` from chunk_token_hashes over those tokens.
ChunkMeta chunk_file_meta(const KvGeometry& geo, uint64_t model_hash, std::span<const uint64_t> hashes, int c,
                          int n_valid, hal::KvFormat format);

// Runs on the swap writer's thread when a chunk's write ends (after mark_stored on
// success): the chunk, the file's size, the write's status.
using ChunkStored = std::function<void(int chunk, uint64_t file_bytes, const Status& status)>;

struct SwapOutQueued {
  int chunks = 0;
  uint64_t payload_bytes = 0;  // before the lossless frames
  int deferred = 0;            // left for a later call: the writer's queue was full
  int over_quota = 0;          // not written: the owner's swap files are at their DiskQuota
};

// Encoded chunks waiting for the swap writer are memory outside the KV budget: past this
// many bytes queued, changed chunks are left for a later swap-out (evicted meanwhile, they
// are dropped and recomputed). Part of the engine's fixed memory overhead.
inline constexpr uint64_t kMaxPendingSwapBytes = uint64_t{32} << 20;

// Queues a write of every resident chunk of `seq` holding positions < n_valid whose file is
// not current, while fewer than max_pending bytes are queued. `tokens` holds at least n_valid tokens. Encoding runs on the calling thread
// (which owns `seq`); the writes are asynchronous. A chunk that cannot be queued is skipped
// (it stays without a current file); the first such error is returned after the rest are queued.
Result<SwapOutQueued> store_changed_chunks(KvSequence& seq, SwapStore& store, uint64_t model_hash,
                                           std::span<const int32_t> tokens, int n_valid, const ChunkStored& done,
                                           uint64_t max_pending = kMaxPendingSwapBytes);

// Writes resident chunk c to its file now, on the calling thread, and returns once it is
// durable: eviction's write-back when there is no ahead-of-time swap-out (KvSequence::
// WriteBack). Reads the chunk without the store's lock and does not mark the file current
// (the caller does: it may hold that lock).
Status store_chunk_now(const KvSequence& seq, SwapStore& store, uint64_t model_hash, std::span<const int32_t> tokens,
                       int n_valid, int c);

// Fills `chunks` (resident, in the format their files hold, just claimed) from their files,
// in batches; one status per chunk. A loaded chunk is marked current (mark_loaded); a
// failed one holds garbage and must be recomputed or released by the caller.
std::vector<Status> load_chunks(KvSequence& seq, SwapStore& store, uint64_t model_hash,
                                std::span<const int32_t> tokens, int n_valid, std::span<const int> chunks);

}  // namespace llmsvc::policy
