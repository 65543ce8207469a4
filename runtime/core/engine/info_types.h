// SPDX-License-Identifier: Apache-2.0
// What a service tells about its model and how it counts tokens: the engine fills these, the
// transports and the daemon's protocol carry them, the C API writes llmsvc_model_info and
// reads llmsvc_count_options from them. Plain data, header only (the protocol layer uses it).
#pragma once

#include "runtime/core/engine/message_types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmsvc {

// The tensors of one weight type in the model file ("Q4_1": 210 tensors, 51 MiB).
struct WeightTypeCount {
  std::string type;  // GGUF type name, e.g. "Q4_1", "F32"
  int32_t tensors = 0;
  uint64_t bytes = 0;
  bool operator==(const WeightTypeCount&) const = default;
};

// A special token: its id (-1: the model has none) and its text ("<|im_end|>").
struct SpecialToken {
  int32_t id = -1;
  std::string text;
  bool operator==(const SpecialToken&) const = default;
};

inline constexpr size_t kMaxWeightTypes = 16;     // distinct GGUF tensor types reported
inline constexpr size_t kMaxInfoNameBytes = 256;  // model name, architecture, token texts
inline constexpr size_t kMaxInfoDevices = 16;     // devices named
inline constexpr size_t kMaxAdapters = 64;        // LoRA adapters an engine offers

// The model a service runs and whether it is ready (llmsvc_model_info).
struct ModelInfo {
  bool ready = false;        // a model is loaded and calls are served
  std::string architecture;  // general.architecture ("llama")
  std::string name;          // general.name ("" when the file has none)
  uint64_t n_params = 0;     // elements of every tensor in the file
  int32_t n_ctx_train = 0;   // the context length the model was trained with
  int32_t n_ctx = 0;         // tokens one context holds here (the n_ctx in effect)
  int32_t n_vocab = 0;
  int32_t n_layer = 0;
  int32_t n_embd = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  uint64_t weight_bytes = 0;  // every tensor of the file
  std::vector<WeightTypeCount> weight_types;  // by bytes, largest (the dominant type) first
  bool has_chat_template = false;  // tokenizer.chat_template is in the file
  SpecialToken bos, eos, eot;
  std::vector<std::string> devices;  // where the model runs, in the embedder's order
  std::vector<std::string> adapters;  // the LoRA adapters offered, by name (EngineOptions::adapters)
  bool operator==(const ModelInfo&) const = default;
};

// How llmsvc_count_tokens counts: the tokens a prompt would add to a context of this kind.
struct CountParams {
  bool chat = false;        // a user turn of a chat context (template included); else raw text
  bool first_turn = false;  // the first prompt of a new context: BOS where the model adds one,
                            // and (chat) the system turn
  std::string system_prompt;  // chat, first_turn: the context's system prompt ("": the default)
  // Non-empty (chat only): count these messages as Engine::append_messages adds them (to a new
  // context with first_turn, else after an assistant message), instead of a text.
  std::vector<ChatMessage> messages;
  bool operator==(const CountParams&) const = default;
};

// What llmsvc_count_tokens gives: the count, and the first min(count, max_ids) of the ids.
struct TokenCount {
  int32_t count = 0;
  std::vector<int32_t> ids;
  bool operator==(const TokenCount&) const = default;
};

}  // namespace llmsvc
