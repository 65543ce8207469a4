// SPDX-License-Identifier: Apache-2.0
// Random GGUF weight bytes (plausible fp16 scales) and activations (with outliers) for the
// matmul tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "hal/host/fp16.h"
#include "hal/weight_type.h"

namespace llmsvc::hal::cpu {

// Random bytes of a rows x cols weight with plausible fp16 scales.
inline std::vector<uint8_t> random_weight(WeightType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> w(rb * rows);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  auto put = [&](uint8_t* p, float v) {
    const uint16_t h = fp32_to_fp16(v);
    std::memcpy(p, &h, 2);
  };
  const int64_t nblk = rows * cols / block_elems(t);
  const size_t bs = block_bytes(t);
  for (int64_t i = 0; i < nblk; ++i) {
    uint8_t* b = w.data() + i * bs;
    switch (t) {
      case WeightType::F32: {
        const float v = nd(rng);
        std::memcpy(b, &v, 4);
        break;
      }
      case WeightType::F16: put(b, nd(rng)); break;
      case WeightType::BF16: {
        const uint16_t h = fp32_to_bf16(nd(rng));
        std::memcpy(b, &h, 2);
        break;
      }
      case WeightType::Q4_0: case WeightType::Q5_0: case WeightType::Q8_0: put(b, 0.01f * (1.f + std::fabs(nd(rng)))); break;
      case WeightType::Q4_1: case WeightType::Q5_1: case WeightType::Q4_K: case WeightType::Q5_K:
        put(b, 0.01f * (1.f + std::fabs(nd(rng))));
        put(b + 2, 0.02f * nd(rng));
        break;
      case WeightType::Q6_K: put(b + 208, 0.002f * (1.f + std::fabs(nd(rng)))); break;
    }
  }
  return w;
}

inline std::vector<float> random_acts(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  for (int64_t i = 5; i < n; i += 131) x[i] *= 20.f;
  return x;
}

}  // namespace llmsvc::hal::cpu
