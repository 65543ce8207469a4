// CPU attention over a chunked f16 KV cache (flash-attention style: one pass over the
// chunks with an online softmax, no score matrix).
//
// Work is cut into items of (tile of query tokens, kv heads, slice of the chunk list). A
// tile holds every query head that shares a kv head, so each K/V row loaded serves all of
// them (GQA) and, in prefill, several tokens at once. Prefill gives one kv head per item;
// decode gives all kv heads per item (each chunk is then read front to back) and, to keep
// the team busy, slices the chunk list and merges the slices' partial softmax states
// afterwards (flash-decoding). K/V stay where they are: f16 lanes are widened to f32 in
// registers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hal/cpu/thread_pool.h"
#include "hal/device.h"

namespace llmsvc::hal::cpu {

// Buffers reused across calls so steady-state decode allocates nothing. One per device
// (calls on one scratch must not overlap).
class AttentionScratch {
 public:
  AttentionScratch() = default;
  AttentionScratch(const AttentionScratch&) = delete;
  AttentionScratch& operator=(const AttentionScratch&) = delete;

 private:
  friend struct AttentionAccess;
  std::vector<std::vector<float>> per_thread_;      // queries, accumulators, scores, softmax state
  std::vector<std::vector<int32_t>> per_thread_i_;  // visible key ranges
  std::vector<float> partial_;                  // per item: m[rows], l[rows], acc[rows][head_dim]
  std::atomic<int64_t> next_item_{0};
};

// See Device::attention. q is n_tokens x n_head x head_dim, out likewise; q_pos[t] is the
// position of query t. A query sees a key iff key_pos <= q_pos (and key_pos > q_pos - window
// when p.sliding_window > 0); a query that sees no key gets zeros.
void attention(const float* q, int n_tokens, const int32_t* q_pos, const KvChunkView* chunks, int n_chunks,
               const AttentionParams& p, float* out, ThreadPool& pool, AttentionScratch& scratch);

}  // namespace llmsvc::hal::cpu
