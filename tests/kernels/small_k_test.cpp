// SPDX-License-Identifier: Apache-2.0
// Float weights with few columns (a LoRA adapter's B, K = its rank): the block kernel gives the
// bits of llama.cpp's dot-product tail for such shapes (F32: fused in float; F16, BF16: products
// in float added in double; columns in order), for every SIMD target, row range and token count,
// from the rows as stored and from the k-major panels packed at load.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "hal/cpu/quant/row_kernels.h"
#include "hal/host/fp16.h"
#include "tests/common/simd_targets.h"

namespace llmsvc::hal::cpu {
namespace {

float weight(WeightType t, const std::vector<uint8_t>& w, int64_t r, int64_t k, int64_t cols) {
  if (t == WeightType::F32) {
    float v;
    std::memcpy(&v, w.data() + (r * cols + k) * 4, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, w.data() + (r * cols + k) * 2, 2);
  return t == WeightType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

float reference(WeightType t, const std::vector<uint8_t>& w, int64_t r, const float* x, int64_t cols) {
  if (t == WeightType::F32) {
    float s = 0.0f;
    for (int64_t k = 0; k < cols; ++k) s = std::fma(weight(t, w, r, k, cols), x[k], s);
    return s;
  }
  double s = 0.0;
  for (int64_t k = 0; k < cols; ++k) {
    const float xv = t == WeightType::F16 ? fp16_to_fp32(fp32_to_fp16(x[k])) : bf16_to_fp32(fp32_to_bf16(x[k]));
    s += static_cast<double>(weight(t, w, r, k, cols) * xv);
  }
  return static_cast<float>(s);
}

TEST(SmallK, MatchesTheDotProductTailBitForBit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  test::for_each_simd_target([&](int64_t target) {
    for (WeightType t : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
      // F32's reference is fused: targets without a fused vector FMA round each product.
      if (t == WeightType::F32 && !test::has_fma(target)) continue;
      const size_t eb = t == WeightType::F32 ? 4 : 2;
      for (int64_t cols : {4, 8, 15, 48}) {
        for (int64_t rows : {5, 37, 51}) {
          for (int n_tokens : {1, 3, 19}) {  // 19: past a group of 16 tokens
            std::vector<uint8_t> w(rows * cols * eb);
            for (int64_t i = 0; i < rows * cols; ++i) {
              const float v = nd(rng);
              if (t == WeightType::F32) {
                std::memcpy(w.data() + i * 4, &v, 4);
              } else {
                const uint16_t h = t == WeightType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
                std::memcpy(w.data() + i * 2, &h, 2);
              }
            }
            std::vector<float> x(n_tokens * cols), y(n_tokens * rows, -1.0f);
            for (float& v : x) v = nd(rng);
            RowGemmArgs a;
            a.type = t;
            a.w = w.data();
            a.row_bytes = cols * eb;
            a.cols = cols;
            a.rows = rows;
            a.r_end = rows;
            a.x = x.data();
            a.n_tokens = n_tokens;
            a.y = y.data();
            a.ldy = rows;
            std::vector<float> kmajor(kmajor_floats(rows, cols));
            pack_kmajor(t, w.data(), a.row_bytes, rows, cols, kmajor.data());
            for (const auto& [packed, first] : {std::pair{false, 1}, std::pair{true, 0}, std::pair{true, 1}}) {
              std::fill(y.begin(), y.end(), -1.0f);
              a.kmajor = packed && wants_kmajor(t, rows, cols) ? kmajor.data() : nullptr;
              a.r_begin = first;  // 1: a thread's share that starts inside a panel
              row_gemm(a);
              for (int tk = 0; tk < n_tokens; ++tk) {
                if (first == 1) {
                  EXPECT_EQ(y[tk * rows], -1.0f) << "row 0 is not this share's";
                }
                for (int64_t r = first; r < rows; ++r)
                  ASSERT_EQ(y[tk * rows + r], reference(t, w, r, x.data() + tk * cols, cols))
                      << "type " << static_cast<int>(t) << " cols " << cols << " rows " << rows << " token " << tk
                      << " row " << r << (packed ? " (k-major panels)" : "");
              }
            }
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace llmsvc::hal::cpu
