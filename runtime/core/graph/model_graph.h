// SPDX-License-Identifier: Apache-2.0
// The forward pass of llama, qwen2 and gemma3, described once as a HAL op graph over symbolic
// shapes (T tokens in a step, O output rows), and the ids its ops use for the model's weights.
#pragma once

#include <cstdint>

#include "hal/device.h"
#include "hal/graph.h"
#include "runtime/core/model/model.h"

namespace llmsvc {

// A layer's matrices and small parameters, as the graph's ops name them.
enum class WeightSlot : int32_t { q, k, v, o, gate, up, down, count_ };
enum class ParamSlot : int32_t { attn_norm, ffn_norm, q_norm, k_norm, attn_post_norm, ffn_post_norm, bq, bk, bv, count_ };

// Ids: per layer, then the model's own (the output projection, the embedding table, the final norm).
int32_t weight_id(int layer, WeightSlot slot);
int32_t output_weight_id(const ModelConfig& c);
int32_t embedding_weight_id(const ModelConfig& c);
int32_t param_id(int layer, ParamSlot slot);
int32_t output_norm_param_id(const ModelConfig& c);

// The graph of one step. Bound tensors: token ids [T], positions [T], logits [O][n_vocab].
// store_kv and attention ops carry their layer; attention's context length comes from the KV
// binding when the step runs.
hal::Graph build_model_graph(const ModelConfig& c);

// What the ids name in `model` (the weights prepared on the model's device; null for none).
const hal::PreparedWeight* model_weight(const Model& model, int32_t id);
const float* model_param(const Model& model, int32_t id);
// The prefix view that elastic level `level` runs in place of weight `id` (Model::level_weight),
// or nullptr where the level keeps the whole weight.
const hal::PreparedWeight* level_model_weight(const Model& model, int level, int32_t id);

}  // namespace llmsvc
