// SPDX-License-Identifier: Apache-2.0
// The forward pass of llama, qwen2 and gemma3, described once as a HAL op graph over symbolic
// shapes (T tokens in a step, O output rows), and the ids its ops use for the model's weights.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "hal/device.h"
#include "hal/graph.h"
#include "runtime/core/model/lora_adapter.h"
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

// LoRA side branches (runtime/core/model/lora_adapter.h) in two adapter slots: 0 runs the
// adapter the caller chose, 1 the recovery adapter of the running elastic level.
inline constexpr int kAdapterSlots = 2;
static_assert(kLoraMatrices == static_cast<int>(WeightSlot::count_));
struct AdapterTargets {
  // [slot][layer * WeightSlot::count_ + slot]: whether an adapter of that slot may touch the
  // matrix (empty: none in that slot).
  std::array<std::vector<bool>, kAdapterSlots> touches;
  std::array<int, kAdapterSlots> rank{};  // the slot's largest rank: its A outputs' width
  bool touched(int slot, int layer, WeightSlot w) const;
  bool empty() const;
};
// Adapter weight ids, after the model's: (slot, layer, matrix, A or B).
int32_t adapter_weight_id(const ModelConfig& c, int slot, int layer, WeightSlot w, LoraPart part);
struct AdapterWeight {
  int slot = 0, layer = 0;
  WeightSlot w = WeightSlot::q;
  LoraPart part = LoraPart::a;
};
std::optional<AdapterWeight> adapter_weight(const ModelConfig& c, int32_t id);

// The graph of one step. Bound tensors: token ids [T], positions [T], logits [O][n_vocab].
// store_kv and attention ops carry their layer; attention's context length comes from the KV
// binding when the step runs.
//
// For each matrix `adapters` touches, right after its base matmul (before biases, q/k norms
// and post-norms, as llama.cpp's build_lora_mm): a matmul of A (the A's of matrices sharing an
// input fused in one op, as Q/K/V), a matmul of B, a scale (f[0], set when the step is
// prepared: the adapter's scale) and an add into the base output. The scale and add carry
// their branch's B id in weight[0], so that the step list leaves them out with the branch
// when the chosen adapter has no such pair. Empty targets: exactly the graph without adapters.
hal::Graph build_model_graph(const ModelConfig& c, const AdapterTargets& adapters = {});

// What the ids name in `model` (the weights prepared on the model's device; null for none).
const hal::PreparedWeight* model_weight(const Model& model, int32_t id);
const float* model_param(const Model& model, int32_t id);
// The prefix view that elastic level `level` runs in place of weight `id` (Model::level_weight),
// or nullptr where the level keeps the whole weight.
const hal::PreparedWeight* level_model_weight(const Model& model, int level, int32_t id);
// Whether tensor `t` of the model graph holds a layer's query heads (q, and attention's
// output): a level that cuts heads runs them with its kept heads' columns only.
bool holds_query_heads(const hal::Tensor& t);

}  // namespace llmsvc
