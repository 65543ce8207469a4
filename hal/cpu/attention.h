// SPDX-License-Identifier: Apache-2.0
// CPU attention over a chunked KV cache (f16, or q8/q4/q3/q2 read in place), with the numerics of llama.cpp's CPU path
// (f16 KV cache, flash attention off) bit for bit, so that logits match it token for token:
//   q is rounded to f16; s_j = f16(q) . K_j in f32; s_j *= scale; m = max_j s_j;
//   e_j = exp(s_j - m) with ggml's vector expf; sum = sum_j e_j in double, one f32 lane sum
//   per 16 consecutive positions (ggml_vec_soft_max_f32 over the cache from cell 0);
//   p_j = f16(e_j * (float)(1 / sum)); out = sum_j p_j V_j in f32.
// The f32 sums follow llama.cpp's summation orders, which depend on how many query tokens a
// call has (a key's position picks its lane):
//   several tokens (llamafile's f16 GEMM): a score accumulates in 16 lanes over head_dim,
//     each lane one FMA chain, then folds like _mm512_reduce_add_ps; the V sum of an output
//     element accumulates in 16 chains, the key at position P in chain P % 16, folded alike;
//   one token (ggml_vec_dot_f16): 4 x 16 chains over steps of 64 (head_dim for scores, the
//     KV length padded to 32 cells for V), combined (c0 + c2) + (c1 + c3), folded, and what
//     is left past the last whole step added one by one in double.
// Narrower vectors keep the same 16-lane orders (a lane is then one of several vectors), so
// the results are llama.cpp's on every target with FMA (on x86: AVX2 and AVX-512).
//
// Two passes per query row: the scores of its visible keys go to a row buffer, then the
// softmax runs over the row, then the V pass. Work is cut into sets of rows. Prefill: a set
// is (tile of query tokens, kv head) and holds every query head of that kv head, so each K/V
// row loaded serves all of them (GQA) and several tokens; threads take sets first come, first
// served. Decode (too few sets for the team): one set of all rows, shared by the team, which
// splits the score pass by chunks, the softmax by rows and the V pass by output columns, with
// a barrier between. Every output element is computed by the same operations in the same
// order whatever the split, so results do not depend on the thread count nor on the other
// tokens of a batch. K/V stay where they are: f16 lanes are widened to f32 in registers.
//
// Compressed chunks (q8/q4/q3/q2, hal/kv_format.h) are read in place too, their codes widened
// in registers (hal/host/kv_codes-inl.h): the result is the same computation over the f32
// decoded values min + scale * code, q still rounded to f16 and weights to f16 as above.
// Keys (channel-wise): s_j = (f16(q) . min + (f16(q) * scale) . c_j) * scale_attn, the two
// q terms formed once per (chunk, row). Values (token-wise): v_j = min_j + scale_j * c_j
// decoded per vector. A set with any q chunk sums its V pass chunk by chunk in key order
// (llama.cpp has no such cache to match); any mix of formats works.
//
// Key mass (KvChunkView::mass): after the softmax every member adds its rows' weights, which
// are f16 values in [0, 1] and so exact integers in units of 2^-24, into its own int64 row;
// the rows are summed once at the end. Integer sums do not depend on the order, so the mass
// is the same bit for bit whatever the thread count or split.
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
  std::vector<std::vector<float>> per_thread_;      // queries and score rows of a set
  std::vector<std::vector<int32_t>> per_thread_i_;  // its key space and row spans
  std::vector<std::vector<const uint16_t*>> per_thread_v_;  // V row of each key of the set
  std::vector<float> shared_;                       // the same for the team's shared set
  std::vector<int32_t> shared_i_;
  std::vector<const uint16_t*> shared_v_;
  std::atomic<int64_t> next_set_{0};
  std::vector<std::vector<int64_t>> mass_;  // per member: key mass in units of 2^-24
  std::vector<int64_t*> mass_ptrs_;
  std::vector<int32_t> gkoff_;              // first key of each chunk in mass_ rows
};

// See Device::attention. q is n_tokens x n_head x head_dim, out likewise; q_pos[t] is the
// position of query t. A query sees a key iff key_pos <= q_pos (and key_pos > q_pos - window
// when p.sliding_window > 0); a query that sees no key gets zeros. Chunks are expected in
// increasing position order (as a KV sequence holds them); other orders stay correct but
// may cost more.
void attention(const float* q, int n_tokens, const int32_t* q_pos, const KvChunkView* chunks, int n_chunks,
               const AttentionParams& p, float* out, ThreadPool& pool, AttentionScratch& scratch);

}  // namespace llmsvc::hal::cpu
