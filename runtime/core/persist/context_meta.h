// SPDX-License-Identifier: Apache-2.0
// ContextMeta: what a persistent context is — written once when it is created
// (context.json, replaced atomically) and checked when it is reopened.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/safe_dir.h"
#include "base/status.h"

namespace llmsvc::persist {

struct ContextMeta {
  static constexpr int kFormatVersion = 1;

  std::string id;
  uint64_t model_hash = 0;   // XXH3-64 of the GGUF file the KV was computed with
  uint64_t vocab_hash = 0;   // of its vocabulary: token histories stay meaningful across models that share it
  std::string model_name;    // for people reading the file
  bool raw = false;
  std::string system_prompt;
  std::string tools;         // the tools' normalized JSON array (runtime/core/chat/tool_spec.h); "" none
  std::string adapter;       // the name of its LoRA adapter ("" none); spelt as an id
  int32_t chunk_tokens = 16;
  int64_t created_unix = 0;
};

std::string to_json(const ContextMeta& m);
// Parses and validates untrusted text; Code::io names the bad field.
Result<ContextMeta> parse_context_meta(const std::string& text);

// context.json `rel` below `dir` (the state root), reached through no symbolic link;
// written atomically and durably.
Status write_context_meta(const fileio::SafeDir& dir, std::string_view rel, const ContextMeta& m);
Result<ContextMeta> read_context_meta(const fileio::SafeDir& dir, std::string_view rel);

}  // namespace llmsvc::persist
