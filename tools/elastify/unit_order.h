// SPDX-License-Identifier: Apache-2.0
// The order of a layer's FFN units by importance (a unit: ffn_unit consecutive neurons, whole
// quantization blocks of ffn_down's input), from per-neuron scores.
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

// First-order Taylor scores |dL/dw * w| per neuron, computed offline (tools/elastify/torch/taylor_scores.py)
// and stored as JSON {"ffn": [[n_ff floats] per layer]}; checked against the model's shape.
Result<std::vector<std::vector<double>>> read_neuron_scores(const std::string& path, const ModelConfig& config);

// Units of each layer, most important first (a unit's score is its neurons' sum; ties keep
// the original order, so equal scores leave a layer as it was). [layer][rank] = unit index.
std::vector<std::vector<int>> order_units(const std::vector<std::vector<double>>& neuron_scores, int unit);

// A seeded random order of every layer's units (the baseline order).
std::vector<std::vector<int>> random_order(int n_layer, int n_units, uint64_t seed);

}  // namespace llmsvc::elastify
