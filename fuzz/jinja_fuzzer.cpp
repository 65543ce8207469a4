// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the Jinja chat-template interpreter: any byte string is compiled as
// a template and, when it compiles, rendered over a fixed conversation (system, user,
// assistant with a tool call, tool result; tools declared). Every outcome must be a text
// or a Status; limits are tightened so a hostile input cannot run past libFuzzer's timeout.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtime/core/chat/jinja/chat.h"

namespace {

using llmsvc::jinja::ChatInput;
using llmsvc::jinja::Limits;
using llmsvc::jinja::Template;
using llmsvc::jinja::Value;

constexpr std::string_view kMessages = R"([
  {"role": "system", "content": "You are helpful."},
  {"role": "user", "content": "Weather in Paris? \u00e9\u6771 \"q\" \\ \n"},
  {"role": "assistant", "content": null, "tool_calls": [{"id": "call00001", "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2, "ok": true}}}]},
  {"role": "tool", "tool_call_id": "call00001", "content": "{\"t\": 18.5}"},
  {"role": "assistant", "content": "It is 18.5 degrees."}
])";
constexpr std::string_view kTools = R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Weather for a city.", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1}}, "required": ["city"]}}}])";

Limits fuzz_limits() {
  Limits l;
  l.max_template_bytes = 64 << 10;
  l.max_output_bytes = 1 << 20;
  l.max_list_items = 1 << 16;
  l.max_loop_iterations = 1 << 16;
  l.max_work = 1 << 26;
  return l;
}

const Value& context() {
  static const Value ctx = [] {
    ChatInput in;
    in.messages_json = kMessages;
    in.tools_json = kTools;
    in.bos_token = "<s>";
    in.eos_token = "</s>";
    in.extra_json = R"({"enable_thinking": false})";
    auto c = llmsvc::jinja::chat_context(in, fuzz_limits());
    if (!c.ok()) std::abort();
    return std::move(c).value();
  }();
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Limits limits = fuzz_limits();
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto tmpl = Template::compile(source, limits);
  if (!tmpl.ok()) {
    if (tmpl.status().message().empty()) std::abort();  // every error explains itself
    return 0;
  }
  llmsvc::jinja::RenderOptions options;
  options.now = std::tm{};
  auto out = tmpl->render(context(), options);
  if (out.ok() ? out->size() > limits.max_output_bytes : out.status().message().empty()) std::abort();
  return 0;
}
