// Attention over chunked f16 KV against a double-precision reference: chunk layouts (partial
// last chunk, chunks bigger than a key block, gaps in positions), GQA ratios, sliding
// window, positions not starting at 0, multi-token prefill with the causal mask, 1 and 2
// threads, every SIMD target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "hal/cpu/cpu_device.h"
#include "hal/cpu/quant/fp16.h"
#include "simd_targets.h"

namespace llmsvc::hal::cpu {
namespace {

struct Case {
  const char* name;
  int n_head, n_head_kv, head_dim;
  int n_keys;      // keys in the cache
  int chunk_cap;   // tokens per chunk (the last one may be partial)
  int first_pos;   // position of the first key
  int gap;         // extra positions skipped between chunks (0: contiguous)
  int n_tokens;    // queries: the last n_tokens keys' positions (+ query_shift)
  int query_shift;
  int window;
  float q_amp;     // query magnitude (large = peaky softmax)
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// A KV cache of one layer as the engine holds it: separately allocated chunks.
struct Cache {
  std::vector<std::vector<uint16_t>> k, v;
  std::vector<KvChunkView> views;
  std::vector<int32_t> key_pos;  // position of every key, in order
};

Cache make_cache(const Case& c, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Cache cache;
  const size_t row = static_cast<size_t>(c.n_head_kv) * c.head_dim;
  int pos = c.first_pos;
  for (int done = 0; done < c.n_keys; done += c.chunk_cap) {
    const int n = std::min(c.chunk_cap, c.n_keys - done);
    // Full-capacity buffers, only n slots used: views must not read past n_tokens.
    std::vector<uint16_t> k(row * c.chunk_cap, fp32_to_fp16(NAN)), v(row * c.chunk_cap, fp32_to_fp16(NAN));
    for (size_t i = 0; i < row * n; ++i) {
      k[i] = fp32_to_fp16(u(rng));
      v[i] = fp32_to_fp16(u(rng));
    }
    cache.k.push_back(std::move(k));
    cache.v.push_back(std::move(v));
    cache.views.push_back({cache.k.back().data(), cache.v.back().data(), n, pos});
    for (int j = 0; j < n; ++j) cache.key_pos.push_back(pos + j);
    pos += n + c.gap;
  }
  for (size_t i = 0; i < cache.views.size(); ++i) {  // push_back may have moved the buffers
    cache.views[i].k = cache.k[i].data();
    cache.views[i].v = cache.v[i].data();
  }
  return cache;
}

std::vector<float> reference(const std::vector<float>& q, const std::vector<int32_t>& q_pos, const Cache& cache,
                             const AttentionParams& p) {
  const int n_tokens = static_cast<int>(q_pos.size());
  const int g = p.n_head / p.n_head_kv, dim = p.head_dim;
  std::vector<float> out(q.size(), 0.0f);
  for (int t = 0; t < n_tokens; ++t)
    for (int h = 0; h < p.n_head; ++h) {
      const float* qr = &q[(static_cast<size_t>(t) * p.n_head + h) * dim];
      std::vector<double> score;
      std::vector<const uint16_t*> vrow;
      for (const KvChunkView& ch : cache.views)
        for (int j = 0; j < ch.n_tokens; ++j) {
          const int kp = ch.first_pos + j;
          if (kp > q_pos[t] || (p.sliding_window > 0 && kp <= q_pos[t] - p.sliding_window)) continue;
          const uint16_t* kr = ch.k + (static_cast<size_t>(j) * p.n_head_kv + h / g) * dim;
          double s = 0;
          for (int d = 0; d < dim; ++d) s += static_cast<double>(qr[d]) * fp16_to_fp32(kr[d]);
          score.push_back(s * p.scale);
          vrow.push_back(ch.v + (static_cast<size_t>(j) * p.n_head_kv + h / g) * dim);
        }
      if (score.empty()) continue;
      const double mx = *std::max_element(score.begin(), score.end());
      double sum = 0;
      std::vector<double> acc(dim, 0.0);
      for (size_t i = 0; i < score.size(); ++i) {
        const double w = std::exp(score[i] - mx);
        sum += w;
        for (int d = 0; d < dim; ++d) acc[d] += w * fp16_to_fp32(vrow[i][d]);
      }
      float* o = &out[(static_cast<size_t>(t) * p.n_head + h) * dim];
      for (int d = 0; d < dim; ++d) o[d] = static_cast<float>(acc[d] / sum);
    }
  return out;
}

class AttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionTest, MatchesReference) {
  const Case& c = GetParam();
  std::mt19937 rng(1234);
  const Cache cache = make_cache(c, rng);
  AttentionParams p;
  p.n_head = c.n_head;
  p.n_head_kv = c.n_head_kv;
  p.head_dim = c.head_dim;
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  p.sliding_window = c.window;

  std::vector<int32_t> q_pos;
  for (int t = 0; t < c.n_tokens; ++t) {
    const int i = static_cast<int>(cache.key_pos.size()) - c.n_tokens + t;
    q_pos.push_back((i >= 0 ? cache.key_pos[i] : c.first_pos) + c.query_shift);
  }
  std::uniform_real_distribution<float> u(-c.q_amp, c.q_amp);
  std::vector<float> q(static_cast<size_t>(c.n_tokens) * c.n_head * c.head_dim);
  for (float& x : q) x = u(rng);
  const std::vector<float> want = reference(q, q_pos, cache, p);

  test::for_each_simd_target([&] {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(threads);
      CpuDevice dev(threads);
      std::vector<float> got(q.size(), NAN);
      for (int rep = 0; rep < 2; ++rep) {  // the second call reuses the scratch
        dev.attention(q.data(), c.n_tokens, q_pos.data(), cache.views.data(), static_cast<int>(cache.views.size()),
                      p, got.data());
        double max_err = 0;
        for (size_t i = 0; i < got.size(); ++i) max_err = std::max(max_err, std::fabs(double(got[i]) - want[i]));
        ASSERT_LT(max_err, 2e-5) << "rep " << rep;
      }
    }
  });
}

// name, H, Hkv, D, keys, chunk, first_pos, gap, tokens, shift, window, q_amp
INSTANTIATE_TEST_SUITE_P(
    Decode, AttentionTest,
    ::testing::Values(Case{"one_key", 4, 4, 64, 1, 16, 0, 0, 1, 0, 0, 2.0f},
                      Case{"partial_chunk_gqa1", 4, 4, 64, 21, 16, 0, 0, 1, 0, 0, 2.0f},
                      Case{"gqa3_smollm2", 9, 3, 64, 130, 16, 0, 0, 1, 0, 0, 2.0f},
                      Case{"gqa4", 8, 2, 64, 77, 16, 5, 0, 1, 0, 0, 2.0f},
                      Case{"long_gqa3_threads", 9, 3, 64, 1000, 16, 0, 0, 1, 0, 0, 2.0f},
                      Case{"long_gqa4_pos_offset", 8, 2, 64, 700, 16, 4000, 0, 1, 0, 0, 2.0f},
                      Case{"peaky_softmax", 9, 3, 64, 600, 16, 0, 0, 1, 0, 0, 40.0f},
                      Case{"window", 9, 3, 64, 500, 16, 0, 0, 1, 0, 37, 2.0f},
                      Case{"window_covers_all", 4, 2, 64, 40, 16, 0, 0, 1, 0, 4096, 2.0f},
                      Case{"chunk5", 6, 3, 64, 53, 5, 2, 0, 1, 0, 0, 2.0f},
                      Case{"chunk40_multi_block", 9, 3, 64, 333, 40, 0, 0, 1, 0, 0, 2.0f},
                      Case{"gaps_between_chunks", 9, 3, 64, 300, 16, 10, 7, 1, 0, 0, 2.0f},
                      Case{"query_after_keys", 8, 2, 64, 50, 16, 0, 0, 1, 30, 0, 2.0f},
                      Case{"query_before_keys", 8, 2, 64, 50, 16, 100, 0, 1, -200, 0, 2.0f},
                      Case{"head_dim_128", 8, 2, 128, 900, 16, 0, 0, 1, 0, 0, 2.0f},
                      Case{"head_dim_40", 6, 2, 40, 90, 16, 0, 0, 1, 0, 0, 2.0f},
                      Case{"head_dim_20", 6, 3, 20, 90, 16, 0, 0, 1, 0, 0, 2.0f},
                      Case{"head_dim_6", 4, 1, 6, 70, 16, 0, 0, 1, 0, 0, 2.0f},
                      Case{"mqa_16_heads", 16, 1, 64, 300, 16, 0, 0, 1, 0, 0, 2.0f}),
    [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(
    Prefill, AttentionTest,
    ::testing::Values(Case{"fresh_prompt", 9, 3, 64, 37, 16, 0, 0, 37, 0, 0, 2.0f},
                      Case{"continue_context", 9, 3, 64, 300, 16, 0, 0, 45, 0, 0, 2.0f},
                      Case{"gqa1_long", 4, 4, 64, 200, 16, 0, 0, 100, 0, 0, 2.0f},
                      Case{"gqa4_offset", 8, 2, 64, 150, 16, 1000, 0, 64, 0, 0, 2.0f},
                      Case{"window", 9, 3, 64, 260, 16, 0, 0, 120, 0, 50, 2.0f},
                      Case{"chunk7_window", 6, 2, 64, 99, 7, 3, 0, 33, 0, 20, 2.0f},
                      Case{"chunk48", 9, 3, 64, 200, 48, 0, 0, 70, 0, 0, 2.0f},
                      Case{"gaps_peaky", 9, 3, 64, 180, 16, 0, 5, 40, 0, 0, 30.0f},
                      Case{"head_dim_128", 8, 1, 128, 90, 16, 0, 0, 90, 0, 0, 2.0f},
                      Case{"head_dim_20", 6, 3, 20, 64, 16, 0, 0, 64, 0, 9, 2.0f},
                      Case{"few_tokens_all_heads", 9, 3, 64, 300, 16, 0, 0, 5, 0, 0, 2.0f},
                      Case{"few_tokens_window", 8, 2, 64, 700, 16, 3, 0, 7, 0, 100, 2.0f}),
    [](const auto& info) { return std::string(info.param.name); });

// Queries in any order (not sorted by position) still see exactly their own past.
TEST(Attention, UnsortedQueryPositions) {
  Case c{"unsorted", 9, 3, 64, 120, 16, 0, 0, 0, 0, 0, 2.0f};
  std::mt19937 rng(7);
  const Cache cache = make_cache(c, rng);
  AttentionParams p{9, 3, 64, 0.125f, 0};
  const std::vector<int32_t> q_pos = {119, 3, 64, 0, 100, 17, 118, 50};
  std::vector<float> q(q_pos.size() * 9 * 64);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (float& x : q) x = u(rng);
  const std::vector<float> want = reference(q, q_pos, cache, p);
  test::for_each_simd_target([&] {
    CpuDevice dev(2);
    std::vector<float> got(q.size());
    dev.attention(q.data(), static_cast<int>(q_pos.size()), q_pos.data(), cache.views.data(),
                  static_cast<int>(cache.views.size()), p, got.data());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5) << i;
  });
}

// No chunks at all: every query sees nothing and gets zeros.
TEST(Attention, EmptyCacheGivesZeros) {
  CpuDevice dev(2);
  AttentionParams p{4, 2, 64, 0.125f, 0};
  const int32_t pos[2] = {0, 1};
  std::vector<float> q(2 * 4 * 64, 1.0f), out(q.size(), NAN);
  dev.attention(q.data(), 2, pos, nullptr, 0, p, out.data());
  for (float x : out) ASSERT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace llmsvc::hal::cpu
