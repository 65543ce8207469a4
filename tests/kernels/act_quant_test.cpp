// SPDX-License-Identifier: Apache-2.0
// Activation quantization: the SIMD Q8 quantizer equals the scalar reference on every target,
// and both Q8 and Q8K reconstruct the input within half a quantization step.
#include "hal/cpu/quant/act_quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/aligned_buffer.h"
#include "tests/common/simd_targets.h"

namespace llmsvc::hal::cpu {
namespace {

// Normal activations with outliers and an all-zero block (n >= 64): what the quantizer must
// keep within half a step.
std::vector<float> acts_with_outliers(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  for (int64_t i = 0; i < n; i += 97) x[i] *= 30.f;  // outliers, as in real activations
  for (int i = 0; i < 32; ++i) x[32 + i] = 0.f;      // an all-zero block
  return x;
}

TEST(ActQuant, Q8SimdMatchesReferenceOnEveryTarget) {
  const int64_t cols = 256;
  const int n_tokens = 21;  // a full token group and a partial one
  const auto x = acts_with_outliers(cols * n_tokens, 3);
  for (int32_t zp : {0, 8, 128}) {
    std::vector<int8_t> q(cols * n_tokens);
    std::vector<float> d(n_tokens * cols / 32), s(d.size());
    std::vector<int32_t> c(8 * d.size());
    quantize_q8_ref(x.data(), q.data(), d.data(), s.data(), c.data(), cols * n_tokens, zp);
    test::for_each_simd_target([&] {
      AlignedBuffer mem;
      ASSERT_TRUE(mem.allocate(ActQ8::bytes(cols, n_tokens)));
      const ActQ8 a = ActQ8::in(mem.data(), cols, n_tokens);
      const int64_t nblk = n_tokens * cols / 32;
      quantize_q8(x.data(), a, 0, nblk / 3, zp);  // in pieces, as threads do
      quantize_q8(x.data(), a, nblk / 3, nblk, zp);
      for (int64_t b = 0; b < nblk; ++b) {
        const int64_t o = a.index(static_cast<int>(b / (cols / 32)), b % (cols / 32));
        for (int i = 0; i < 32; ++i) ASSERT_EQ(a.q[o * 32 + i], q[b * 32 + i]) << b << " " << i;
        ASSERT_EQ(a.d[o], d[b]);
        ASSERT_EQ(a.s[o], s[b]);
        for (int g = 0; g < 8; ++g) ASSERT_EQ(a.bias[o * 8 + g], c[b * 8 + g]) << b << " group " << g;
      }
    });
  }
}

TEST(ActQuant, Q8EntryInvertsIndex) {
  for (int n_tokens : {1, 5, 16, 37}) {
    ActQ8 a;
    a.cols = 96;
    a.n_tokens = n_tokens;
    for (int64_t o = 0; o < n_tokens * 3; ++o) {
      int t;
      int64_t b;
      a.entry(o, &t, &b);
      ASSERT_EQ(a.index(t, b), o);
    }
  }
}

TEST(ActQuant, Q8ReconstructsWithinHalfStep) {
  const int64_t n = 1024;
  const auto x = acts_with_outliers(n, 4);
  std::vector<int8_t> q(n);
  std::vector<float> d(n / 32), s(n / 32);
  std::vector<int32_t> c(8 * n / 32);
  quantize_q8_ref(x.data(), q.data(), d.data(), s.data(), c.data(), n, 8);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0.f;
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      amax = std::max(amax, std::fabs(x[b * 32 + i]));
      sum += q[b * 32 + i];
    }
    // d is kept fp16-rounded (as ggml stores it): allow its 2^-11 relative error on top.
    const float step = amax / 127.f;
    for (int i = 0; i < 32; ++i) {
      EXPECT_LE(std::fabs(x[b * 32 + i] - q[b * 32 + i] * d[b]), step * (0.5f + 127.f / 2048.f) + 1e-7f);
      EXPECT_LE(std::abs(q[b * 32 + i]), 127);
    }
    for (int g = 0; g < 8; ++g) {
      const int gsum = q[b * 32 + 4 * g] + q[b * 32 + 4 * g + 1] + q[b * 32 + 4 * g + 2] + q[b * 32 + 4 * g + 3];
      EXPECT_EQ(c[b * 8 + g], kGroupBias - 8 * gsum);
    }
    EXPECT_NEAR(s[b], d[b] * sum, std::fabs(d[b] * sum) * 2e-3f + 1e-7f);
  }
}

TEST(ActQuant, Q8KReconstructsWithinHalfStep) {
  const int64_t cols = 512;
  const int n_tokens = 19;  // a full token group and a partial one
  auto x = acts_with_outliers(cols * n_tokens, 5);
  for (int i = 0; i < 256; ++i) x[256 + i] = 0.f;  // an all-zero superblock
  AlignedBuffer mem;
  ASSERT_TRUE(mem.allocate(ActQ8K::bytes(cols, n_tokens)));
  const ActQ8K a = ActQ8K::in(mem.data(), cols, n_tokens);
  quantize_q8k(x.data(), a, 0, 16);  // split at a token group, as threads do
  quantize_q8k(x.data(), a, 16, n_tokens);
  for (int t = 0; t < n_tokens; ++t) {
    for (int64_t sb = 0; sb < cols / 256; ++sb) {
      const float* xs = x.data() + t * cols + sb * 256;
      float amax = 0.f, signed_max = 0.f;
      for (int i = 0; i < 256; ++i) {
        if (std::fabs(xs[i]) > amax) {
          amax = std::fabs(xs[i]);
          signed_max = xs[i];
        }
      }
      const float d = a.d[a.index_sb(t, sb)];
      EXPECT_NEAR(d, -signed_max / 127.f, 1e-6f * amax);  // ggml: the signed extreme maps to -127
      for (int b = 0; b < 8; ++b) {
        const int8_t* q = a.q + 32 * a.index(t, sb * 8 + b);
        int lo = 0, hi = 0;
        for (int i = 0; i < 32; ++i) {
          EXPECT_LE(std::fabs(xs[32 * b + i] - q[i] * d), amax / 127.f * 0.5001f + 1e-7f);
          (i < 16 ? lo : hi) += q[i];
        }
        const int32_t pk = a.s16[a.index(t, sb * 8 + b)];
        EXPECT_EQ(static_cast<int16_t>(pk & 0xFFFF), lo);
        EXPECT_EQ(pk >> 16, hi);
        for (int g = 0; g < 8; ++g) {
          EXPECT_EQ(a.z6[8 * a.index(t, sb * 8 + b) + g], -32 * (q[4 * g] + q[4 * g + 1] + q[4 * g + 2] + q[4 * g + 3]));
        }
      }
    }
  }
}

}  // namespace
}  // namespace llmsvc::hal::cpu
