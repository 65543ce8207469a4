// SPDX-License-Identifier: Apache-2.0
// Model: a loaded GGUF model — configuration, tokenizer, chat template, and the weights
// prepared on a HAL device. Immutable after load (but for which rows of an elastic model's
// weights are in memory: WeightResidency); shared by every context.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "hal/device.h"
#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/model/elastic_spec.h"
#include "runtime/core/model/lora_adapter.h"
#include "runtime/core/model/model_config.h"
#include "runtime/core/tokenizer/chat_template.h"
#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc {

// A small float vector (norm weights, biases), always a copy of its own: one read of a few
// bytes in the mapping would keep a whole page (or a 2 MiB folio) of the file resident.
struct FloatParam {
  std::vector<float> values;
  const float* data() const { return values.empty() ? nullptr : values.data(); }  // null: absent
};

struct LayerWeights {
  FloatParam attn_norm, ffn_norm;
  FloatParam attn_q_norm, attn_k_norm;        // gemma3
  FloatParam attn_post_norm, ffn_post_norm;   // gemma3
  FloatParam bq, bk, bv;                      // qwen2
  std::unique_ptr<hal::PreparedWeight> wq, wk, wv, wo, w_gate, w_up, w_down;
};

class Model {
 public:
  // Opens, validates and prepares `path` on `device`. Errors name the offending key/tensor.
  static Result<std::unique_ptr<Model>> load(const std::string& path, hal::Device& device);
  ~Model();

  const ModelConfig& config() const { return config_; }
  // The device the weights were prepared on.
  const hal::Device& device() const { return *device_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ChatTemplate& chat_template() const { return chat_; }
  const gguf::GgufFile& file() const { return *file_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const hal::WeightRef& token_embd() const { return tok_embd_; }
  const hal::PreparedWeight& output() const { return *output_; }
  const FloatParam& output_norm() const { return output_norm_; }
  uint64_t weight_bytes() const { return weight_bytes_; }
  // The elastic levels when the file has them (llmsvc elastify), else nullptr.
  const ElasticSpec* elastic() const { return elastic_ ? &*elastic_ : nullptr; }
  // Whether levels below the full one can run: OK, or why not (the device cannot slice
  // weights, the model is not elastic).
  const Status& levels_status() const { return levels_status_; }
  // Layer il's weight `part` at elastic level `level`: a prefix view of the full weight
  // sharing its memory (Q's rows and O's columns of the kept heads, gate's and up's rows and
  // down's columns of the kept neurons); nullptr where the level keeps the whole weight.
  enum class LevelPart { q, o, gate, up, down };
  static constexpr int kLevelParts = 5;
  const hal::PreparedWeight* level_weight(int level, int il, LevelPart part) const;
  // Layer il's whole weight `part`, for WeightResidency, which gives back and restores the
  // memory of rows and columns levels leave (the engine's compute lock held).
  hal::PreparedWeight& layer_weight(int il, LevelPart part);
  // The bytes to repack that weight from once some were given back: none (an empty vector)
  // where they are its ref()'s, the file's, read back through the mapping; Q's and O's with
  // the query heads rank-major (the moved copy was dropped once the device held its own),
  // moved again from the file's.
  Result<std::vector<uint8_t>> relaid_source(int il, LevelPart part) const;
  // The recovery adapter stored in the file for elastic level `level` (an index into
  // elastic()->levels; llmsvc.elastic.recovery), or nullptr.
  const LoraAdapter* recovery_adapter(int level) const;
  // Weight bytes one token's matmuls read at elastic level `level` (-1: the full model), and
  // the output projection's share of them (it bounds how small a level's cost can go).
  uint64_t level_matmul_bytes(int level) const;
  uint64_t output_matmul_bytes() const;
  // Identity of the file's contents (XXH3-64 of every byte): KV computed with one model is
  // never used with another.
  uint64_t content_hash() const { return content_hash_; }
  // Identity of the vocabulary (XXH3-64 over the token texts): token histories carry over
  // between models that share it.
  uint64_t vocab_hash() const { return vocab_hash_; }

 private:
  struct Key {};  // only load() constructs
 public:
  explicit Model(Key) {}

 private:
  Status load_weights(hal::Device& device);
  // Checks the elastic spec against the weights and makes each level's prefix views.
  Status load_levels(hal::Device& device);
  // Prepares the recovery adapters the elastic spec names.
  Status load_recovery(hal::Device& device);
  void hash_identity();

  std::unique_ptr<gguf::GgufFile> file_;
  const hal::Device* device_ = nullptr;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ChatTemplate chat_;
  std::vector<LayerWeights> layers_;
  hal::WeightRef tok_embd_;
  std::unique_ptr<hal::PreparedWeight> output_;
  FloatParam output_norm_;
  uint64_t weight_bytes_ = 0;
  std::optional<ElasticSpec> elastic_;
  Status levels_status_;
  // [level][layer][part]: views for the layers a level cuts (null where it keeps them whole).
  std::vector<std::vector<std::array<std::unique_ptr<hal::PreparedWeight>, kLevelParts>>> level_weights_;
  // Q's and O's bytes with the query heads rank-major, for a device that reads them in place
  // (emptied where the device keeps its own copy).
  std::vector<std::vector<uint8_t>> relaid_;
  std::vector<std::unique_ptr<LoraAdapter>> recovery_;  // [level], null where none
  uint64_t content_hash_ = 0;
  uint64_t vocab_hash_ = 0;
};

}  // namespace llmsvc
