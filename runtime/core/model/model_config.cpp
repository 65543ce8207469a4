// SPDX-License-Identifier: Apache-2.0
// Reading ModelConfig from GGUF metadata, with sanity limits on every value.
#include "runtime/core/model/model_config.h"

#include <cmath>
#include <string>

#include "runtime/core/gguf/gguf_file.h"

namespace llmsvc {
namespace {

// Upper bounds far above any on-device model; they stop absurd files early.
constexpr uint64_t kMaxLayers = 512;
constexpr uint64_t kMaxDim = 1 << 17;
constexpr uint64_t kMaxHeads = 1024;
constexpr uint64_t kMaxCtx = 1 << 24;

Status invalid(const std::string& key, const std::string& what) {
  return {Code::model_invalid, "model: metadata '" + key + "' " + what};
}

// A required integer key in [lo, hi].
Status read_int(const gguf::GgufFile& f, const std::string& key, uint64_t lo, uint64_t hi, int* out) {
  auto v = f.get_uint(key);
  if (!v) return invalid(key, "is missing or not an unsigned integer");
  if (*v < lo || *v > hi) return invalid(key, "= " + std::to_string(*v) + " is out of range");
  *out = static_cast<int>(*v);
  return Status::Ok();
}

// An optional integer key; `out` keeps its value when absent.
Status read_int_opt(const gguf::GgufFile& f, const std::string& key, uint64_t lo, uint64_t hi, int* out) {
  if (!f.find(key)) return Status::Ok();
  return read_int(f, key, lo, hi, out);
}

Status read_float_opt(const gguf::GgufFile& f, const std::string& key, float* out) {
  if (!f.find(key)) return Status::Ok();
  auto v = f.get_float(key);
  if (!v || !std::isfinite(*v) || *v <= 0) return invalid(key, "must be a positive finite number");
  *out = static_cast<float>(*v);
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> read_model_config(const gguf::GgufFile& f) {
  ModelConfig c;
  auto arch = f.get_string("general.architecture");
  if (!arch) return invalid("general.architecture", "is missing or not a string");
  c.arch_name = std::string(*arch);
  if (c.arch_name == "llama") {
    c.arch = Arch::llama;
  } else if (c.arch_name == "qwen2") {
    c.arch = Arch::qwen2;
  } else if (c.arch_name == "gemma3") {
    c.arch = Arch::gemma3;
  } else {
    return Status(Code::unsupported, "model: architecture '" + c.arch_name +
                                         "' is not supported (supported: llama, qwen2, gemma3)");
  }
  const std::string a = c.arch_name + ".";
  LLMSVC_RETURN_IF_ERROR(read_int(f, a + "block_count", 1, kMaxLayers, &c.n_layer));
  LLMSVC_RETURN_IF_ERROR(read_int(f, a + "embedding_length", 1, kMaxDim, &c.n_embd));
  LLMSVC_RETURN_IF_ERROR(read_int(f, a + "feed_forward_length", 1, kMaxDim * 8, &c.n_ff));
  LLMSVC_RETURN_IF_ERROR(read_int(f, a + "attention.head_count", 1, kMaxHeads, &c.n_head));
  c.n_head_kv = c.n_head;
  LLMSVC_RETURN_IF_ERROR(read_int_opt(f, a + "attention.head_count_kv", 1, kMaxHeads, &c.n_head_kv));
  if (c.n_head % c.n_head_kv != 0) return invalid(a + "attention.head_count_kv", "does not divide head_count");
  c.n_ctx_train = 2048;
  LLMSVC_RETURN_IF_ERROR(read_int_opt(f, a + "context_length", 1, kMaxCtx, &c.n_ctx_train));
  if (c.n_embd % c.n_head != 0 && !f.find(a + "attention.key_length"))
    return invalid(a + "embedding_length", "is not a multiple of head_count");
  c.head_dim = c.n_embd / c.n_head;
  LLMSVC_RETURN_IF_ERROR(read_int_opt(f, a + "attention.key_length", 1, kMaxDim, &c.head_dim));
  // Checked before value_length, which defaults to it: an odd key_length is named as such.
  if (c.head_dim % 2 != 0) return invalid(a + "attention.key_length", "must be even");
  c.head_dim_v = c.head_dim;
  LLMSVC_RETURN_IF_ERROR(read_int_opt(f, a + "attention.value_length", 1, kMaxDim, &c.head_dim_v));
  if (c.head_dim_v != c.head_dim)
    return Status(Code::unsupported, "model: metadata '" + a + "attention.value_length' = " + std::to_string(c.head_dim_v) +
                                         " differs from the key head size " + std::to_string(c.head_dim) +
                                         ", which is not supported");
  c.rope_dims = c.head_dim;
  LLMSVC_RETURN_IF_ERROR(read_int_opt(f, a + "rope.dimension_count", 2, kMaxDim, &c.rope_dims));
  if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0) return invalid(a + "rope.dimension_count", "must be even and <= the head size");
  LLMSVC_RETURN_IF_ERROR(read_float_opt(f, a + "rope.freq_base", &c.rope_freq_base));
  if (auto type = f.get_string(a + "rope.scaling.type"); type && *type != "none") {
    if (*type != "linear")
      return Status(Code::unsupported, "model: metadata '" + a + "rope.scaling.type' = '" + std::string(*type) +
                                           "' is not supported (supported: none, linear)");
    float factor = 1.0f;
    LLMSVC_RETURN_IF_ERROR(read_float_opt(f, a + "rope.scaling.factor", &factor));
    c.rope_freq_scale = 1.0f / factor;
  }
  if (!f.find(a + "attention.layer_norm_rms_epsilon")) return invalid(a + "attention.layer_norm_rms_epsilon", "is missing");
  LLMSVC_RETURN_IF_ERROR(read_float_opt(f, a + "attention.layer_norm_rms_epsilon", &c.rms_eps));

  c.layer_is_swa.assign(c.n_layer, false);
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  switch (c.arch) {
    case Arch::llama:
      break;
    case Arch::qwen2:
      c.rope_neox = true;
      c.has_qkv_bias = true;
      break;
    case Arch::gemma3:
      c.rope_neox = true;
      c.gelu_ffn = true;
      c.has_qk_norm = true;
      c.has_post_norms = true;
      c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
      LLMSVC_RETURN_IF_ERROR(read_int(f, a + "attention.sliding_window", 1, kMaxCtx, &c.sliding_window));
      // As llama.cpp: every sixth layer is global, the others slide; sliding layers use base 10000.
      for (int il = 0; il < c.n_layer; ++il) c.layer_is_swa[il] = (il % 6) < 5;
      c.rope_freq_base_swa = 10000.0f;
      // llama.cpp's gemma3 27B (62 layers) scales by n_embd / n_head instead of the head size.
      if (c.n_layer == 62) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
      // llama.cpp scales q itself (then rounds it to f16 in attention) instead of the scores.
      c.scale_q = true;
      break;
  }
  return c;
}

}  // namespace llmsvc
