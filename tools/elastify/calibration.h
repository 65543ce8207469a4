// SPDX-License-Identifier: Apache-2.0
// Calibration passes of `llmsvc elastify`: the model run over a text in fresh windows, for the
// mean magnitude of every FFN neuron's activation and for the text's loss.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"

namespace llmsvc::elastify {

// Mean |activation| over every token of `tokens`, run in windows of `window` tokens, of each
// FFN neuron (the gated product, the down projection's input) and of each column of the
// attention's output (the O projection's input): [layer][column].
struct MeanAbs {
  std::vector<std::vector<double>> ffn, attn;
};
Result<MeanAbs> mean_abs_activations(const Model& model, hal::Device& device, std::span<const int32_t> tokens, int window);

// Mean next-token negative log-likelihood of `tokens` in windows of `window` tokens (each a
// fresh sequence, its first token the model's BOS when it adds one; the first half of each
// window is context only: as llama.cpp's perplexity scores), under `forward` as it is set
// (level, skipped layers). exp() of it is the perplexity.
Result<double> mean_nll(Forward& forward, const Model& model, std::span<const int32_t> tokens, int window);

}  // namespace llmsvc::elastify
