// SPDX-License-Identifier: Apache-2.0
// KV block codecs (policy/compression/kv_codec.h) against a plain scalar reference written from the
// format description in hal/kv_format.h and the codec's stated rules: layout (params and
// packed codes), round-trip error, requantize == quantize(dequantize), edge cases (constant
// groups, +-0, subnormals, the f16 range's ends, inf and NaN), on every SIMD target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hal/host/fp16.h"
#include "policy/compression/kv_codec.h"
#include "tests/common/simd_targets.h"

namespace llmsvc::policy {
namespace {

using hal::KvBlockShape;
using hal::KvFormat;
using hal::KvPart;
using hal::fp16_to_fp32;
using hal::fp32_to_fp16;

constexpr KvFormat kQFormats[] = {KvFormat::q8, KvFormat::q4, KvFormat::q3, KvFormat::q2};
constexpr KvPart kParts[] = {KvPart::key, KvPart::value};

const char* name(KvFormat f) {
  switch (f) {
    case KvFormat::q8: return "q8";
    case KvFormat::q4: return "q4";
    case KvFormat::q3: return "q3";
    case KvFormat::q2: return "q2";
    case KvFormat::f16: break;
  }
  return "f16";
}
const char* name(KvPart p) { return p == KvPart::key ? "key" : "value"; }

// ---- The reference: the format as documented, element by element. ----

// A decoded view of a q block: params per group and one code per element.
struct RefBlock {
  std::vector<float> min, scale;  // per group
  std::vector<int> code;          // [token][channel]
};

// Group of element (t, c): the key channel, or the value (token, head).
size_t group_of(KvPart part, const KvBlockShape& s, int t, int c) {
  return part == KvPart::key ? static_cast<size_t>(c) : static_cast<size_t>(t) * s.n_head_kv + c / s.head_dim;
}
size_t n_groups(KvPart part, const KvBlockShape& s) {
  return part == KvPart::key ? static_cast<size_t>(s.kv_dim()) : static_cast<size_t>(s.n_tokens) * s.n_head_kv;
}

// Reads a block's bytes as hal/kv_format.h lays them out: f16 mins, f16 scales, code rows with
// channel j at bits [j * B, +B) of the row's little-endian bit stream, read bit by bit.
RefBlock parse(KvPart part, const KvBlockShape& s, KvFormat f, const std::vector<uint8_t>& bytes) {
  const int B = hal::kv_format_bits(f);
  const size_t g = n_groups(part, s), kv_dim = static_cast<size_t>(s.kv_dim());
  EXPECT_EQ(bytes.size(), g * 4 + static_cast<size_t>(s.n_tokens) * kv_dim * B / 8);
  RefBlock r;
  for (size_t i = 0; i < g; ++i) {
    uint16_t mn, sc;
    std::memcpy(&mn, bytes.data() + 2 * i, 2);
    std::memcpy(&sc, bytes.data() + 2 * (g + i), 2);
    r.min.push_back(fp16_to_fp32(mn));
    r.scale.push_back(fp16_to_fp32(sc));
  }
  const uint8_t* codes = bytes.data() + 4 * g;
  const size_t row_bytes = kv_dim * B / 8;
  for (int t = 0; t < s.n_tokens; ++t)
    for (size_t j = 0; j < kv_dim; ++j) {
      int code = 0;
      for (int k = 0; k < B; ++k) {
        const size_t bit = j * B + k;
        code |= ((codes[t * row_bytes + bit / 8] >> (bit % 8)) & 1) << k;
      }
      r.code.push_back(code);
    }
  return r;
}

// The smallest f16 value >= x (x >= 0 finite, below 65504).
float f16_ceil(double x) {
  uint16_t h = fp32_to_fp16(static_cast<float>(x));
  while (fp16_to_fp32(h) < x) ++h;  // positive f16 bit patterns are ordered like their values
  while (h > 0 && fp16_to_fp32(static_cast<uint16_t>(h - 1)) >= x) --h;
  return fp16_to_fp32(h);
}

// Expected params from the f16 input (finite values only), and the exact code quotient.
struct RefParams {
  std::vector<float> min, scale;
};
RefParams ref_params(KvPart part, const KvBlockShape& s, KvFormat f, const std::vector<uint16_t>& x) {
  const size_t g = n_groups(part, s);
  const double qmax = (1 << hal::kv_format_bits(f)) - 1;
  std::vector<double> lo(g, INFINITY), hi(g, -INFINITY);
  for (int t = 0; t < s.n_tokens; ++t)
    for (int c = 0; c < s.kv_dim(); ++c) {
      const double v = fp16_to_fp32(x[static_cast<size_t>(t) * s.kv_dim() + c]);
      if (!std::isfinite(v)) continue;
      const size_t i = group_of(part, s, t, c);
      lo[i] = std::min(lo[i], v);
      hi[i] = std::max(hi[i], v);
    }
  RefParams p;
  for (size_t i = 0; i < g; ++i) {
    if (lo[i] > hi[i]) lo[i] = hi[i] = 0;  // no finite value
    p.min.push_back(static_cast<float>(lo[i] + 0.0));
    p.scale.push_back(f16_ceil((hi[i] - lo[i]) / qmax));
  }
  return p;
}

// ---- Test data ----

std::vector<uint16_t> random_block(const KvBlockShape& s, std::mt19937& rng, float amp) {
  std::uniform_real_distribution<float> u(-amp, amp);
  std::vector<uint16_t> x(static_cast<size_t>(s.n_tokens) * s.kv_dim());
  for (auto& h : x) h = fp32_to_fp16(u(rng));
  // Outlier channels, as keys have: a few channels 30x larger.
  for (int c = 3; c < s.kv_dim(); c += 37)
    for (int t = 0; t < s.n_tokens; ++t) {
      auto& h = x[static_cast<size_t>(t) * s.kv_dim() + c];
      h = fp32_to_fp16(fp16_to_fp32(h) * 30.0f);
    }
  return x;
}

std::vector<uint8_t> quantize(KvPart part, const KvBlockShape& s, const std::vector<uint16_t>& x, KvFormat f) {
  std::vector<uint8_t> out(hal::kv_block_bytes(f, part, s), 0xcd);
  kv_quantize(part, s, x.data(), f, out.data());
  return out;
}
std::vector<uint16_t> dequantize(KvPart part, const KvBlockShape& s, const std::vector<uint8_t>& b, KvFormat f) {
  std::vector<uint16_t> out(static_cast<size_t>(s.n_tokens) * s.kv_dim(), 0xffff);
  kv_dequantize(part, s, f, b.data(), out.data());
  return out;
}

// Checks one block's encoding against the reference: params exactly, every code the nearest
// one (a code off by one only where the quotient is within float rounding of a tie), and the
// decode dequantize() gives. Returns the number of near-tie codes.
int check_block(KvPart part, const KvBlockShape& s, KvFormat f, const std::vector<uint16_t>& x,
                const std::vector<uint8_t>& bytes) {
  const RefBlock got = parse(part, s, f, bytes);
  const RefParams want = ref_params(part, s, f, x);
  const int qmax = (1 << hal::kv_format_bits(f)) - 1;
  int ties = 0;
  for (size_t i = 0; i < want.min.size(); ++i) {
    EXPECT_EQ(got.min[i], want.min[i]) << "group " << i;
    EXPECT_FALSE(std::signbit(got.min[i]) && got.min[i] == 0) << "-0 stored as min, group " << i;
    EXPECT_EQ(got.scale[i], want.scale[i]) << "group " << i;
  }
  const std::vector<uint16_t> deq = dequantize(part, s, bytes, f);
  for (int t = 0; t < s.n_tokens; ++t)
    for (int c = 0; c < s.kv_dim(); ++c) {
      const size_t e = static_cast<size_t>(t) * s.kv_dim() + c, g = group_of(part, s, t, c);
      const double v = fp16_to_fp32(x[e]);
      const double mn = got.min[g], sc = got.scale[g];
      int code;
      double q = 0;
      if (std::isnan(v) || v == -INFINITY) {
        code = 0;
      } else if (v == INFINITY) {
        code = sc > 0 ? qmax : 0;
      } else {
        q = sc > 0 ? (v - mn) / sc : 0.0;
        code = static_cast<int>(std::clamp(std::nearbyint(q), 0.0, static_cast<double>(qmax)));
      }
      const int c_got = got.code[e];
      if (c_got != code) {
        const bool near_tie = std::fabs(std::fabs(q - std::floor(q)) - 0.5) < 1e-6 * (1 + q) && std::abs(c_got - code) == 1;
        EXPECT_TRUE(near_tie) << "t " << t << " c " << c << " x " << v << " code " << c_got << " want " << code;
        ties += near_tie;
      }
      // The decode, as specified: f16(min + scale * code), min + scale * code in f32, saturated.
      const float dec = std::clamp(static_cast<float>(mn) + static_cast<float>(sc) * static_cast<float>(c_got), -65504.0f,
                                   65504.0f);
      EXPECT_EQ(deq[e], fp32_to_fp16(dec)) << "t " << t << " c " << c;
      // Round-trip error of finite inputs: half a step, plus f16's rounding of the decode.
      if (std::isfinite(v)) {
        const double err = std::fabs(v - fp16_to_fp32(deq[e]));
        const double bound = sc / 2 * (1 + 1e-6) + std::ldexp(std::fabs(dec), -11) + 0x1p-25;
        EXPECT_LE(err, bound) << "t " << t << " c " << c << " x " << v;
      }
    }
  return ties;
}

struct Shape {
  int n_tokens, n_head_kv, head_dim;
};
constexpr Shape kShapes[] = {{16, 3, 64}, {16, 2, 128}, {5, 3, 64}, {1, 4, 8}, {16, 4, 6}, {16, 2, 20}, {7, 1, 8}};

TEST(KvCodec, LayoutMatchesReference) {
  test::for_each_simd_target([] {
    for (const Shape& sh : kShapes)
      for (KvPart part : kParts)
        for (KvFormat f : kQFormats) {
          const KvBlockShape s{sh.n_tokens, sh.n_head_kv, sh.head_dim};
          SCOPED_TRACE(::testing::Message() << name(part) << " " << name(f) << " " << sh.n_tokens << "x" << sh.n_head_kv
                                            << "x" << sh.head_dim);
          std::mt19937 rng(11);
          const std::vector<uint16_t> x = random_block(s, rng, 1.0f);
          const int ties = check_block(part, s, f, x, quantize(part, s, x, f));
          EXPECT_LE(ties, s.n_tokens * s.kv_dim() / 100 + 1);
          if (HasFailure()) return;
        }
  });
}

// Every target writes the same bytes (they share one definition of the arithmetic).
TEST(KvCodec, SameBytesOnEveryTarget) {
  const KvBlockShape s{16, 3, 64};
  std::mt19937 rng(5);
  const std::vector<uint16_t> x = random_block(s, rng, 3.0f);
  for (KvPart part : kParts)
    for (KvFormat f : kQFormats) {
      SCOPED_TRACE(::testing::Message() << name(part) << " " << name(f));
      std::vector<uint8_t> first;
      test::for_each_simd_target([&] {
        const std::vector<uint8_t> b = quantize(part, s, x, f);
        if (first.empty()) first = b;
        EXPECT_EQ(b, first);
      });
    }
}

// Requantizing equals quantizing the dequantized block, byte for byte; the same format copies.
TEST(KvCodec, RequantizeEqualsQuantizeOfDequantized) {
  test::for_each_simd_target([] {
    for (const Shape& sh : kShapes)
      for (KvPart part : kParts)
        for (KvFormat from : kQFormats)
          for (KvFormat to : kQFormats) {
            const KvBlockShape s{sh.n_tokens, sh.n_head_kv, sh.head_dim};
            SCOPED_TRACE(::testing::Message() << name(part) << " " << name(from) << "->" << name(to) << " " << sh.n_tokens
                                              << "x" << sh.n_head_kv << "x" << sh.head_dim);
            std::mt19937 rng(3);
            const std::vector<uint16_t> x = random_block(s, rng, 2.0f);
            const std::vector<uint8_t> src = quantize(part, s, x, from);
            std::vector<uint8_t> direct(hal::kv_block_bytes(to, part, s), 0xab);
            kv_requantize(part, s, from, src.data(), to, direct.data());
            if (from == to) {
              EXPECT_EQ(direct, src);  // a copy (re-encoding the decode could move a code by one)
            } else {
              EXPECT_EQ(direct, quantize(part, s, dequantize(part, s, src, from), to));
            }
          }
  });
}

// Blocks built to hit the edge cases, each checked against the reference like random data.
struct Edge {
  const char* name;
  float (*value)(int t, int c, std::mt19937& rng);
};
float uniform(std::mt19937& rng) { return std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng); }
const Edge kEdges[] = {
    {"constant_groups", [](int, int c, std::mt19937&) { return c % 5 == 0 ? 0.0f : 0.25f * static_cast<float>(c % 7); }},
    {"signed_zeros", [](int t, int c, std::mt19937&) { return (t + c) % 2 ? -0.0f : 0.0f; }},
    {"zeros_and_one", [](int t, int c, std::mt19937&) { return (t == 2 && c % 3 == 0) ? 1.0f : -0.0f; }},
    {"subnormals", [](int, int, std::mt19937& rng) { return uniform(rng) * 0x1p-16f; }},
    {"tiny_range", [](int t, int, std::mt19937&) { return 1.0f + static_cast<float>(t % 2) * 0x1p-10f; }},
    {"f16_extremes", [](int t, int c, std::mt19937&) { return (t + c) % 3 == 0 ? 65504.0f : (t + c) % 3 == 1 ? -65504.0f : 0.5f; }},
    {"large_offset", [](int, int, std::mt19937& rng) { return 3000.0f + uniform(rng) * 4.0f; }},
    {"inf_nan_mixed", [](int t, int c, std::mt19937& rng) {
       const int k = (t * 31 + c * 7) % 13;
       return k == 0 ? INFINITY : k == 1 ? -INFINITY : k == 2 ? NAN : uniform(rng);
     }},
    {"all_nan", [](int, int, std::mt19937&) { return NAN; }},
    {"inf_in_constant", [](int t, int, std::mt19937&) { return t == 0 ? INFINITY : 2.0f; }},
};

TEST(KvCodec, EdgeCases) {
  test::for_each_simd_target([] {
    for (const Edge& edge : kEdges)
      for (KvPart part : kParts)
        for (KvFormat f : kQFormats) {
          const KvBlockShape s{16, 3, 64};
          SCOPED_TRACE(::testing::Message() << edge.name << " " << name(part) << " " << name(f));
          std::mt19937 rng(9);
          std::vector<uint16_t> x(static_cast<size_t>(s.n_tokens) * s.kv_dim());
          for (int t = 0; t < s.n_tokens; ++t)
            for (int c = 0; c < s.kv_dim(); ++c) x[static_cast<size_t>(t) * s.kv_dim() + c] = fp32_to_fp16(edge.value(t, c, rng));
          const std::vector<uint8_t> b = quantize(part, s, x, f);
          check_block(part, s, f, x, b);
          for (const uint16_t h : dequantize(part, s, b, f)) ASSERT_TRUE(std::isfinite(fp16_to_fp32(h)));
          if (HasFailure()) return;
        }
  });
}

// What the header promises for particular values: a constant group decodes exactly, a group
// without finite values decodes to 0, +inf to the top of the finite range, NaN to its bottom.
TEST(KvCodec, StatedValues) {
  const KvBlockShape s{4, 1, 8};
  std::vector<uint16_t> x(4 * 8);
  for (int t = 0; t < 4; ++t)
    for (int c = 0; c < 8; ++c) {
      float v = 1.5f;                                     // channel 0: constant
      if (c == 1) v = NAN;                                // channel 1: no finite value
      if (c == 2) v = t == 0 ? INFINITY : t == 1 ? NAN : static_cast<float>(t);  // range [2, 3]
      if (c >= 3) v = static_cast<float>(t * c);
      x[t * 8 + c] = fp32_to_fp16(v);
    }
  for (KvFormat f : kQFormats) {
    SCOPED_TRACE(name(f));
    const std::vector<uint16_t> d = dequantize(KvPart::key, s, quantize(KvPart::key, s, x, f), f);
    for (int t = 0; t < 4; ++t) {
      EXPECT_EQ(fp16_to_fp32(d[t * 8 + 0]), 1.5f);
      EXPECT_EQ(fp16_to_fp32(d[t * 8 + 1]), 0.0f);
    }
    EXPECT_GE(fp16_to_fp32(d[0 * 8 + 2]), 3.0f);  // +inf: top code
    EXPECT_EQ(fp16_to_fp32(d[1 * 8 + 2]), 2.0f);  // NaN: code 0 = min
    EXPECT_EQ(fp16_to_fp32(d[2 * 8 + 2]), 2.0f);
  }
}

// Empty blocks write nothing; f16 "dequantizes" by copying.
TEST(KvCodec, EmptyAndF16) {
  const KvBlockShape empty{0, 3, 64};
  uint8_t guard = 0x5a;
  kv_quantize(KvPart::key, empty, nullptr, KvFormat::q4, &guard);
  kv_requantize(KvPart::value, empty, KvFormat::q8, nullptr, KvFormat::q2, &guard);
  kv_dequantize(KvPart::value, empty, KvFormat::q8, nullptr, nullptr);
  EXPECT_EQ(guard, 0x5a);
  const KvBlockShape s{3, 1, 8};
  std::vector<uint16_t> x(24), y(24);
  for (int i = 0; i < 24; ++i) x[i] = fp32_to_fp16(static_cast<float>(i) - 7.25f);
  kv_dequantize(KvPart::key, s, KvFormat::f16, x.data(), y.data());
  EXPECT_EQ(x, y);
}

// Narrower formats lose precision monotonically: the mean error of q2 > q3 > q4 > q8 on random data.
TEST(KvCodec, ErrorGrowsAsBitsShrink) {
  const KvBlockShape s{16, 3, 64};
  std::mt19937 rng(21);
  const std::vector<uint16_t> x = random_block(s, rng, 1.0f);
  for (KvPart part : kParts) {
    double prev = 0;
    for (KvFormat f : kQFormats) {
      const std::vector<uint16_t> d = dequantize(part, s, quantize(part, s, x, f), f);
      double err = 0;
      for (size_t i = 0; i < x.size(); ++i) err += std::fabs(fp16_to_fp32(x[i]) - fp16_to_fp32(d[i]));
      EXPECT_GT(err, prev) << name(part) << " " << name(f);
      prev = err;
    }
  }
}

}  // namespace
}  // namespace llmsvc::policy
