// SPDX-License-Identifier: Apache-2.0
// fp16 / bf16 conversions: scalar against exact double-arithmetic references and known
// values; row converters against the scalar ones on every SIMD target.
#include "hal/host/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tests/common/simd_targets.h"

namespace llmsvc::hal::cpu {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Independent references in exact double arithmetic (round to nearest even via nearbyint).
float ref_fp16_to_fp32(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(sign * INFINITY);
  if (e == 0) return static_cast<float>(sign * std::ldexp(m, -24));
  return static_cast<float>(sign * std::ldexp(1024 + m, e - 25));
}

uint16_t ref_fp32_to_fp16(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (std::isnan(f)) return 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(std::nearbyint(a * std::ldexp(1.0, 24)));
  int ex;
  std::frexp(a, &ex);
  int e = ex - 1;  // a in [2^e, 2^(e+1))
  double q = std::nearbyint(std::ldexp(a, 10 - e));  // 1024 .. 2048
  if (q == 2048) {
    q = 1024;
    ++e;
  }
  if (e > 15) return sign | 0x7c00;
  return sign | static_cast<uint16_t>(((e + 15) << 10) | (static_cast<int>(q) - 1024));
}

// Floats around every fp16 boundary: all fp16 values, midpoints between neighbours, and
// the floats just beside the midpoints, plus overflow / underflow / NaN edge cases.
std::vector<float> probe_floats() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float a = fp16_to_fp32(static_cast<uint16_t>(h)), b = fp16_to_fp32(static_cast<uint16_t>(h + 1));
    const float mid = (a + b) / 2;  // exact in fp32
    for (float f : {a, mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) {
      v.push_back(f);
      v.push_back(-f);
    }
  }
  for (float f : {65504.f, 65519.f, 65520.f, 1e6f, std::numeric_limits<float>::infinity(), 1e-30f, 2.9802322e-08f,
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::quiet_NaN()}) {
    v.push_back(f);
    v.push_back(-f);
  }
  std::mt19937 rng(1);
  for (int i = 0; i < 200000; ++i) v.push_back(float_of(rng()));
  return v;
}

TEST(Fp16, ToFp32ExactForAllValues) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const float ref = ref_fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(f)) << h;
    } else {
      EXPECT_EQ(bits_of(f), bits_of(ref)) << h;
    }
  }
}

TEST(Fp16, FromFp32RoundsToNearestEven) {
  for (float f : probe_floats()) {
    const uint16_t h = fp32_to_fp16(f);
    const uint16_t rh = ref_fp32_to_fp16(f);
    if (std::isnan(f)) {
      EXPECT_EQ(h & 0x7e00, 0x7e00) << "NaN must stay a quiet NaN";
    } else {
      ASSERT_EQ(h, rh) << "f=" << f << " bits=" << std::hex << bits_of(f);
    }
  }
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(65504.f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.f), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(fp32_to_fp16(5.9604645e-08f), 0x0001);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16_to_fp32(0x8001), -5.9604645e-08f);
}

TEST(Bf16, RoundTripAndRounding) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(float_of(0x3f808000)), 0x3f80);  // tie to even (down)
  EXPECT_EQ(fp32_to_bf16(float_of(0x3f818000)), 0x3f82);  // tie to even (up)
  EXPECT_EQ(fp32_to_bf16(float_of(0x3f808001)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(float_of(0x7f7fffff)), 0x7f80);  // overflow to inf
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(float_of(0x7f800001)))));  // sNaN must not become inf
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(fp32_to_bf16(f), h);
    }
  }
}

TEST(Fp16, RowConvertersMatchScalarOnEveryTarget) {
  const std::vector<float> src = probe_floats();
  const int64_t n = static_cast<int64_t>(src.size()) - 3;  // odd length: exercises the tails
  test::for_each_simd_target([&] {
    std::vector<uint16_t> h(n), b(n);
    fp32_to_fp16_row(src.data() + 1, h.data(), n);  // unaligned start
    fp32_to_bf16_row(src.data() + 1, b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float f = src[i + 1];
      if (std::isnan(f)) {
        ASSERT_EQ(h[i] & 0x7e00, 0x7e00);
        ASSERT_TRUE(std::isnan(bf16_to_fp32(b[i])));
      } else {
        ASSERT_EQ(h[i], fp32_to_fp16(f)) << i << " " << f;
        ASSERT_EQ(b[i], fp32_to_bf16(f)) << i << " " << f;
      }
    }
    std::vector<float> fh(n), fb(n);
    fp16_to_fp32_row(h.data(), fh.data(), n);
    bf16_to_fp32_row(b.data(), fb.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float eh = fp16_to_fp32(h[i]), eb = bf16_to_fp32(b[i]);
      if (std::isnan(eh)) {
        ASSERT_TRUE(std::isnan(fh[i]));
      } else {
        ASSERT_EQ(bits_of(fh[i]), bits_of(eh)) << i;
      }
      if (std::isnan(eb)) {
        ASSERT_TRUE(std::isnan(fb[i]));
      } else {
        ASSERT_EQ(bits_of(fb[i]), bits_of(eb)) << i;
      }
    }
  });
}

}  // namespace
}  // namespace llmsvc::hal::cpu
