// SPDX-License-Identifier: Apache-2.0
// Attention over chunked f16 KV against a scalar reference of llama.cpp's numerics: chunk
// layouts (partial last chunk, chunks bigger than a key block, gaps in positions, out of
// order), GQA ratios, sliding window, positions not starting at 0, multi-token prefill with
// the causal mask, 1 to 3 threads, every SIMD target; and bit for bit against llama.cpp's own
// summation orders (one query token and several differ) on AVX-512. Results must not depend
// on the thread count nor on the other tokens of a batch: bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "hal/cpu/cpu_device.h"
#include "hal/host/fp16.h"
#include "ggml_expf_ref.h"
#include "tests/common/simd_targets.h"

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

// llama.cpp's numerics (CPU, f16 KV cache, flash attention off), written plainly: q rounded
// to f16, each score the f32 rounding of the exact dot product, times scale in f32, softmax
// with f32 exp and a double sum, weights rounded to f16, V accumulated in double.
struct Reference {
  std::vector<float> out;
  std::vector<double> tol;  // allowed |got - out| per element
};

Reference reference(const std::vector<float>& q, const std::vector<int32_t>& q_pos, const Cache& cache,
                    const AttentionParams& p) {
  const int n_tokens = static_cast<int>(q_pos.size());
  const int g = p.n_head / p.n_head_kv, dim = p.head_dim;
  // The kernel's f32 dot products may differ from the exact ones by about this much times
  // the sum of |terms| (lane-wise accumulation over dim, then a 16-lane reduction tree).
  const double gamma = (dim / 4.0 + 8.0) * std::ldexp(1.0, -24);
  Reference ref;
  ref.out.assign(q.size(), 0.0f);
  ref.tol.assign(q.size(), 0.0);
  for (int t = 0; t < n_tokens; ++t)
    for (int h = 0; h < p.n_head; ++h) {
      const size_t at = (static_cast<size_t>(t) * p.n_head + h) * dim;
      std::vector<float> q16(dim);
      for (int d = 0; d < dim; ++d) q16[d] = fp16_to_fp32(fp32_to_fp16(q[at + d]));
      std::vector<float> score;
      std::vector<const uint16_t*> vrow;
      double max_err = 0;  // bound on any score's error in the kernel
      for (const KvChunkView& ch : cache.views)
        for (int j = 0; j < ch.n_tokens; ++j) {
          const int kp = ch.first_pos + j;
          if (kp > q_pos[t] || (p.sliding_window > 0 && kp <= q_pos[t] - p.sliding_window)) continue;
          const uint16_t* kr = static_cast<const uint16_t*>(ch.k) + (static_cast<size_t>(j) * p.n_head_kv + h / g) * dim;
          double s = 0, mag = 0;
          for (int d = 0; d < dim; ++d) {
            s += static_cast<double>(q16[d]) * fp16_to_fp32(kr[d]);
            mag += std::fabs(static_cast<double>(q16[d]) * fp16_to_fp32(kr[d]));
          }
          score.push_back(static_cast<float>(s) * p.scale);
          max_err = std::max(max_err, (gamma * mag + std::fabs(s) * 0x1p-24) * p.scale);
          vrow.push_back(static_cast<const uint16_t*>(ch.v) + (static_cast<size_t>(j) * p.n_head_kv + h / g) * dim);
        }
      if (score.empty()) continue;
      const float m = *std::max_element(score.begin(), score.end());
      std::vector<float> e(score.size());
      double sum = 0;
      for (size_t i = 0; i < score.size(); ++i) {
        e[i] = static_cast<float>(std::exp(static_cast<double>(score[i] - m)));
        sum += e[i];
      }
      const float inv = static_cast<float>(1.0 / sum);
      // Relative error of the kernel's unrounded weights: scores and max (2 max_err in the
      // exponent, twice: e_j and the sum), exp's few ulps, the products.
      const double rel = 4 * max_err + 1e-6;
      for (int d = 0; d < dim; ++d) {
        double acc = 0, mag = 0, flips = 0;
        for (size_t i = 0; i < score.size(); ++i) {
          const float pf = e[i] * inv;
          const double v = fp16_to_fp32(vrow[i][d]);
          const double w = fp16_to_fp32(fp32_to_fp16(pf));
          acc += w * v;
          mag += std::fabs(w * v);
          // Near a rounding boundary of f16 the kernel's weight may round the other way.
          const double w_lo = fp16_to_fp32(fp32_to_fp16(static_cast<float>(pf * (1 - rel))));
          const double w_hi = fp16_to_fp32(fp32_to_fp16(static_cast<float>(pf * (1 + rel))));
          flips += (w_hi - w_lo) * std::fabs(v);
        }
        ref.out[at + d] = static_cast<float>(acc);
        ref.tol[at + d] = 1e-5 * mag + flips + 1e-30;
      }
    }
  return ref;
}

// llama.cpp's numerics bit for bit (its AVX-512 build), written plainly for one query row at a
// time. A key's lane is its position (llama.cpp's KV cell). Several tokens: llamafile's f16
// GEMM (16 lane chains, folded as _mm512_reduce_add_ps) where it takes the shape (KQ:
// head_dim % 16 == 0, V: head_dim % 4 == 0); else ggml_vec_dot_f16 (4 x 16 chains per step of
// 64 over head_dim, or over the KV length padded to 32 cells for V, the rest in double).
// Softmax: ggml_v_expf, the double sum of 16-cell groups.
float fold16(float* a) {
  for (int c = 8; c >= 1; c /= 2)
    for (int i = 0; i < c; ++i) a[i] = a[i + c] + a[i];
  return a[0];
}
// Sum over the n products x[i] * y[i] (i in order): one token's dot product.
float vec_dot_f16(const std::vector<float>& x, const std::vector<float>& y) {
  const size_t n = x.size(), np = n / 64 * 64;
  float c[64] = {};
  for (size_t i = 0; i < np; ++i) c[i % 64] = std::fma(x[i], y[i], c[i % 64]);
  float t[16];
  for (int l = 0; l < 16; ++l) t[l] = (c[l] + c[32 + l]) + (c[16 + l] + c[48 + l]);
  double sum = fold16(t);
  for (size_t i = np; i < n; ++i) sum += static_cast<double>(x[i] * y[i]);
  return static_cast<float>(sum);
}
// The same over several tokens' GEMM: lane i % 16.
float gemm_dot_f16(const std::vector<float>& x, const std::vector<float>& y) {
  float c[16] = {};
  for (size_t i = 0; i < x.size(); ++i) c[i % 16] = std::fma(x[i], y[i], c[i % 16]);
  return fold16(c);
}
using test::ggml_expf_ref;

std::vector<float> ggml_reference(const std::vector<float>& q, const std::vector<int32_t>& q_pos, const Cache& cache,
                                  const AttentionParams& p) {
  const int n_tokens = static_cast<int>(q_pos.size());
  const int g = p.n_head / p.n_head_kv, dim = p.head_dim;
  const bool qk_gemm = n_tokens > 1 && dim % 16 == 0, pv_gemm = n_tokens > 1 && dim % 4 == 0;
  // The cache as llama.cpp holds it: cell = position, padded to 32 cells past the last used.
  const int64_t cells = (*std::max_element(q_pos.begin(), q_pos.end()) + 32) / 32 * 32;
  std::vector<float> out(q.size(), 0.0f);
  for (int t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < p.n_head; ++h) {
      const size_t at = (static_cast<size_t>(t) * p.n_head + h) * dim;
      std::vector<float> q16(dim);
      for (int d = 0; d < dim; ++d) q16[d] = fp16_to_fp32(fp32_to_fp16(q[at + d]));
      std::vector<float> score(cells, -INFINITY), w(cells, 0.0f);
      std::vector<const uint16_t*> vrow(cells, nullptr);
      bool any = false;
      for (const KvChunkView& ch : cache.views)
        for (int j = 0; j < ch.n_tokens; ++j) {
          const int kp = ch.first_pos + j;
          if (kp > q_pos[t] || (p.sliding_window > 0 && kp <= q_pos[t] - p.sliding_window)) continue;
          const uint16_t* kr = static_cast<const uint16_t*>(ch.k) + (static_cast<size_t>(j) * p.n_head_kv + h / g) * dim;
          std::vector<float> k(dim);
          for (int d = 0; d < dim; ++d) k[d] = fp16_to_fp32(kr[d]);
          score[kp] = (qk_gemm ? gemm_dot_f16(q16, k) : vec_dot_f16(q16, k)) * p.scale;
          vrow[kp] = static_cast<const uint16_t*>(ch.v) + (static_cast<size_t>(j) * p.n_head_kv + h / g) * dim;
          any = true;
        }
      if (!any) continue;
      const float m = *std::max_element(score.begin(), score.end());
      double sum = 0;
      for (int64_t c0 = 0; c0 < cells; c0 += 16) {
        float e[16] = {};
        for (int64_t c = c0; c < std::min(cells, c0 + 16); ++c) e[c - c0] = w[c] = ggml_expf_ref(score[c] - m);
        sum += fold16(e);
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (float& x : w) x = fp16_to_fp32(fp32_to_fp16(x * inv));
      for (int d = 0; d < dim; ++d) {
        std::vector<float> pv(cells, 0.0f), vv(cells, 0.0f);
        for (int64_t c = 0; c < cells; ++c) {
          pv[c] = w[c];
          if (vrow[c]) vv[c] = fp16_to_fp32(vrow[c][d]);
        }
        out[at + d] = pv_gemm ? gemm_dot_f16(vv, pv) : vec_dot_f16(vv, pv);
      }
    }
  }
  return out;
}

// Largest |got - want| / tol; <= 1 passes.
double worst(const std::vector<float>& got, const Reference& want) {
  double w = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want.out[i]);
    w = std::max(w, std::isnan(err) ? 1e30 : err / want.tol[i]);
  }
  return w;
}

class AttentionTest : public ::testing::TestWithParam<Case> {};

struct Problem {
  Cache cache;
  AttentionParams p;
  std::vector<int32_t> q_pos;
  std::vector<float> q;
};

Problem make_problem(const Case& c) {
  std::mt19937 rng(1234);
  Problem pr;
  pr.cache = make_cache(c, rng);
  pr.p.n_head = c.n_head;
  pr.p.n_head_kv = c.n_head_kv;
  pr.p.head_dim = c.head_dim;
  pr.p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  pr.p.sliding_window = c.window;
  for (int t = 0; t < c.n_tokens; ++t) {
    const int i = static_cast<int>(pr.cache.key_pos.size()) - c.n_tokens + t;
    pr.q_pos.push_back((i >= 0 ? pr.cache.key_pos[i] : c.first_pos) + c.query_shift);
  }
  std::uniform_real_distribution<float> u(-c.q_amp, c.q_amp);
  pr.q.resize(static_cast<size_t>(c.n_tokens) * c.n_head * c.head_dim);
  for (float& x : pr.q) x = u(rng);
  return pr;
}

std::vector<float> run(CpuDevice& dev, const Problem& pr, size_t t0, size_t n) {
  const size_t row = static_cast<size_t>(pr.p.n_head) * pr.p.head_dim;
  std::vector<float> got(n * row, NAN);
  dev.attention(pr.q.data() + t0 * row, static_cast<int>(n), pr.q_pos.data() + t0, pr.cache.views.data(),
                static_cast<int>(pr.cache.views.size()), pr.p, got.data());
  return got;
}

TEST_P(AttentionTest, MatchesReference) {
  const Problem pr = make_problem(GetParam());
  const Reference want = reference(pr.q, pr.q_pos, pr.cache, pr.p);
  // llama.cpp's bits where the cache is a sequence (consecutive positions in order).
  const bool sequence = GetParam().gap == 0;
  const std::vector<float> exact = ggml_reference(pr.q, pr.q_pos, pr.cache, pr.p);
  test::for_each_simd_target([&](int64_t target) {
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(threads);
      CpuDevice dev(threads);
      for (int rep = 0; rep < 2; ++rep) {  // the second call reuses the scratch
        const std::vector<float> got = run(dev, pr, 0, pr.q_pos.size());
        ASSERT_LE(worst(got, want), 1.0) << "rep " << rep;
        if (sequence && test::has_fma(target)) {
          for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], exact[i]) << "llama.cpp's bits, output " << i;
        }
        if (first.empty()) first = got;
        ASSERT_EQ(0, std::memcmp(got.data(), first.data(), got.size() * sizeof(float))) << "differs from 1 thread";
      }
    }
  });
}

// A token's result does not depend on the other tokens of a multi-token call (llama.cpp's
// batch numerics are per token too): the whole batch equals the same tokens in pairs.
// Instantiated with the multi-token (prefill) cases only.
class AttentionBatchTest : public AttentionTest {};
TEST_P(AttentionBatchTest, BatchingDoesNotChangeResults) {
  const Problem pr = make_problem(GetParam());
  ASSERT_GE(pr.q_pos.size(), 2u);
  const size_t row = static_cast<size_t>(pr.p.n_head) * pr.p.head_dim;
  test::for_each_simd_target([&] {
    CpuDevice dev(2);
    const std::vector<float> batch = run(dev, pr, 0, pr.q_pos.size());
    for (size_t t = 0; t + 1 < pr.q_pos.size(); t += 2) {
      const std::vector<float> pair = run(dev, pr, t, 2);
      ASSERT_EQ(0, std::memcmp(pair.data(), batch.data() + t * row, 2 * row * sizeof(float))) << "tokens " << t;
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

const Case kPrefillCases[] = {Case{"fresh_prompt", 9, 3, 64, 37, 16, 0, 0, 37, 0, 0, 2.0f},
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
                      Case{"few_tokens_window", 8, 2, 64, 700, 16, 3, 0, 7, 0, 100, 2.0f}};

INSTANTIATE_TEST_SUITE_P(Prefill, AttentionTest, ::testing::ValuesIn(kPrefillCases),
                         [](const auto& info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(Prefill, AttentionBatchTest, ::testing::ValuesIn(kPrefillCases),
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
  const Reference want = reference(q, q_pos, cache, p);
  test::for_each_simd_target([&] {
    CpuDevice dev(2);
    std::vector<float> got(q.size());
    dev.attention(q.data(), static_cast<int>(q_pos.size()), q_pos.data(), cache.views.data(),
                  static_cast<int>(cache.views.size()), p, got.data());
    ASSERT_LE(worst(got, want), 1.0);
  });
}

// Chunks out of position order (a KV sequence never makes them): still exactly the visible keys.
TEST(Attention, ChunksOutOfOrder) {
  for (const Case& c : {Case{"decode", 9, 3, 64, 500, 16, 0, 0, 1, 0, 0, 2.0f},
                        Case{"prefill_window", 8, 2, 64, 200, 16, 0, 0, 60, 0, 50, 2.0f}}) {
    SCOPED_TRACE(c.name);
    Problem pr = make_problem(c);
    std::mt19937 rng(3);
    std::shuffle(pr.cache.views.begin(), pr.cache.views.end(), rng);
    const Reference want = reference(pr.q, pr.q_pos, pr.cache, pr.p);
    test::for_each_simd_target([&] {
      for (int threads : {1, 2}) {
        CpuDevice dev(threads);
        ASSERT_LE(worst(run(dev, pr, 0, pr.q_pos.size()), want), 1.0) << threads;
      }
    });
  }
}

// Rank-major query heads (an elastic model's head levels): head h reads KV head h % n_head_kv.
// The same bits as the grouped order with every token's heads moved to match, for whole
// ranks (a level's prefix: 1 of 3, 2 of 3) in decode and prefill.
TEST(Attention, RankMajorHeadsAreTheGroupedOnesMoved) {
  for (const Case& c : {Case{"decode", 9, 3, 64, 300, 16, 0, 0, 1, 0, 0, 2.0f},
                        Case{"prefill", 6, 3, 64, 200, 16, 0, 0, 40, 0, 0, 2.0f}}) {
    SCOPED_TRACE(c.name);
    const int group = c.n_head / c.n_head_kv;
    for (int ranks = 1; ranks <= group; ++ranks) {
      SCOPED_TRACE(ranks);
      Problem pr = make_problem(c);
      const int heads = ranks * c.n_head_kv, dim = c.head_dim;
      // Grouped: member r of group g at g * ranks + r; rank-major: at r * n_head_kv + g.
      std::vector<float> grouped(pr.q_pos.size() * heads * dim), major(grouped.size());
      for (size_t t = 0; t < pr.q_pos.size(); ++t)
        for (int g = 0; g < c.n_head_kv; ++g)
          for (int r = 0; r < ranks; ++r) {
            const float* src = pr.q.data() + (t * c.n_head + g * group + r) * dim;
            std::copy_n(src, dim, grouped.data() + (t * heads + g * ranks + r) * dim);
            std::copy_n(src, dim, major.data() + (t * heads + r * c.n_head_kv + g) * dim);
          }
      AttentionParams pg = pr.p, pm = pr.p;
      pg.n_head = pm.n_head = heads;
      pm.rank_major = true;
      test::for_each_simd_target([&] {
        for (int threads : {1, 2}) {
          CpuDevice dev(threads);
          std::vector<float> out_g(grouped.size(), NAN), out_m(major.size(), NAN);
          const int n = static_cast<int>(pr.q_pos.size()), nc = static_cast<int>(pr.cache.views.size());
          dev.attention(grouped.data(), n, pr.q_pos.data(), pr.cache.views.data(), nc, pg, out_g.data());
          dev.attention(major.data(), n, pr.q_pos.data(), pr.cache.views.data(), nc, pm, out_m.data());
          for (int t = 0; t < n; ++t)
            for (int g = 0; g < c.n_head_kv; ++g)
              for (int r = 0; r < ranks; ++r)
                ASSERT_EQ(0, std::memcmp(out_g.data() + (size_t(t) * heads + g * ranks + r) * dim,
                                         out_m.data() + (size_t(t) * heads + r * c.n_head_kv + g) * dim, dim * sizeof(float)))
                    << "token " << t << ", group " << g << ", rank " << r << ", " << threads << " threads";
        }
      });
    }
  }
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
