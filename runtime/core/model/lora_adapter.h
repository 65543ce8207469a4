// SPDX-License-Identifier: Apache-2.0
// LoraAdapter: a LoRA adapter in the GGUF form llama.cpp's convert_lora_to_gguf.py writes,
// checked against a loaded Model and prepared on the model's device.
//
// For a base weight W [n_out][n_in] the adapter holds A [r][n_in] (GGUF ne {n_in, r}, tensor
// "<base>.lora_a") and B [n_out][r] (ne {r, n_out}, "<base>.lora_b"); the forward pass adds
// scale * B (A x) to W x right after the base matmul, before biases and norms, as llama.cpp's
// build_lora_mm does (scale = alpha / r, or 1 when alpha is 0, times the caller's scale).
//
// Metadata: general.type "adapter", general.architecture the model's, adapter.type "lora",
// adapter.lora.alpha (float, optional: 0). Only the 7 per-layer matrices (attn_q/k/v/output,
// ffn_gate/up/down) may be adapted; "*_norm.weight" tensors are ignored, as llama.cpp does.
// Every other oddity is refused, naming the key or tensor (see load).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "hal/device.h"

namespace llmsvc {

class Model;
namespace gguf { class GgufFile; }

// The per-layer matrices an adapter may touch, in the order of the graph's WeightSlot.
enum class LoraMatrix : int32_t { q, k, v, o, gate, up, down, count_ };
inline constexpr int kLoraMatrices = static_cast<int>(LoraMatrix::count_);
enum class LoraPart : int32_t { a, b };

class LoraAdapter {
 public:
  static constexpr int kMaxRank = 512;

  // Opens the adapter file `path` (untrusted: every field is checked) for `model`, on the
  // model's own device. Code::model_invalid: not an adapter file, a malformed field, an
  // unpaired tensor, a non-finite alpha; Code::model_mismatch: another architecture, a tensor
  // whose base the model lacks, a shape that is not the base weight's (an adapter for another
  // model); Code::unsupported: not LoRA (adapter.type), aLoRA, token_embd / output adapters,
  // ranks that differ or lie outside 1..kMaxRank, a type the device cannot prepare;
  // Code::invalid_argument: `device` is not the model's.
  static Result<std::unique_ptr<LoraAdapter>> load(const std::string& path, const Model& model, hal::Device& device);
  // The same from an in-memory file image (not copied: it must outlive the adapter). For
  // fuzzing and tests.
  static Result<std::unique_ptr<LoraAdapter>> from_memory(std::span<const uint8_t> bytes, const Model& model,
                                                          hal::Device& device);
  // The same from the model's own GGUF: tensors "<prefix><base>.lora_a/.lora_b" (an elastic
  // model's recovery adapters, "rcv.<percent>."), with `alpha` given by the caller.
  static Result<std::unique_ptr<LoraAdapter>> from_model_file(const Model& model, hal::Device& device,
                                                              std::string_view prefix, float alpha);
  ~LoraAdapter();
  LoraAdapter(const LoraAdapter&) = delete;
  LoraAdapter& operator=(const LoraAdapter&) = delete;

  // For messages: the file name, or the model's prefix.
  const std::string& name() const { return name_; }
  // The model it was checked against and prepared for.
  const Model& model() const { return *model_; }
  int rank() const { return rank_; }
  float alpha() const { return alpha_; }
  // alpha / rank, or 1 when alpha is 0 (llama.cpp's get_scale at a user scale of 1).
  float scale() const { return alpha_ == 0.0f ? 1.0f : alpha_ / static_cast<float>(rank_); }
  // Whether the adapter has a pair for (layer, m).
  bool has(int layer, LoraMatrix m) const;
  // The prepared A or B of (layer, m) at elastic level `level` (-1: full): for q, gate and up
  // at a level that cuts the layer, B's first rows (of the kept heads or neurons); for o and
  // down, A's first columns (views sharing the full weight's memory, as Model::level_weight).
  // Null where the adapter has no pair.
  const hal::PreparedWeight* weight(int level, int layer, LoraMatrix m, LoraPart part) const;
  // Whether levels below the full one can run with this adapter (the device slices weights,
  // the level's neuron counts are whole blocks of A's type), or why not.
  const Status& levels_status() const { return levels_status_; }
  // Bytes of the adapter's tensors.
  uint64_t bytes() const { return bytes_; }

 private:
  struct Key {};
 public:
  explicit LoraAdapter(Key) {}

 private:
  // load and from_memory: the metadata checks, then build.
  static Result<std::unique_ptr<LoraAdapter>> from_file(Result<std::unique_ptr<gguf::GgufFile>> file, std::string who,
                                                        const Model& model, hal::Device& device);
  static Result<std::unique_ptr<LoraAdapter>> build(std::unique_ptr<gguf::GgufFile> own, const gguf::GgufFile& f,
                                                    std::string_view prefix, bool whole_file, const Model& model,
                                                    hal::Device& device, const std::string& who);
  Status make_level_views(const Model& model, hal::Device& device);

  std::string name_;
  const Model* model_ = nullptr;
  std::unique_ptr<gguf::GgufFile> file_;  // an adapter file's mapping (the weights may view it)
  int rank_ = 0;
  float alpha_ = 0;
  uint64_t bytes_ = 0;
  using Pair = std::array<std::unique_ptr<hal::PreparedWeight>, 2>;  // [LoraPart]
  std::vector<std::array<Pair, kLoraMatrices>> layers_;
  // [level][layer][Model::LevelPart]: the views of the layers a level cuts (null elsewhere).
  std::vector<std::vector<std::array<std::unique_ptr<hal::PreparedWeight>, 5>>> level_views_;
  // q's B and o's A with the query heads rank-major (as the model's), where the device reads
  // them in place.
  std::vector<std::vector<uint8_t>> relaid_;
  Status levels_status_;
};

}  // namespace llmsvc
