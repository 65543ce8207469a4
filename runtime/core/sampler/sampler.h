// SPDX-License-Identifier: Apache-2.0
// Sampler: picks the next token from logits (greedy, temperature, top-k, top-p, min-p,
// repetition penalty). A seed makes a run reproducible.
//
// The chain is llama.cpp's common sampler order: penalties -> top_k -> top_p -> min_p ->
// temperature -> draw. So top-p and min-p judge the untempered distribution, as there.
// Greedy (temperature <= 0) is penalties -> argmax, ties going to the lowest id.
// Cost per token is O(n_vocab): top-k selects with a bounded heap, top-p finds its cut
// with a histogram of log-probabilities and sorts only the bucket the cut falls in;
// there is no sort of the vocabulary.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace llmsvc {

// Defaults switch every filter off (greedy). llama.cpp's common defaults, for reference:
// temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.0, repeat_last_n 64.
struct SamplerParams {
  uint64_t seed = 0;
  float temperature = 0.0f;     // <= 0: greedy
  int32_t top_k = 0;            // <= 0: off
  float top_p = 1.0f;           // >= 1: off
  float min_p = 0.0f;           // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off. Positive logits divided, the others multiplied.
  int32_t repeat_last_n = 64;   // history tokens looked back (0: off, < 0: all of it)
};

// One entry of the distribution a sample is drawn from.
struct TokenProb {
  int32_t id;
  float p;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);

  // Picks a token. `logits` (n_vocab, not empty) is modified in place by the penalty.
  // `history`: the tokens so far (prompt and generated); the last repeat_last_n count.
  // NaN logits are treated as -inf.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

  // The distribution `sample` would draw from, after penalty, filters and temperature:
  // probabilities sum to 1; greedy gives the argmax with p = 1. Consumes no randomness.
  // Ordered by decreasing probability after a top-k cut (and no top-p), else unspecified.
  std::vector<TokenProb> distribution(std::span<float> logits, std::span<const int32_t> history);

  const SamplerParams& params() const { return p_; }

 private:
  struct Cand {
    float logit;
    int32_t id;
  };

  void apply_penalty(std::span<float> logits, std::span<const int32_t> history);
  // Runs top_k -> top_p -> min_p over all of `logits`, leaving survivors in cand_.
  void filter(std::span<const float> logits);
  void select_top_k(std::span<const float> logits, size_t k);
  void keep_top_p(double p);
  void keep_min_p(float p);
  float max_cand_logit() const;
  // exp((logit - max) / T) for each candidate into w_; returns their sum.
  double weights(float max_logit, double inv_t);

  SamplerParams p_;
  std::mt19937_64 rng_;
  std::vector<Cand> cand_;       // reused scratch: the surviving candidates
  bool sorted_ = false;          // cand_ is in decreasing order (after a top-k cut)
  std::vector<float> w_;         // reused scratch: unnormalized probabilities of cand_
  std::vector<int32_t> recent_;  // reused scratch: distinct tokens for the penalty
};

}  // namespace llmsvc
