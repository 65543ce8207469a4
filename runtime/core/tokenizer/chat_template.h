// Chat templates: render conversation turns into the prompt text a model family expects.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace llmsvc::gguf { class GgufFile; }

namespace llmsvc {

enum class ChatFormat { raw, chatml, gemma };

// Picks the family from tokenizer.chat_template (and the architecture when absent).
ChatFormat detect_chat_format(const gguf::GgufFile& file);

struct ChatTemplate {
  ChatFormat format = ChatFormat::raw;
  // Text that opens the conversation: the system turn (or the template's default one);
  // empty in raw mode. For gemma (no system role) it is remembered and prefixed to the
  // first user turn by user_turn(first=true).
  std::string system_prefix(std::string_view system_prompt) const;
  // A user turn followed by the assistant header, ready for generation. When `first`, the
  // turn opens the conversation and includes everything before it (BOS text aside): the
  // system turn for ChatML (system_prefix), the system text folded in for gemma.
  std::string user_turn(std::string_view user, std::string_view system_prompt, bool first) const;
  // The same turn split around the user text: {text before it, text after it}, so the
  // engine can tokenize the template with special tokens and the user text without.
  std::pair<std::string, std::string> user_turn_parts(std::string_view system_prompt, bool first) const;
  // What closes the assistant's reply in the history (e.g. "<|im_end|>\n").
  std::string assistant_end() const;
  // The template's default system prompt (SmolLM2's ChatML default), may be empty.
  std::string default_system;
};

ChatTemplate make_chat_template(const gguf::GgufFile& file);

}  // namespace llmsvc
