// SPDX-License-Identifier: Apache-2.0
// Real K/V for the swap benchmarks: a model's keys and values over real text, as the
// engine's KvSequence holds them (per chunk, per layer: K rows then V rows, f16), so that
// compression ratios are those of actual KV caches rather than of synthetic data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace llmsvc::bench {

struct RealKv {
  int n_layer = 0, n_head_kv = 0, head_dim = 0, chunk_tokens = 0;
  std::vector<std::vector<uint8_t>> chunks;  // f16 payload of each full chunk
};

// Runs `model_path` over the first `n_tokens` tokens of the text file `text_path`.
Result<RealKv> compute_real_kv(const std::string& model_path, const std::string& text_path, int n_tokens, int threads);

}  // namespace llmsvc::bench
