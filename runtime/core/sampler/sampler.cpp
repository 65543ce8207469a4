// SPDX-License-Identifier: Apache-2.0
// Sampler: llama.cpp's chain (penalties -> top_k -> top_p -> min_p -> temperature -> draw).
#include "runtime/core/sampler/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace llmsvc {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// NaN would break the strict weak ordering the sorts rely on; it can never be picked.
float sane(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// Index of the largest logit; ties go to the lowest index (llama.cpp's greedy keeps
// the first maximum). All -inf/NaN: index 0.
size_t argmax(std::span<const float> logits) {
  size_t best = 0;
  float best_logit = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_logit) {
      best_logit = logits[i];
      best = i;
    }
  }
  return best;
}

// A uniform double in [0, 1) from the top 53 bits: the same on every platform, unlike
// std::uniform_real_distribution whose algorithm the standard leaves open.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Top-p histogram: buckets of 0.1 nats below the max logit (a factor 0.905 in
// probability); the last one takes everything further down.
constexpr int kBuckets = 256;
constexpr float kBucketsPerNat = 10.0f;

int bucket_of(float max_logit, float logit) {
  float d = (max_logit - logit) * kBucketsPerNat;  // >= 0; +inf for -inf logits
  return d < static_cast<float>(kBuckets - 1) ? static_cast<int>(d) : kBuckets - 1;
}

// Larger logit first; equal logits by id, so results never depend on a sort's whims.
bool before(float la, int32_t ia, float lb, int32_t ib) { return la > lb || (la == lb && ia < ib); }

}  // namespace

Sampler::Sampler(const SamplerParams& params) : p_(params), rng_(params.seed) {}

void Sampler::apply_penalty(std::span<float> logits, std::span<const int32_t> history) {
  if (p_.repeat_penalty == 1.0f || p_.repeat_last_n == 0 || history.empty()) return;
  size_t n = p_.repeat_last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(p_.repeat_last_n));
  // Each distinct token is penalized once however often it occurs (llama.cpp's
  // penalty_repeat; its frequency/presence terms are not exposed).
  recent_.assign(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
  std::sort(recent_.begin(), recent_.end());
  recent_.erase(std::unique(recent_.begin(), recent_.end()), recent_.end());
  for (int32_t id : recent_) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    float& l = logits[static_cast<size_t>(id)];
    l = l <= 0.0f ? l * p_.repeat_penalty : l / p_.repeat_penalty;
  }
}

float Sampler::max_cand_logit() const {
  if (sorted_) return cand_.front().logit;
  float m = kNegInf;
  for (const Cand& c : cand_) m = std::max(m, c.logit);
  return m;
}

double Sampler::weights(float max_logit, double inv_t) {
  w_.resize(cand_.size());
  double total = 0;
  const auto t = static_cast<float>(inv_t);
  for (size_t i = 0; i < cand_.size(); ++i) {
    w_[i] = std::exp((cand_[i].logit - max_logit) * t);
    total += w_[i];
  }
  return total;
}

void Sampler::select_top_k(std::span<const float> logits, size_t k) {
  auto better = [](const Cand& a, const Cand& b) { return before(a.logit, a.id, b.logit, b.id); };
  cand_.clear();
  cand_.reserve(k);
  // A heap of the k best so far with the worst on top: one pass over the vocabulary,
  // and almost every logit is rejected by a single comparison with the top.
  for (size_t i = 0; i < logits.size(); ++i) {
    Cand c{sane(logits[i]), static_cast<int32_t>(i)};
    if (cand_.size() < k) {
      cand_.push_back(c);
      std::push_heap(cand_.begin(), cand_.end(), better);
    } else if (better(c, cand_.front())) {
      std::pop_heap(cand_.begin(), cand_.end(), better);
      cand_.back() = c;
      std::push_heap(cand_.begin(), cand_.end(), better);
    }
  }
  std::sort_heap(cand_.begin(), cand_.end(), better);
  sorted_ = true;
}

void Sampler::keep_top_p(double p) {
  const float max_logit = max_cand_logit();
  if (!std::isfinite(max_logit)) return;
  const double total = weights(max_logit, 1.0);
  const double target = p * total;
  auto walk = [&](size_t from, size_t to, double cum) -> size_t {  // index past the cut, or 0
    for (size_t i = from; i < to; ++i) {
      cum += std::exp(cand_[i].logit - max_logit);  // the very value weights() summed
      if (cum >= target) return i + 1;
    }
    return 0;
  };
  if (sorted_) {  // after top-k: already in order
    if (size_t cut = walk(0, cand_.size(), 0.0)) cand_.resize(cut);
    return;
  }
  // Mass per bucket finds the bucket where the cumulative mass reaches p; everything in
  // earlier buckets is in the nucleus whatever its order, so only that bucket is sorted.
  std::array<double, kBuckets> mass{};
  for (size_t i = 0; i < cand_.size(); ++i) mass[bucket_of(max_logit, cand_[i].logit)] += w_[i];
  int cut_bucket = kBuckets - 1;
  double below = 0;  // mass of the buckets before cut_bucket
  for (int b = 0; b < kBuckets; ++b) {
    if (below + mass[b] >= target) {
      cut_bucket = b;
      break;
    }
    below += mass[b];
  }
  auto first = std::partition(cand_.begin(), cand_.end(),
                              [&](const Cand& c) { return bucket_of(max_logit, c.logit) < cut_bucket; });
  auto last =
      std::partition(first, cand_.end(), [&](const Cand& c) { return bucket_of(max_logit, c.logit) == cut_bucket; });
  std::sort(first, last, [](const Cand& a, const Cand& b) { return before(a.logit, a.id, b.logit, b.id); });
  size_t from = static_cast<size_t>(first - cand_.begin());
  size_t to = static_cast<size_t>(last - cand_.begin());
  size_t cut = walk(from, to, below);
  cand_.resize(cut ? cut : to);  // no cut: rounding between the two sums; keep the bucket
}

void Sampler::keep_min_p(float p) {
  const float max_logit = max_cand_logit();
  if (!std::isfinite(max_logit)) return;
  // prob >= p * max_prob  <=>  logit >= max_logit + log(p). The max itself always stays;
  // erase_if is stable, so a sorted set stays sorted.
  const float threshold = max_logit + std::log(p);
  std::erase_if(cand_, [&](const Cand& c) { return c.logit < threshold; });
}

void Sampler::filter(std::span<const float> logits) {
  sorted_ = false;
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < logits.size()) {
    select_top_k(logits, static_cast<size_t>(p_.top_k));
  } else {
    cand_.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) cand_[i] = {sane(logits[i]), static_cast<int32_t>(i)};
  }
  if (p_.top_p < 1.0f) keep_top_p(std::max(0.0f, p_.top_p));
  if (p_.min_p > 0.0f) keep_min_p(p_.min_p);
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  if (logits.empty()) return -1;
  apply_penalty(logits, history);
  if (p_.temperature <= 0.0f) return static_cast<int32_t>(argmax(logits));
  filter(logits);
  const float max_logit = max_cand_logit();
  // All -inf, or +inf present: the softmax is undefined; the largest logit wins.
  if (!std::isfinite(max_logit)) return static_cast<int32_t>(argmax(logits));
  // Temperature folds into the softmax: exp((l - max) / T).
  const double total = weights(max_logit, 1.0 / static_cast<double>(p_.temperature));
  const double u = uniform01(rng_) * total;
  double cum = 0;
  size_t last_nonzero = 0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    if (w_[i] <= 0) continue;
    cum += w_[i];
    last_nonzero = i;
    if (u < cum) return cand_[i].id;
  }
  return cand_[last_nonzero].id;  // u landed past the rounded sum
}

std::vector<TokenProb> Sampler::distribution(std::span<float> logits, std::span<const int32_t> history) {
  std::vector<TokenProb> out;
  if (logits.empty()) return out;
  apply_penalty(logits, history);
  if (p_.temperature > 0.0f) {
    filter(logits);
    const float max_logit = max_cand_logit();
    if (std::isfinite(max_logit)) {
      const double total = weights(max_logit, 1.0 / static_cast<double>(p_.temperature));
      out.reserve(cand_.size());
      for (size_t i = 0; i < cand_.size(); ++i) out.push_back({cand_[i].id, static_cast<float>(w_[i] / total)});
      return out;
    }
  }
  out.push_back({static_cast<int32_t>(argmax(logits)), 1.0f});
  return out;
}

}  // namespace llmsvc
