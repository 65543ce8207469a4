// SPDX-License-Identifier: Apache-2.0
// ElasticSpec: the levels of an elastic model (ElastiLM), as `llmsvc elastify` writes them into
// the GGUF's metadata, read and checked against the model's shape.
//
// An elastic file's FFN neurons are stored in order of importance, in units of whole
// quantization blocks of ffn_down's input dimension (so reordering moved bytes, never
// re-quantized), so that the sub-model of a level keeps the first ffn_keep neurons of each
// layer: a prefix of gate and up's rows and of down's columns. Anchor layers keep every
// neuron at every level. The full model (the last level, 100 %) is the original model.
//
// Metadata (all under "llmsvc.elastic."):
//   version           u32   1
//   levels            [u32] per cent of the non-anchor units, strictly increasing, last 100
//   ffn_unit          u32   neurons per reordering unit; divides n_ff
//   ffn_keep          [u32] levels x n_layer, level-major: neurons each layer keeps
//   anchor_layers     [u32] layer indices locked at full size (may be empty)
//   score             str   how units were ordered ("activation", "taylor", "random")
//   layer_importance  [f32] n_layer, optional: loss increase when the layer is removed
//   recovery          [u32] optional: the level percents that have a recovery adapter, tensors
//                           "rcv.<percent>.<base>.lora_a/.lora_b" (runtime/core/model/lora_adapter.h)
//                           that the forward pass adds at that level only
//   recovery_alpha    [f32] with recovery, as many: each adapter's LoRA alpha
//   head_keep         [u32] optional, levels x n_layer, level-major: query heads each layer
//                           keeps, a whole number of ranks (one head of every KV group). The
//                           file keeps the standard head order with each group's query heads
//                           sorted by importance (a function-preserving move: each head keeps
//                           its KV head), so a level keeps the first head_keep / n_head_kv of
//                           every group; the KV heads are never cut. Absent: no head is cut.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/core/model/model_config.h"

namespace llmsvc::gguf { class GgufFile; }

namespace llmsvc {

inline constexpr char kElasticPrefix[] = "llmsvc.elastic.";
inline constexpr int kElasticVersion = 1;
inline constexpr int kMaxElasticLevels = 32;

struct ElasticSpec {
  std::vector<int> levels;                  // per cent, increasing, last 100
  int ffn_unit = 0;
  std::vector<std::vector<int>> ffn_keep;   // [level][layer]
  std::vector<bool> anchor;                 // [layer]
  std::string score;
  std::vector<float> layer_importance;      // [layer], or empty
  std::vector<int> recovery;                // level percents with a recovery adapter (may be empty)
  std::vector<float> recovery_alpha;        // [recovery]
  std::vector<std::vector<int>> head_keep;  // [level][layer] query heads kept; empty: no head cut

  bool cuts_heads() const { return !head_keep.empty(); }

  int full() const { return static_cast<int>(levels.size()) - 1; }
  // The index of the level of `percent` per cent, or -1 when the file has none such.
  int level_index(int percent) const;
};

// The tensor-name prefix of the recovery adapter of the level of `percent` per cent.
std::string recovery_prefix(int percent);

// Neurons a non-anchor layer keeps at `percent` per cent of its units: the nearest whole
// number of units, at least one.
int elastic_ffn_keep(int n_ff, int unit, int percent);
// Query heads a non-anchor layer keeps at `percent` per cent: the nearest whole number of
// ranks (n_head_kv heads, one per KV group), at least one.
int elastic_head_keep(int n_head, int n_head_kv, int percent);
// The rank-major order of the query heads (hal::AttentionParams::rank_major): position
// k = r * n_head_kv + g holds head g * (n_head / n_head_kv) + r of the file's grouped order.
std::vector<int> rank_major_heads(int n_head, int n_head_kv);

// Reads the spec when the file has "llmsvc.elastic.version" (nullopt when it has not), and
// checks every field against `config`. Code::model_invalid naming the field (and the level
// and layer) when inconsistent; Code::unsupported for a version this build does not read.
Result<std::optional<ElasticSpec>> read_elastic_spec(const gguf::GgufFile& file, const ModelConfig& config);

}  // namespace llmsvc
