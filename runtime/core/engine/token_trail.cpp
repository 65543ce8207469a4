// SPDX-License-Identifier: Apache-2.0
// TokenTrail and the log-sum-exp behind a token's log-probability.
#include "runtime/core/engine/token_trail.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace llmsvc {

float log_sum_exp(std::span<const float> logits) {
  float max = -std::numeric_limits<float>::infinity();
  for (float x : logits)
    if (x > max) max = x;  // NaN compares false: skipped
  if (!std::isfinite(max)) return max;
  double sum = 0;  // double: 49k terms in float would lose the small ones
  for (float x : logits)
    if (x == x) sum += std::exp(static_cast<double>(x) - max);
  return max + static_cast<float>(std::log(sum));
}

float token_logprob(std::span<const float> logits, int32_t t) {
  if (t < 0 || static_cast<size_t>(t) >= logits.size()) return std::numeric_limits<float>::lowest();
  const float lp = logits[static_cast<size_t>(t)] - log_sum_exp(logits);
  return std::isfinite(lp) ? std::min(lp, 0.0f) : std::numeric_limits<float>::lowest();
}

TokenPiece TokenTrail::take(std::string_view text, int32_t token) {
  // The piece's spans stay valid until the next take(): the callback may read them then.
  taken_ids_.swap(ids_);
  taken_lps_.swap(lps_);
  ids_.clear();
  lps_.clear();
  return TokenPiece{text, token, taken_ids_, taken_lps_};
}

}  // namespace llmsvc
