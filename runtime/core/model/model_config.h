// SPDX-License-Identifier: Apache-2.0
// ModelConfig: the hyper-parameters of a decoder-only transformer, read from GGUF metadata
// the way llama.cpp reads them for the supported architectures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace llmsvc::gguf { class GgufFile; }

namespace llmsvc {

enum class Arch { llama, qwen2, gemma3 };

struct ModelConfig {
  Arch arch = Arch::llama;
  std::string arch_name;
  int n_layer = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;       // key/query head size
  int head_dim_v = 0;     // value head size
  int n_vocab = 0;
  int n_ctx_train = 0;
  int rope_dims = 0;      // rotated dimensions of each head
  bool rope_neox = false; // split-halves rotation (qwen2, gemma3) vs adjacent pairs (llama)
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  float rope_freq_base_swa = 10000.0f;  // sliding-window layers (gemma3)
  float rms_eps = 1e-5f;
  float attn_scale = 0.0f;   // applied to q.k
  bool scale_q = false;      // apply attn_scale to q before attention (gemma3, as llama.cpp)
  float embd_scale = 1.0f;   // token embeddings are multiplied by this (gemma: sqrt(n_embd))
  int sliding_window = 0;    // 0: none
  std::vector<bool> layer_is_swa;  // per layer: uses the sliding window
  bool gelu_ffn = false;     // GELU-gated FFN (gemma) instead of SiLU
  bool has_qk_norm = false;  // per-head RMSNorm of q and k (gemma3)
  bool has_post_norms = false;  // norms after attention and FFN outputs (gemma3)
  bool has_qkv_bias = false;    // qwen2
  // The query heads (Q's rows, O's columns, q's bias) are held rank-major in memory: an
  // elastic model with head levels on a device that runs them (Model::load; AttentionParams).
  bool q_heads_rank_major = false;

  int kv_dim() const { return n_head_kv * head_dim; }
  int kv_dim_v() const { return n_head_kv * head_dim_v; }
};

// Reads and validates the configuration. Unsupported architectures are Code::unsupported
// (naming it); missing or absurd values are Code::model_invalid (naming the key).
Result<ModelConfig> read_model_config(const gguf::GgufFile& file);

}  // namespace llmsvc
