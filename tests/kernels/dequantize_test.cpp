// SPDX-License-Identifier: Apache-2.0
// dequantize_row: hand-built blocks with known values, and random blocks against llama.cpp's
// Python reference (golden_blocks.inc from gen_golden_blocks.py).
#include "hal/host/dequantize.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "hal/weight_blocks.h"
#include "hal/host/fp16.h"

namespace llmsvc::hal::cpu {
namespace {

#include "golden_blocks.inc"

std::vector<float> deq(WeightType t, const void* p, int64_t n) {
  std::vector<float> y(n);
  dequantize_row(t, p, y.data(), n);
  return y;
}

TEST(Dequantize, Q4_0Known) {
  BlockQ4_0 b{};
  b.d = 0x3c00;  // 1.0
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = deq(WeightType::Q4_0, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j - 8.f);
    EXPECT_EQ(y[j + 16], 7.f - j);
  }
  EXPECT_EQ(y[0], -8.f);
  EXPECT_EQ(y[16], 7.f);
}

TEST(Dequantize, Q4_1Known) {
  BlockQ4_1 b{};
  b.d = 0x3800;  // 0.5
  b.m = 0xbc00;  // -1
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = deq(WeightType::Q4_1, &b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * j - 1.f);
    EXPECT_EQ(y[j + 16], 0.5f * j - 1.f);
  }
  EXPECT_EQ(y[15], 6.5f);
}

TEST(Dequantize, Q5_0Known) {
  BlockQ5_0 b{};
  b.d = 0x3c00;
  const uint32_t qh = 0xAAAAAAAAu;  // the fifth bit is set for odd elements
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = deq(WeightType::Q5_0, &b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], static_cast<float>(((e % 16) | (e % 2 ? 16 : 0)) - 16)) << e;
  EXPECT_EQ(y[0], -16.f);
  EXPECT_EQ(y[31], 15.f);
}

TEST(Dequantize, Q5_1Known) {
  BlockQ5_1 b{};
  b.d = 0x3c00;
  b.m = 0x3800;  // 0.5
  const uint32_t qh = 0x0000FFFFu;  // elements 0..15 get the fifth bit
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = deq(WeightType::Q5_1, &b, 32);
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], static_cast<float>(e % 16 + (e < 16 ? 16 : 0)) + 0.5f) << e;
  EXPECT_EQ(y[15], 31.5f);
}

TEST(Dequantize, Q8_0Known) {
  BlockQ8_0 b{};
  b.d = 0x3400;  // 0.25
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j - 16);
  const auto y = deq(WeightType::Q8_0, &b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j - 16) / 4.f);
}

// Sub-block scales {1,2,3,4,37,6,7,8} and mins {0,2,4,6,8,50,12,14}: 37 and 50 need the
// upper two bits that live in the first 8 bytes.
constexpr uint8_t kKScales[12] = {0x81, 2, 3, 4, 0, 0xC2, 4, 6, 0x85, 0x26, 0xC7, 0xE8};
constexpr int kSc[8] = {1, 2, 3, 4, 37, 6, 7, 8};
constexpr int kMn[8] = {0, 2, 4, 6, 8, 50, 12, 14};

TEST(Dequantize, Q4_KKnown) {
  BlockQ4_K b{};
  b.d = 0x3c00;     // 1
  b.dmin = 0x3800;  // 0.5
  std::memcpy(b.scales, kKScales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  const auto y = deq(WeightType::Q4_K, &b, 256);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      EXPECT_EQ(y[64 * c + l], static_cast<float>(kSc[2 * c] * (l % 16)) - 0.5f * kMn[2 * c]);
      EXPECT_EQ(y[64 * c + 32 + l], static_cast<float>(kSc[2 * c + 1] * (15 - l % 16)) - 0.5f * kMn[2 * c + 1]);
    }
  }
  EXPECT_EQ(y[128 + 1], 37.f - 4.f);         // sub-block 4: scale 37, min 8 * 0.5
  EXPECT_EQ(y[128 + 32 + 0], 6.f * 15 - 25);  // sub-block 5: scale 6, min 50 * 0.5
}

TEST(Dequantize, Q5_KKnown) {
  BlockQ5_K b{};
  b.d = 0x3c00;
  b.dmin = 0x3800;
  std::memcpy(b.scales, kKScales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  for (int l = 0; l < 32; ++l) b.qh[l] = static_cast<uint8_t>(l * 7);
  const auto y = deq(WeightType::Q5_K, &b, 256);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int h0 = (b.qh[l] >> (2 * c)) & 1, h1 = (b.qh[l] >> (2 * c + 1)) & 1;
      EXPECT_EQ(y[64 * c + l], static_cast<float>(kSc[2 * c] * (l % 16 + 16 * h0)) - 0.5f * kMn[2 * c]);
      EXPECT_EQ(y[64 * c + 32 + l], static_cast<float>(kSc[2 * c + 1] * (15 - l % 16 + 16 * h1)) - 0.5f * kMn[2 * c + 1]);
    }
  }
  EXPECT_EQ(y[1], 1.f * (1 + 16));  // qh[1] = 7: bit 0 set
}

TEST(Dequantize, Q6_KKnown) {
  BlockQ6_K b{};
  b.d = 0x3800;  // 0.5
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<int8_t>(i - 8);
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<uint8_t>(i * 13);
  for (int i = 0; i < 64; ++i) b.qh[i] = static_cast<uint8_t>(i * 29 + 3);
  const auto y = deq(WeightType::Q6_K, &b, 256);
  for (int n = 0; n < 2; ++n) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* ql = b.ql + 64 * n;
      const uint8_t h = b.qh[32 * n + l];
      const int q[4] = {(ql[l] & 0xF) | ((h & 3) << 4), (ql[l + 32] & 0xF) | (((h >> 2) & 3) << 4),
                        (ql[l] >> 4) | (((h >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((h >> 6) & 3) << 4)};
      for (int k = 0; k < 4; ++k) {
        const int e = 128 * n + 32 * k + l;
        EXPECT_EQ(y[e], 0.5f * static_cast<float>((e / 16 - 8) * (q[k] - 32))) << e;
      }
    }
  }
  // Element 0: ql = 0, qh = 3 -> q = 48 - 32 = 16, scale -8: 0.5 * -8 * 16.
  EXPECT_EQ(y[0], -64.f);
}

TEST(Dequantize, FloatTypes) {
  const float f[3] = {1.5f, -2.25f, 1e-3f};
  EXPECT_EQ(deq(WeightType::F32, f, 3), std::vector<float>(f, f + 3));
  const uint16_t h[3] = {0x3c00, 0xc000, 0x0001};
  EXPECT_EQ(deq(WeightType::F16, h, 3), (std::vector<float>{1.f, -2.f, 5.9604645e-08f}));
  const uint16_t b[3] = {0x3f80, 0xc010, 0x0000};
  EXPECT_EQ(deq(WeightType::BF16, b, 3), (std::vector<float>{1.f, -2.25f, 0.f}));
}

template <size_t NB, size_t NV>
void expect_golden(WeightType t, const uint8_t (&bytes)[NB], const uint32_t (&values)[NV]) {
  const auto y = deq(t, bytes, static_cast<int64_t>(NV));
  ASSERT_EQ(NB, 2 * block_bytes(t));
  for (size_t i = 0; i < NV; ++i) {
    uint32_t u;
    std::memcpy(&u, &y[i], 4);
    ASSERT_EQ(u, values[i]) << "element " << i << ": " << y[i];
  }
}

TEST(Dequantize, MatchesGgufPyReference) {
  expect_golden(WeightType::Q4_0, kGoldenBytes_Q4_0, kGoldenValues_Q4_0);
  expect_golden(WeightType::Q4_1, kGoldenBytes_Q4_1, kGoldenValues_Q4_1);
  expect_golden(WeightType::Q5_0, kGoldenBytes_Q5_0, kGoldenValues_Q5_0);
  expect_golden(WeightType::Q5_1, kGoldenBytes_Q5_1, kGoldenValues_Q5_1);
  expect_golden(WeightType::Q8_0, kGoldenBytes_Q8_0, kGoldenValues_Q8_0);
  expect_golden(WeightType::Q4_K, kGoldenBytes_Q4_K, kGoldenValues_Q4_K);
  expect_golden(WeightType::Q5_K, kGoldenBytes_Q5_K, kGoldenValues_Q5_K);
  expect_golden(WeightType::Q6_K, kGoldenBytes_Q6_K, kGoldenValues_Q6_K);
}

}  // namespace
}  // namespace llmsvc::hal::cpu
