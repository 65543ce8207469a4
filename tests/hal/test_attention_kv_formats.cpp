// SPDX-License-Identifier: Apache-2.0
// Attention over compressed chunks (q8/q4/q3/q2, hal/kv_format.h, encoded by policy/compression/kv_codec)
// and the key-mass output, for GQA shapes, sliding windows, decode and prefill, mixed chunk
// lists, every SIMD target, 1 to 3 threads:
//  - against a double-precision reference of the same numerics over the exact decoded values
//    (min + scale * code), q rounded to f16, weights rounded to f16: f32-level tolerance;
//  - against the kernel over the dequantized f16 copies of the same chunks: these differ by
//    f16's rounding of each decoded K/V value (relative 2^-11), which moves every score by up
//    to 2^-11 * scale * sum_d |q_d k_d| and so every weight by a relative e^(2 dmax) - 1 (plus
//    one f16 step of the weight each side), and every value by 2^-11 |v|: that bound is the
//    tolerance (about 0.5% of sum_j p_j |v_j| for these shapes; typical errors are far below);
//  - bit for bit the same whatever the thread count (outputs and mass) or batching;
//  - mass: per key against the reference's summed weights; rows that see a key carry weights
//    summing to 1 within f16 rounding, so the total mass is rows x heads within 2^-11.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "hal/cpu/cpu_device.h"
#include "hal/host/fp16.h"
#include "policy/compression/kv_codec.h"
#include "tests/common/simd_targets.h"

namespace llmsvc::hal::cpu {
namespace {
namespace kv_formats {  // its own names beside the other files of its unity batch

constexpr int kChunk = 16;
using F = KvFormat;

struct QCase {
  const char* name;
  int n_head, n_head_kv, head_dim;
  int n_keys;
  int n_tokens;  // queries: the last n_tokens key positions
  int window;
  float q_amp;
  std::vector<KvFormat> pattern;  // format of full chunk i: pattern[i % size]; a partial last chunk stays f16
};

void PrintTo(const QCase& c, std::ostream* os) { *os << c.name; }

// One layer's cache: for every chunk its format, encoded blocks (q chunks) and f16 blocks (the
// f16 chunks, and the dequantized copies of the q chunks).
struct Cache {
  int n_head_kv = 0, head_dim = 0;
  std::vector<KvFormat> fmt;
  std::vector<int> n, first;
  std::vector<std::vector<uint8_t>> kq, vq;
  std::vector<std::vector<uint16_t>> k16, v16;

  std::vector<KvChunkView> views(bool compressed) const {
    std::vector<KvChunkView> out(fmt.size());
    for (size_t i = 0; i < fmt.size(); ++i) {
      const bool q = compressed && fmt[i] != KvFormat::f16;
      out[i].k = q ? static_cast<const void*>(kq[i].data()) : k16[i].data();
      out[i].v = q ? static_cast<const void*>(vq[i].data()) : v16[i].data();
      out[i].n_tokens = n[i];
      out[i].first_pos = first[i];
      out[i].format = q ? fmt[i] : KvFormat::f16;
    }
    return out;
  }
};

Cache make_cache(const QCase& c, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Cache cache;
  cache.n_head_kv = c.n_head_kv;
  cache.head_dim = c.head_dim;
  const size_t row = static_cast<size_t>(c.n_head_kv) * c.head_dim;
  for (int done = 0, i = 0; done < c.n_keys; done += kChunk, ++i) {
    const int n = std::min(kChunk, c.n_keys - done);
    const KvFormat f = n < kChunk ? KvFormat::f16 : c.pattern[i % c.pattern.size()];
    std::vector<uint16_t> k(row * kChunk), v(row * kChunk);
    for (size_t e = 0; e < row * n; ++e) {
      // Channel 5 of every head is an outlier channel (x8), as keys have.
      const float amp = (e % c.head_dim) == 5 ? 8.0f : 1.0f;
      k[e] = fp32_to_fp16(u(rng) * amp);
      v[e] = fp32_to_fp16(u(rng));
    }
    cache.kq.emplace_back();
    cache.vq.emplace_back();
    if (f != KvFormat::f16) {
      const KvBlockShape s{n, c.n_head_kv, c.head_dim};
      cache.kq.back().resize(kv_block_bytes(f, KvPart::key, s));
      cache.vq.back().resize(kv_block_bytes(f, KvPart::value, s));
      policy::kv_quantize(KvPart::key, s, k.data(), f, cache.kq.back().data());
      policy::kv_quantize(KvPart::value, s, v.data(), f, cache.vq.back().data());
      policy::kv_dequantize(KvPart::key, s, f, cache.kq.back().data(), k.data());
      policy::kv_dequantize(KvPart::value, s, f, cache.vq.back().data(), v.data());
    }
    cache.k16.push_back(std::move(k));
    cache.v16.push_back(std::move(v));
    cache.fmt.push_back(f);
    cache.n.push_back(n);
    cache.first.push_back(done);
  }
  return cache;
}

// Element (token j, channel ch) of chunk i's keys or values as the format defines it, exactly:
// f16 values, or min + scale * code read straight from the bytes (hal/kv_format.h).
struct Decoded {
  double value, magnitude;  // magnitude: of the terms the kernel adds for it (min, scale * code)
};
Decoded element(const Cache& c, size_t i, bool key, int j, int ch) {
  const int kv_dim = c.n_head_kv * c.head_dim;
  if (c.fmt[i] == KvFormat::f16) {
    const double x = fp16_to_fp32((key ? c.k16[i] : c.v16[i])[static_cast<size_t>(j) * kv_dim + ch]);
    return {x, std::fabs(x)};
  }
  const int B = kv_format_bits(c.fmt[i]);
  const std::vector<uint8_t>& b = key ? c.kq[i] : c.vq[i];
  const size_t pairs = key ? static_cast<size_t>(kv_dim) : static_cast<size_t>(c.n[i]) * c.n_head_kv;
  const size_t g = key ? static_cast<size_t>(ch) : static_cast<size_t>(j) * c.n_head_kv + ch / c.head_dim;
  uint16_t mn, sc;
  std::memcpy(&mn, b.data() + 2 * g, 2);
  std::memcpy(&sc, b.data() + 2 * (pairs + g), 2);
  const uint8_t* row = b.data() + 4 * pairs + static_cast<size_t>(j) * kv_dim * B / 8;
  int code = 0;  // bits [ch * B, +B) of the row's little-endian bit stream
  for (int k = 0; k < B; ++k) {
    const size_t bit = static_cast<size_t>(ch) * B + k;
    code |= ((row[bit / 8] >> (bit % 8)) & 1) << k;
  }
  const double m = fp16_to_fp32(mn), s = fp16_to_fp32(sc) * code;
  return {m + s, std::fabs(m) + s};
}

struct Reference {
  std::vector<float> out;
  std::vector<double> tol;        // vs the exact reference
  std::vector<double> tol_deq;    // vs the kernel over dequantized f16 copies
  std::vector<double> mass, mass_tol;  // [global key]
  int rows_seeing = 0;                 // (token, head) rows that see at least one key
};

Reference reference(const std::vector<float>& q, const std::vector<int32_t>& q_pos, const Cache& cache,
                    const AttentionParams& p) {
  const int n_tokens = static_cast<int>(q_pos.size()), g = p.n_head / p.n_head_kv, dim = p.head_dim;
  const double gamma = (dim / 4.0 + 8.0) * std::ldexp(1.0, -24) + std::ldexp(1.0, -23);
  std::vector<int> key_base(cache.fmt.size() + 1, 0);
  for (size_t i = 0; i < cache.fmt.size(); ++i) key_base[i + 1] = key_base[i] + cache.n[i];
  Reference ref;
  ref.out.assign(q.size(), 0.0f);
  ref.tol.assign(q.size(), 0.0);
  ref.tol_deq.assign(q.size(), 0.0);
  ref.mass.assign(key_base.back(), 0.0);
  ref.mass_tol.assign(key_base.back(), 0.0);
  for (int t = 0; t < n_tokens; ++t)
    for (int h = 0; h < p.n_head; ++h) {
      const size_t at = (static_cast<size_t>(t) * p.n_head + h) * dim;
      const int kvh = h / g;
      std::vector<double> q16(dim);
      for (int d = 0; d < dim; ++d) q16[d] = fp16_to_fp32(fp32_to_fp16(q[at + d]));
      std::vector<float> score;
      std::vector<std::pair<size_t, int>> keys;  // (chunk, token)
      double max_err = 0, max_shift = 0;
      for (size_t i = 0; i < cache.fmt.size(); ++i)
        for (int j = 0; j < cache.n[i]; ++j) {
          const int kp = cache.first[i] + j;
          if (kp > q_pos[t] || (p.sliding_window > 0 && kp <= q_pos[t] - p.sliding_window)) continue;
          double s = 0, mag = 0, abs_qk = 0;
          for (int d = 0; d < dim; ++d) {
            const Decoded k = element(cache, i, true, j, kvh * dim + d);
            s += q16[d] * k.value;
            mag += std::fabs(q16[d]) * k.magnitude;
            abs_qk += std::fabs(q16[d] * k.value);
          }
          score.push_back(static_cast<float>(s) * p.scale);
          max_err = std::max(max_err, (gamma * mag + std::fabs(s) * 0x1p-24) * p.scale);
          // f16 rounding of the dequantized copy moves this score by at most:
          if (cache.fmt[i] != KvFormat::f16) max_shift = std::max(max_shift, 0x1p-11 * abs_qk * p.scale);
          keys.push_back({i, j});
        }
      if (score.empty()) continue;
      ++ref.rows_seeing;
      const float m = *std::max_element(score.begin(), score.end());
      std::vector<float> e(score.size());
      double sum = 0;
      for (size_t k = 0; k < score.size(); ++k) {
        e[k] = static_cast<float>(std::exp(static_cast<double>(score[k] - m)));
        sum += e[k];
      }
      const float inv = static_cast<float>(1.0 / sum);
      const double rel = 4 * max_err + 1e-6;
      // Relative change of a weight between q and dequantized chunks: scores on both sides,
      // then one f16 step of the weight on each side.
      const double rel_deq = std::expm1(2 * (max_shift + 2 * max_err)) + 0x1p-10;
      std::vector<double> w(score.size()), flip(score.size());
      for (size_t k = 0; k < score.size(); ++k) {
        const float pf = e[k] * inv;
        w[k] = fp16_to_fp32(fp32_to_fp16(pf));
        flip[k] = fp16_to_fp32(fp32_to_fp16(static_cast<float>(pf * (1 + rel)))) -
                  fp16_to_fp32(fp32_to_fp16(static_cast<float>(pf * (1 - rel))));
        const int gk = key_base[keys[k].first] + keys[k].second;
        ref.mass[gk] += w[k];
        ref.mass_tol[gk] += flip[k] + w[k] * 1e-6;
      }
      for (int d = 0; d < dim; ++d) {
        double acc = 0, mag = 0, flips = 0;
        for (size_t k = 0; k < score.size(); ++k) {
          const double v = element(cache, keys[k].first, false, keys[k].second, kvh * dim + d).value;
          acc += w[k] * v;
          mag += std::fabs(w[k] * v);
          flips += flip[k] * std::fabs(v);
        }
        ref.out[at + d] = static_cast<float>(acc);
        ref.tol[at + d] = 1e-5 * mag + flips + 1e-30;
        ref.tol_deq[at + d] = mag * (rel_deq + 0x1p-11 + 1e-5) + 0x1p-25 + 1e-30;
      }
    }
  return ref;
}

// Largest |got - want| / tol; <= 1 passes.
double worst(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& tol) {
  double w = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    w = std::max(w, std::isnan(err) ? 1e30 : err / tol[i]);
  }
  return w;
}

struct Problem {
  Cache cache;
  AttentionParams p;
  std::vector<int32_t> q_pos;
  std::vector<float> q;
};

Problem make_problem(const QCase& c) {
  std::mt19937 rng(4321);
  Problem pr;
  pr.cache = make_cache(c, rng);
  pr.p = AttentionParams{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window};
  for (int t = 0; t < c.n_tokens; ++t) pr.q_pos.push_back(c.n_keys - c.n_tokens + t);
  std::uniform_real_distribution<float> u(-c.q_amp, c.q_amp);
  pr.q.resize(static_cast<size_t>(c.n_tokens) * c.n_head * c.head_dim);
  for (float& x : pr.q) x = u(rng);
  return pr;
}

// Output of one call over tokens [t0, t0 + n); with mass, the chunks' mass arrays (each
// starting at 0.5, to see that attention adds) concatenated, NaN for a chunk without one.
struct Result {
  std::vector<float> out, mass;
};
constexpr float kMassStart = 0.5f;
enum class Mass { none, all, all_but_chunk_1 };
Result run(CpuDevice& dev, const Problem& pr, bool compressed, size_t t0, size_t n, Mass want) {
  const bool with_mass = want != Mass::none;
  std::vector<KvChunkView> views = pr.cache.views(compressed);
  std::vector<std::vector<float>> mass(views.size());
  for (size_t i = 0; i < views.size(); ++i)
    if (with_mass && !(want == Mass::all_but_chunk_1 && i == 1)) {
      mass[i].assign(views[i].n_tokens, kMassStart);
      views[i].mass = mass[i].data();
    }
  const size_t row = static_cast<size_t>(pr.p.n_head) * pr.p.head_dim;
  Result r;
  r.out.assign(n * row, NAN);
  dev.attention(pr.q.data() + t0 * row, static_cast<int>(n), pr.q_pos.data() + t0, views.data(),
                static_cast<int>(views.size()), pr.p, r.out.data());
  for (size_t i = 0; i < views.size(); ++i)
    if (with_mass) {
      const std::vector<float> m = views[i].mass ? mass[i] : std::vector<float>(views[i].n_tokens, NAN);
      r.mass.insert(r.mass.end(), m.begin(), m.end());
    }
  return r;
}

class AttentionKvFormatTest : public ::testing::TestWithParam<QCase> {};

TEST_P(AttentionKvFormatTest, MatchesReferenceAndDequantizedF16) {
  const Problem pr = make_problem(GetParam());
  const Reference want = reference(pr.q, pr.q_pos, pr.cache, pr.p);
  test::for_each_simd_target([&] {
    Result first;
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(threads);
      CpuDevice dev(threads);
      const Result got = run(dev, pr, true, 0, pr.q_pos.size(), Mass::all_but_chunk_1);
      ASSERT_LE(worst(got.out, want.out, want.tol), 1.0) << "vs exact reference";
      const Result deq = run(dev, pr, false, 0, pr.q_pos.size(), Mass::none);
      ASSERT_LE(worst(got.out, deq.out, want.tol_deq), 1.0) << "vs dequantized f16 chunks";
      if (first.out.empty()) first = got;
      ASSERT_EQ(0, std::memcmp(got.out.data(), first.out.data(), got.out.size() * sizeof(float))) << "out differs from 1 thread";
      ASSERT_EQ(0, std::memcmp(got.mass.data(), first.mass.data(), got.mass.size() * sizeof(float)))
          << "mass differs from 1 thread";
    }
  });
}

TEST_P(AttentionKvFormatTest, MassIsColumnSumsOfWeights) {
  const Problem pr = make_problem(GetParam());
  const Reference want = reference(pr.q, pr.q_pos, pr.cache, pr.p);
  CpuDevice dev(2);
  const Result got = run(dev, pr, true, 0, pr.q_pos.size(), Mass::all);
  double total = 0;
  for (size_t k = 0; k < got.mass.size(); ++k) {
    const double added = static_cast<double>(got.mass[k]) - kMassStart;
    if (want.mass[k] == 0) {
      EXPECT_EQ(got.mass[k], kMassStart) << "key " << k << " seen by no query";
    } else {
      EXPECT_NEAR(added, want.mass[k], want.mass_tol[k] + 0x1p-23 * got.mass[k]) << "key " << k;
    }
    total += added;
  }
  // Every row that sees a key has weights summing to 1 within f16 rounding (2^-11).
  const double rows = want.rows_seeing;
  EXPECT_NEAR(total, rows, rows * 0x1p-11 + 1e-4);
  // Calling again adds the same amounts again.
  CpuDevice dev1(1);
  const Result one = run(dev1, pr, true, 0, pr.q_pos.size(), Mass::all);
  EXPECT_EQ(0, std::memcmp(one.mass.data(), got.mass.data(), got.mass.size() * sizeof(float)));
}

// Mass adds to what the arrays hold: two calls add twice (up to the float rounding of the sum).
TEST(AttentionKvFormat, MassAccumulatesAcrossCalls) {
  const Problem pr = make_problem(QCase{"acc", 9, 3, 64, 200, 3, 0, 2.0f, {F::q4, F::q8}});
  CpuDevice dev(2);
  std::vector<KvChunkView> views = pr.cache.views(true);
  std::vector<std::vector<float>> mass(views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    mass[i].assign(views[i].n_tokens, 0.0f);
    views[i].mass = mass[i].data();
  }
  std::vector<float> out(pr.q.size());
  dev.attention(pr.q.data(), 3, pr.q_pos.data(), views.data(), static_cast<int>(views.size()), pr.p, out.data());
  const std::vector<std::vector<float>> once = mass;
  dev.attention(pr.q.data(), 3, pr.q_pos.data(), views.data(), static_cast<int>(views.size()), pr.p, out.data());
  double total = 0;
  for (size_t i = 0; i < mass.size(); ++i)
    for (size_t j = 0; j < mass[i].size(); ++j) {
      EXPECT_FLOAT_EQ(mass[i][j], 2 * once[i][j]);
      total += mass[i][j];
    }
  EXPECT_NEAR(total, 2 * 3 * 9, 2 * 3 * 9 * 0x1p-11);
}

// A token's result does not depend on the other tokens of its batch. Over compressed chunks
// only, a token alone (decode) gets the batch's result too; f16 chunks take llama.cpp's
// single-token order alone, so there the token is compared within a batch of two.
class AttentionKvFormatBatchTest : public AttentionKvFormatTest {};
TEST_P(AttentionKvFormatBatchTest, BatchingDoesNotChangeResults) {
  const Problem pr = make_problem(GetParam());
  const size_t n = pr.q_pos.size();
  ASSERT_GE(n, 3u);
  const QCase& c = GetParam();
  const bool any_f16 = c.n_keys % kChunk != 0 || std::find(c.pattern.begin(), c.pattern.end(), F::f16) != c.pattern.end();
  const size_t row = static_cast<size_t>(pr.p.n_head) * pr.p.head_dim;
  test::for_each_simd_target([&] {
    CpuDevice dev(2);
    const Result batch = run(dev, pr, true, 0, n, Mass::none);
    for (size_t t = 0; t < n; ++t) {
      const size_t first = any_f16 ? std::min(t, n - 2) : t;
      const Result part = run(dev, pr, true, first, any_f16 ? 2 : 1, Mass::none);
      ASSERT_EQ(0, std::memcmp(part.out.data() + (t - first) * row, batch.out.data() + t * row, row * sizeof(float)))
          << "token " << t;
    }
  });
}

// name, H, Hkv, D, keys, tokens, window, q_amp, formats
INSTANTIATE_TEST_SUITE_P(
    Decode, AttentionKvFormatTest,
    ::testing::Values(QCase{"q8_gqa3", 9, 3, 64, 300, 1, 0, 2.0f, {F::q8}},
                      QCase{"q4_gqa3", 9, 3, 64, 300, 1, 0, 2.0f, {F::q4}},
                      QCase{"q2_gqa3", 9, 3, 64, 300, 1, 0, 2.0f, {F::q2}},
                      QCase{"q3_gqa3", 9, 3, 64, 300, 1, 0, 2.0f, {F::q3}},
                      QCase{"q3_head_dim_128", 8, 2, 128, 400, 1, 0, 2.0f, {F::q3, F::q8}},
                      QCase{"q3_head_dim_40", 6, 2, 40, 90, 1, 0, 2.0f, {F::q3, F::q4}},
                      QCase{"f16_mass", 9, 3, 64, 300, 1, 0, 2.0f, {F::f16}},
                      QCase{"mixed_long_threads", 9, 3, 64, 1000, 1, 0, 2.0f, {F::q2, F::q4, F::q3, F::q8, F::f16}},
                      QCase{"q4_gqa4_window", 8, 2, 64, 500, 1, 37, 2.0f, {F::q4, F::q8}},
                      QCase{"q2_head_dim_128", 8, 2, 128, 700, 1, 0, 2.0f, {F::q2, F::q8}},
                      QCase{"q4_head_dim_40", 6, 2, 40, 90, 1, 0, 2.0f, {F::q4, F::q2}},
                      QCase{"mixed_head_dim_6", 8, 4, 6, 70, 1, 0, 2.0f, {F::q2, F::q3, F::q4, F::q8}},
                      QCase{"q8_mqa_16_heads", 16, 1, 64, 300, 1, 0, 2.0f, {F::q8, F::q2}},
                      QCase{"q8_peaky", 9, 3, 64, 600, 1, 0, 40.0f, {F::q8}},
                      QCase{"one_full_q4_chunk", 4, 4, 64, 16, 1, 0, 2.0f, {F::q4}}),
    [](const auto& info) { return std::string(info.param.name); });

const QCase kPrefill[] = {QCase{"mixed_continue", 9, 3, 64, 300, 45, 0, 2.0f, {F::q8, F::q2, F::f16, F::q3, F::q4}},
                          QCase{"q4_gqa4_window", 8, 2, 64, 260, 120, 50, 2.0f, {F::q4}},
                          QCase{"q2_head_dim_20", 8, 4, 20, 96, 64, 9, 2.0f, {F::q2, F::q3, F::q8}},
                          QCase{"mixed_fresh_prompt", 9, 3, 64, 80, 80, 0, 2.0f, {F::q2, F::q4}},
                          QCase{"q8_few_tokens_window", 8, 2, 64, 700, 7, 100, 2.0f, {F::q8, F::q4}}};
INSTANTIATE_TEST_SUITE_P(Prefill, AttentionKvFormatTest, ::testing::ValuesIn(kPrefill),
                         [](const auto& info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(Prefill, AttentionKvFormatBatchTest, ::testing::ValuesIn(kPrefill),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace kv_formats
}  // namespace
}  // namespace llmsvc::hal::cpu
