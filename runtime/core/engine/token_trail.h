// SPDX-License-Identifier: Apache-2.0
// TokenTrail: the token ids (and their log-probabilities) sampled since the last streamed
// piece, so that each piece carries exactly the tokens behind it (CallParams::on_tokens).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/core/engine/call_types.h"

namespace llmsvc {

// log(sum(exp(logits))), NaN logits counted as -inf (as the sampler treats them).
float log_sum_exp(std::span<const float> logits);
// Token t's log-probability under the softmax of `logits`: finite (the lowest float for a token
// the model gives no chance), so it always travels (the protocol takes finite numbers only).
float token_logprob(std::span<const float> logits, int32_t t);

class TokenTrail {
 public:
  // `logprobs`: keep each token's log-probability (the caller passes it to add()).
  explicit TokenTrail(bool logprobs) : logprobs_(logprobs) {}

  bool wants_logprobs() const { return logprobs_; }
  void add(int32_t id, float logprob) {
    ids_.push_back(id);
    if (logprobs_) lps_.push_back(logprob);
  }
  bool empty() const { return ids_.empty(); }
  // The piece `text` with the tokens since the last one; the trail starts again.
  TokenPiece take(std::string_view text, int32_t token);

 private:
  bool logprobs_;
  std::vector<int32_t> ids_, taken_ids_;
  std::vector<float> lps_, taken_lps_;
};

}  // namespace llmsvc
