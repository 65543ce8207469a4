// SPDX-License-Identifier: Apache-2.0
// The order of a layer's units by importance, from per-column scores: FFN units (ffn_unit
// consecutive neurons, whole quantization blocks of ffn_down's input), and query heads within
// their KV groups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/core/model/model.h"

namespace llmsvc::elastify {

// Gradient-free neuron importance (as Wanda / FLAP score a weight by its input's magnitude):
// mean |a_j| times the L2 norm of ffn_down's column j, the expected size of neuron j's
// contribution to the residual stream. [layer][neuron].
std::vector<std::vector<double>> activation_scores(const Model& model, const std::vector<std::vector<double>>& mean_abs);

// The same for query heads: each head sums its columns of the attention output (mean |a_j|)
// times attn_output's column norms. [layer][head].
std::vector<std::vector<double>> head_scores(const Model& model, const std::vector<std::vector<double>>& mean_abs);

// Each layer's query heads, most important first within each KV group, every head staying in
// its group (so each keeps its KV head and the file stays a valid model of the same shape):
// [layer][position] = head.
std::vector<std::vector<int>> order_heads(const std::vector<std::vector<double>>& head_scores, int n_head_kv);

// First-order Taylor scores |dL/dw * w| per neuron, computed offline (tools/elastify/torch/taylor_scores.py)
// and stored as JSON {"ffn": [[n_ff floats] per layer]}; checked against the model's shape.
Result<std::vector<std::vector<double>>> read_neuron_scores(const std::string& path, const ModelConfig& config);

// Units of each layer, most important first (a unit's score is its neurons' sum; ties keep
// the original order, so equal scores leave a layer as it was). [layer][rank] = unit index.
std::vector<std::vector<int>> order_units(const std::vector<std::vector<double>>& neuron_scores, int unit);

// A seeded random order of every layer's units (the baseline order), within `groups` equal
// groups (query heads stay in their KV group).
std::vector<std::vector<int>> random_order(int n_layer, int n_units, uint64_t seed, int groups = 1);

}  // namespace llmsvc::elastify
