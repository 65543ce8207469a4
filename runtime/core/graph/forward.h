// SPDX-License-Identifier: Apache-2.0
// Forward: the transformer forward pass of a Model over a context's chunked KV cache.
//
// Tokens are processed in micro-batches; each layer's new K/V rows are written in place
// into the sequence's chunks (never copied), then attention runs over the chunk list.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "hal/device.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/model/model.h"

namespace llmsvc {

class Forward {
 public:
  // max_batch: tokens per micro-batch (scratch is sized for it).
  Forward(const Model& model, hal::Device& device, int max_batch = 256);

  // Evaluates `tokens` at positions [pos0, pos0 + n) of `seq`, which must already hold
  // positions [0, pos0). Logits: of the last token only (n_vocab floats), or of every
  // token (n * n_vocab) when all_logits. Attention mass is tracked (KvSequence::mass).
  // Code::out_of_memory if the KV budget is exhausted.
  Status eval(policy::KvSequence& seq, std::span<const int32_t> tokens, int pos0, bool all_logits,
              std::vector<float>& logits);

  // Recomputes the K/V of tokens at arbitrary increasing `positions` (the chunks of a
  // context that were dropped), attending causally to every position < n_valid that the
  // sequence holds or that this call computes. Their chunks must be resident f16. No
  // logits, no attention mass.
  //
  // before_layer(il), when given, runs before layer il of the first micro-batch: the
  // swap-recompute pipeline waits there for layer il of the chunks it loads (which the
  // attention reads) and starts reading layer il + 1, so I/O overlaps compute. A non-OK
  // status stops the recompute and is returned.
  using LayerHook = std::function<Status(int layer)>;
  Status recompute(policy::KvSequence& seq, std::span<const int32_t> tokens, std::span<const int32_t> positions,
                   int n_valid, const LayerHook& before_layer = {});

  int max_batch() const { return max_batch_; }

 private:
  // One micro-batch of n tokens at pos_[0..n) through every layer; keys visible up to n_valid.
  // The last layer continues after attention with the last n_out rows only (moved to the front
  // of x_), as llama.cpp does (inp_out_ids); recompute wants none.
  Status layers(policy::KvSequence& seq, int n, int n_valid, bool track_mass, int n_out,
                const LayerHook* before_layer = nullptr);
  void layer(int il, policy::KvSequence& seq, int n, int n_valid, bool track_mass, int n_out);

  const Model& model_;
  hal::Device& dev_;
  const ModelConfig& cfg_;
  int max_batch_;
  // Scratch, sized once for max_batch tokens.
  std::vector<float> x_, h_, q_, k_, v_, attn_, o_, gate_, up_;
  std::vector<int32_t> pos_;
  std::vector<hal::KvChunkView> views_;
};

}  // namespace llmsvc
