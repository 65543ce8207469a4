// SPDX-License-Identifier: Apache-2.0
// Chat templates: render conversation turns into the prompt text a model family expects.
//
// The text equals what the GGUF's own Jinja template renders for the same conversation,
// minus the template's leading bos_token: BOS is the tokenizer's job (encode with
// add_special=true for the start of a conversation), so it is never in the text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "runtime/core/chat/tool_calls.h"

namespace llmsvc::gguf { class GgufFile; }

namespace llmsvc {

class JinjaTurns;

// chatml and gemma: written out here (checked against Jinja's renders in the tests); jinja:
// any other family's template, executed (runtime/core/tokenizer/jinja_turns.h).
enum class ChatFormat { raw, chatml, gemma, jinja };

// Picks the family from tokenizer.chat_template (and the architecture when absent); a
// template of no family known here is jinja.
ChatFormat detect_chat_format(const gguf::GgufFile& file);

struct ChatTemplate {
  ChatFormat format = ChatFormat::raw;
  // Text that opens the conversation: the system turn (or the template's default one);
  // empty in raw mode. For gemma (no system role) it is remembered and prefixed to the
  // first user turn by user_turn(first=true), so this is empty too.
  std::string system_prefix(std::string_view system_prompt) const;
  // A user turn followed by the assistant header, ready for generation. `first` marks the
  // conversation's first user turn (where gemma puts the system prompt; chatml ignores it).
  std::string user_turn(std::string_view user, std::string_view system_prompt, bool first) const;
  // The same turn split around the user's text: {text before it, text after it}, so the
  // engine can tokenize the template with special tokens and the user's text without.
  std::pair<std::string, std::string> user_turn_parts(std::string_view system_prompt, bool first) const;
  // The user's text as the template places it (gemma trims it).
  std::string user_content(std::string_view user) const;
  // An assistant reply's text as the history holds it after the generation prompt: trimmed
  // where the template trims content, after the whitespace a template puts before a reply.
  std::string reply_text(std::string_view reply) const;
  // What closes the assistant's reply in the history (e.g. "<|im_end|>\n").
  std::string assistant_end() const;
  // The template's default system prompt (SmolLM2's ChatML default), may be empty.
  std::string default_system;
  // gemma: what joins the system prompt to the first user message (the template's own).
  std::string system_separator = "\n\n";
  // jinja: the executed template's turns.
  std::shared_ptr<const JinjaTurns> jinja;
  // Why a template of the file cannot serve chat contexts (a construct the interpreter lacks,
  // the template's own error...): chat contexts then fail with it, never fall back to raw.
  Status error;
  // Whether a chat context with this system prompt can be served (error, or a template that
  // refuses the system message).
  Status usable(std::string_view system_prompt) const;

  // Tools. The GGUF's template source and its bos / eos texts (a template is executed again
  // for a context's tools), and the syntax it teaches the model for calls.
  std::string source;
  std::string bos_text, eos_text;
  chat::ToolCallFormat tool_format = chat::ToolCallFormat::none;
  // This template for a context that declares `tools_json` (normalized, tool_spec.h): every
  // turn rendered with the tools, by the executed template whatever the family. Errors: a
  // template that does not render tools or whose calls this library cannot parse
  // (unsupported), or fails with them.
  Result<ChatTemplate> with_tools(const std::string& tools_json) const;
};

ChatTemplate make_chat_template(const gguf::GgufFile& file);

}  // namespace llmsvc
