// SPDX-License-Identifier: Apache-2.0
// Synthetic KV chunk payloads in hal/kv_format.h's layouts, for swap tests, benchmarks and
// fuzz seeds: keys smooth along tokens per channel with a few large outlier channels (as
// real keys are), values noisier; quantized as the codecs do (keys per channel, values per
// token and head, asymmetric min/scale). Deterministic for a seed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "hal/host/fp16.h"
#include "hal/kv_format.h"
#include "policy/swap/chunk_file.h"

namespace llmsvc::test {

namespace kv_synth_detail {

inline void put_f16(std::vector<uint8_t>& out, float v) {
  const uint16_t h = hal::fp32_to_fp16(v);
  out.push_back(static_cast<uint8_t>(h));
  out.push_back(static_cast<uint8_t>(h >> 8));
}

}  // namespace kv_synth_detail

// Appends one block of x[token][channel] (n_tokens x kv_dim) in format f as `part`.
inline void append_kv_block(std::vector<uint8_t>& out, const std::vector<float>& x, hal::KvFormat f, hal::KvPart part,
                         const hal::KvBlockShape& s) {
  const int T = s.n_tokens, C = s.kv_dim(), H = s.n_head_kv, D = s.head_dim;
  if (f == hal::KvFormat::f16) {
    for (float v : x) kv_synth_detail::put_f16(out, v);
    return;
  }
  const int bits = hal::kv_format_bits(f), levels = (1 << bits) - 1;
  // Groups sharing one (min, scale): a channel over tokens (keys), a head of a token (values).
  const int groups = part == hal::KvPart::key ? C : T * H;
  std::vector<float> mn(groups, INFINITY), mx(groups, -INFINITY);
  auto group_of = [&](int t, int c) { return part == hal::KvPart::key ? c : t * H + c / D; };
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c) {
      const int g = group_of(t, c);
      mn[g] = std::min(mn[g], x[size_t(t) * C + c]);
      mx[g] = std::max(mx[g], x[size_t(t) * C + c]);
    }
  std::vector<float> scale(groups);
  for (int g = 0; g < groups; ++g) {
    mn[g] = hal::fp16_to_fp32(hal::fp32_to_fp16(mn[g]));
    scale[g] = hal::fp16_to_fp32(hal::fp32_to_fp16((mx[g] - mn[g]) / levels));
  }
  for (int g = 0; g < groups; ++g) kv_synth_detail::put_f16(out, mn[g]);
  for (int g = 0; g < groups; ++g) kv_synth_detail::put_f16(out, scale[g]);
  const size_t row = hal::kv_block_row_bytes(f, s);
  for (int t = 0; t < T; ++t) {
    std::vector<uint8_t> codes(row, 0);
    for (int c = 0; c < C; ++c) {
      const int g = group_of(t, c);
      const float q = scale[g] > 0 ? (x[size_t(t) * C + c] - mn[g]) / scale[g] : 0.0f;
      const int code = std::clamp(static_cast<int>(std::lround(q)), 0, levels);
      for (int k = 0; k < bits; ++k) {  // bits [c * bits, +bits) of the row's little-endian bit stream
        const size_t bit = static_cast<size_t>(c) * bits + k;
        codes[bit / 8] |= static_cast<uint8_t>(((code >> k) & 1) << (bit % 8));
      }
    }
    out.insert(out.end(), codes.begin(), codes.end());
  }
}

// The payload of chunk `m` (every layer: K block, V block).
inline std::vector<uint8_t> synth_chunk_payload(const policy::ChunkMeta& m, uint32_t seed) {
  const hal::KvBlockShape s{m.n_tokens, m.n_head_kv, m.head_dim};
  const int T = s.n_tokens, C = s.kv_dim();
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  std::vector<uint8_t> out;
  out.reserve(policy::chunk_payload_bytes(m));
  std::vector<float> k(size_t(T) * C), v(size_t(T) * C);
  for (int l = 0; l < m.n_layer; ++l) {
    for (int c = 0; c < C; ++c) {
      const bool outlier = uni(rng) < 0.05f;
      const float base = noise(rng) * (outlier ? 8.0f : 1.0f), amp = 0.5f + uni(rng), freq = 0.02f + 0.2f * uni(rng);
      const float phase = 6.2831853f * uni(rng);
      for (int t = 0; t < T; ++t)
        k[size_t(t) * C + c] = base + amp * std::sin(freq * float(m.first_pos + t) + phase) + 0.05f * noise(rng);
    }
    for (float& x : v) x = 0.6f * noise(rng);
    append_kv_block(out, k, m.format, hal::KvPart::key, s);
    append_kv_block(out, v, m.format, hal::KvPart::value, s);
  }
  return out;
}

}  // namespace llmsvc::test
