// SPDX-License-Identifier: Apache-2.0
// Sampler: greedy, penalty, each filter on known distributions, chain order, seeded draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/core/sampler/sampler.h"

namespace llmsvc {
namespace {

// Logits whose softmax is exactly `probs`.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::map<int32_t, double> as_map(const std::vector<TokenProb>& d) {
  std::map<int32_t, double> m;
  for (const auto& t : d) m[t.id] = t.p;
  return m;
}

SamplerParams sampling(float temperature) {
  SamplerParams p;
  p.temperature = temperature;
  p.seed = 1234;
  return p;
}

TEST(Sampler, GreedyPicksArgmax) {
  Sampler s(SamplerParams{});
  std::vector<float> l{0.1f, 3.0f, -2.0f, 2.9f};
  EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(Sampler, GreedyTiesGoToLowestId) {
  Sampler s(SamplerParams{});
  std::vector<float> l{1.0f, 5.0f, 2.0f, 5.0f, 5.0f};
  EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(Sampler, GreedyIgnoresNaNAndFilters) {
  SamplerParams p;
  p.top_k = 1;
  p.top_p = 0.1f;
  p.min_p = 0.9f;
  Sampler s(p);
  std::vector<float> l{std::numeric_limits<float>::quiet_NaN(), 1.0f, 4.0f};
  EXPECT_EQ(s.sample(l, {}), 2);
  auto d = s.distribution(l, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, 2);
  EXPECT_EQ(d[0].p, 1.0f);
}

TEST(Sampler, EmptyLogits) {
  Sampler s(sampling(1.0f));
  EXPECT_EQ(s.sample({}, {}), -1);
  EXPECT_TRUE(s.distribution({}, {}).empty());
}

TEST(Sampler, RepeatPenaltyDividesPositiveMultipliesNegative) {
  SamplerParams p;
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> l{2.0f, -1.0f, 1.5f, 0.0f};
  std::vector<int32_t> hist{0, 0, 1, 3};  // token 0 twice: still penalized once
  EXPECT_EQ(s.sample(l, hist), 2);
  EXPECT_FLOAT_EQ(l[0], 1.0f);
  EXPECT_FLOAT_EQ(l[1], -2.0f);
  EXPECT_FLOAT_EQ(l[2], 1.5f);
  EXPECT_FLOAT_EQ(l[3], 0.0f);
}

TEST(Sampler, RepeatPenaltyWindow) {
  SamplerParams p;
  p.repeat_penalty = 4.0f;
  p.repeat_last_n = 2;
  Sampler s(p);
  std::vector<float> l{4.0f, 3.0f, 2.0f};
  std::vector<int32_t> hist{0, 1, 2};  // only 1 and 2 are in the window
  EXPECT_EQ(s.sample(l, hist), 0);
  EXPECT_FLOAT_EQ(l[0], 4.0f);
  EXPECT_FLOAT_EQ(l[1], 0.75f);
  EXPECT_FLOAT_EQ(l[2], 0.5f);

  p.repeat_last_n = 0;  // off
  Sampler off(p);
  std::vector<float> l2{4.0f, 3.0f};
  off.sample(l2, hist);
  EXPECT_FLOAT_EQ(l2[0], 4.0f);

  p.repeat_last_n = -1;  // whole history
  Sampler all(p);
  std::vector<float> l3{4.0f, 3.0f, 2.0f};
  all.sample(l3, hist);
  EXPECT_FLOAT_EQ(l3[0], 1.0f);
}

TEST(Sampler, RepeatPenaltyIgnoresOutOfRangeIds) {
  SamplerParams p;
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> l{1.0f, 2.0f};
  std::vector<int32_t> hist{-5, 7, 1};
  EXPECT_EQ(s.sample(l, hist), 0);
  EXPECT_FLOAT_EQ(l[1], 1.0f);
}

TEST(Sampler, TemperatureOneIsSoftmax) {
  Sampler s(sampling(1.0f));
  auto l = logits_of({0.5, 0.3, 0.2});
  auto d = as_map(s.distribution(l, {}));
  EXPECT_NEAR(d[0], 0.5, 1e-6);
  EXPECT_NEAR(d[1], 0.3, 1e-6);
  EXPECT_NEAR(d[2], 0.2, 1e-6);
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  auto l = logits_of({0.5, 0.3, 0.2});
  Sampler cold(sampling(0.5f));  // p^2, renormalized
  auto c = as_map(cold.distribution(l, {}));
  EXPECT_NEAR(c[0], 0.25 / 0.38, 1e-6);
  EXPECT_NEAR(c[2], 0.04 / 0.38, 1e-6);
  Sampler hot(sampling(2.0f));  // sqrt(p), renormalized
  auto h = as_map(hot.distribution(l, {}));
  double z = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.2);
  EXPECT_NEAR(h[0], std::sqrt(0.5) / z, 1e-6);
  EXPECT_NEAR(h[2], std::sqrt(0.2) / z, 1e-6);
}

TEST(Sampler, TopKKeepsTheKLargestRenormalized) {
  SamplerParams p = sampling(1.0f);
  p.top_k = 2;
  Sampler s(p);
  auto l = logits_of({0.1, 0.4, 0.2, 0.3});
  auto d = s.distribution(l, {});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, 1);  // sorted by decreasing probability
  EXPECT_EQ(d[1].id, 3);
  EXPECT_NEAR(d[0].p, 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(d[1].p, 0.3 / 0.7, 1e-6);
}

TEST(Sampler, TopKLargerThanVocabIsOff) {
  SamplerParams p = sampling(1.0f);
  p.top_k = 100;
  Sampler s(p);
  auto l = logits_of({0.1, 0.4, 0.5});
  EXPECT_EQ(s.distribution(l, {}).size(), 3u);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  auto l = logits_of({0.15, 0.5, 0.05, 0.3});
  SamplerParams p = sampling(1.0f);
  p.top_p = 0.75f;  // 0.5 + 0.3 reaches it
  auto d = as_map(Sampler(p).distribution(l, {}));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d[1], 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(d[3], 0.3 / 0.8, 1e-6);
  p.top_p = 0.85f;  // needs the third
  EXPECT_EQ(Sampler(p).distribution(l, {}).size(), 3u);
  p.top_p = 0.0f;  // always at least one
  auto one = Sampler(p).distribution(l, {});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].id, 1);
}

TEST(Sampler, MinPDropsTokensBelowFractionOfMax) {
  auto l = logits_of({0.05, 0.5, 0.3, 0.15});
  SamplerParams p = sampling(1.0f);
  p.min_p = 0.2f;  // threshold 0.1
  auto d = as_map(Sampler(p).distribution(l, {}));
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.count(0), 0u);
  EXPECT_NEAR(d[1], 0.5 / 0.95, 1e-6);
}

// llama.cpp's order: top_k renormalizes before top_p judges the mass.
TEST(Sampler, TopPSeesTheTopKDistribution) {
  auto l = logits_of({0.4, 0.3, 0.2, 0.1});
  SamplerParams p = sampling(1.0f);
  p.top_p = 0.5f;
  EXPECT_EQ(Sampler(p).distribution(l, {}).size(), 2u);  // 0.4 < 0.5 on the full set
  p.top_k = 2;                                           // 0.4/0.7 >= 0.5
  EXPECT_EQ(Sampler(p).distribution(l, {}).size(), 1u);
}

// Temperature comes last: min_p and top_p judge the untempered distribution.
TEST(Sampler, FiltersIgnoreTemperature) {
  auto l = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplerParams p = sampling(100.0f);
  p.min_p = 0.2f;
  EXPECT_EQ(Sampler(p).distribution(l, {}).size(), 3u);
  p.min_p = 0.0f;
  p.top_p = 0.75f;
  EXPECT_EQ(Sampler(p).distribution(l, {}).size(), 2u);
}

// Top-p over a large vocabulary (flat to peaked) against a full sort done here.
TEST(Sampler, TopPLargeVocabMatchesFullSort) {
  const size_t n = 100000;
  for (float sigma : {0.3f, 3.0f, 12.0f}) {
    std::mt19937 gen(7);
    std::normal_distribution<float> normal(0.0f, sigma);
    std::vector<float> l(n);
    for (auto& x : l) x = normal(gen);
    for (float top_p : {0.5f, 0.9f, 0.99f}) {
      std::vector<int32_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(),
                [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
      double total = 0;
      for (float x : l) total += std::exp(x - l[order[0]]);  // float exp, as the sampler
      double cum = 0;
      size_t want = 0;
      while (want < n) {
        cum += std::exp(l[order[want]] - l[order[0]]);
        ++want;
        if (cum >= top_p * total) break;
      }
      SamplerParams p = sampling(1.0f);
      p.top_p = top_p;
      std::vector<float> copy = l;
      auto d = Sampler(p).distribution(copy, {});
      ASSERT_EQ(d.size(), want) << "top_p " << top_p;
      std::vector<int32_t> got;
      for (const auto& t : d) got.push_back(t.id);
      std::sort(got.begin(), got.end());
      std::vector<int32_t> expect(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(want));
      std::sort(expect.begin(), expect.end());
      EXPECT_EQ(got, expect);
      double sum = 0;
      for (const auto& t : d) sum += t.p;
      EXPECT_NEAR(sum, 1.0, 1e-4);
    }
  }
}

// Equal logits: the nucleus is the lowest ids, as a sort with id tie-break gives.
TEST(Sampler, TopPTiesGoToLowestIds) {
  std::vector<float> l(1000, 0.25f);
  SamplerParams p = sampling(1.0f);
  p.top_p = 0.5f;
  auto d = Sampler(p).distribution(l, {});
  ASSERT_EQ(d.size(), 500u);
  for (const auto& t : d) EXPECT_LT(t.id, 500);
}

TEST(Sampler, TopKLargeVocabSamplesOnlyFromTheTop) {
  const size_t n = 256000;
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> uni(-10.0f, 10.0f);
  std::vector<float> l(n);
  for (auto& x : l) x = uni(gen);
  std::vector<float> sorted = l;
  std::nth_element(sorted.begin(), sorted.begin() + 39, sorted.end(), std::greater<>());
  const float kth = sorted[39];
  SamplerParams p = sampling(1.5f);
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.01f;
  Sampler s(p);
  for (int i = 0; i < 200; ++i) {
    std::vector<float> copy = l;
    int32_t id = s.sample(copy, {});
    ASSERT_GE(id, 0);
    ASSERT_GE(l[static_cast<size_t>(id)], kth);
  }
}

TEST(Sampler, NeverSamplesImpossibleTokens) {
  const float ninf = -std::numeric_limits<float>::infinity();
  Sampler s(sampling(1.0f));
  for (int i = 0; i < 1000; ++i) {
    std::vector<float> l{ninf, 0.0f, ninf, 0.0f, std::numeric_limits<float>::quiet_NaN()};
    int32_t id = s.sample(l, {});
    ASSERT_TRUE(id == 1 || id == 3) << id;
  }
}

TEST(Sampler, SameSeedSameTokens) {
  auto l = logits_of({0.2, 0.2, 0.2, 0.2, 0.2});
  auto run = [&](uint64_t seed) {
    SamplerParams p = sampling(1.0f);
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) {
      std::vector<float> copy = l;
      out.push_back(s.sample(copy, {}));
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

// Frequencies of 200k seeded draws against the tempered softmax. Each bound is > 10
// standard deviations wide, so only a wrong distribution fails.
TEST(Sampler, DrawFrequenciesMatchTemperedSoftmax) {
  const int n = 200000;
  auto l = logits_of({0.5, 0.3, 0.15, 0.05});
  for (float t : {1.0f, 0.5f, 2.0f}) {
    SamplerParams p = sampling(t);
    p.seed = 2024;
    Sampler s(p);
    std::vector<double> want(4);
    double z = 0;
    for (int i = 0; i < 4; ++i) z += want[i] = std::exp(l[i] / t);
    std::vector<int> count(4);
    for (int i = 0; i < n; ++i) {
      std::vector<float> copy = l;
      ++count[static_cast<size_t>(s.sample(copy, {}))];
    }
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(count[i] / double(n), want[i] / z, 0.012) << "T=" << t << " id " << i;
  }
}

TEST(Sampler, DrawFrequenciesAfterFilters) {
  const int n = 100000;
  auto l = logits_of({0.05, 0.5, 0.3, 0.15});
  SamplerParams p = sampling(1.0f);
  p.top_k = 3;
  p.top_p = 0.7f;  // of {0.5, 0.3, 0.15} / 0.95: cum 0.53, 0.84 -> ids 1 and 2
  Sampler s(p);
  std::vector<int> count(4);
  for (int i = 0; i < n; ++i) {
    std::vector<float> copy = l;
    ++count[static_cast<size_t>(s.sample(copy, {}))];
  }
  EXPECT_EQ(count[0], 0);
  EXPECT_EQ(count[3], 0);
  EXPECT_NEAR(count[1] / double(n), 0.5 / 0.8, 0.015);
  EXPECT_NEAR(count[2] / double(n), 0.3 / 0.8, 0.015);
}

}  // namespace
}  // namespace llmsvc
