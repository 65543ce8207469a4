// SPDX-License-Identifier: Apache-2.0
// Rendering a conversation with a model's chat template, given as Hugging Face passes it:
// messages and tools (JSON, as in OpenAI-style requests), add_generation_prompt, the
// bos / eos token texts, and any extra template variables.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "runtime/core/chat/jinja/template.h"
#include "runtime/core/chat/jinja/value.h"

namespace llmsvc::jinja {

struct ChatInput {
  std::string_view messages_json = "[]";  // a JSON array of messages
  std::string_view tools_json;            // a JSON array of tools; empty: none (tools = None)
  bool add_generation_prompt = true;
  std::string_view bos_token;
  std::string_view eos_token;
  std::string_view extra_json;  // a JSON object of more variables (enable_thinking...); may be empty
  std::optional<std::tm> now;   // strftime_now's time; unset: the clock
};

// The template context transformers builds: messages, tools (None when absent),
// documents (None), add_generation_prompt, bos_token, eos_token, then the extra keys.
Result<Value> chat_context(const ChatInput& input, const Limits& limits = {});

// Compiles `source` and renders the conversation (compile once with Template and
// chat_context to render many).
Result<std::string> render_chat(std::string_view source, const ChatInput& input, const Limits& limits = {});

}  // namespace llmsvc::jinja
