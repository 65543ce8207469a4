// SPDX-License-Identifier: Apache-2.0
// The chat context and one-call rendering (see chat.h).
#include "runtime/core/chat/jinja/chat.h"

#include <exception>
#include <new>

#include "runtime/core/chat/jinja/json.h"

namespace llmsvc::jinja {

Result<Value> chat_context(const ChatInput& input, const Limits& limits) {
  try {
    auto messages = parse_json(input.messages_json, limits.max_value_depth);
    if (!messages.ok()) return Status(Code::invalid_argument, messages.status().message() + " (messages)");
    if (!messages->is_list()) return Status(Code::invalid_argument, "jinja: messages must be a JSON array");
    Value tools = Value::none();
    if (!input.tools_json.empty()) {
      auto t = parse_json(input.tools_json, limits.max_value_depth);
      if (!t.ok()) return Status(Code::invalid_argument, t.status().message() + " (tools)");
      tools = std::move(t).value();
    }
    std::vector<std::pair<std::string, Value>> entries = {
        {"messages", std::move(messages).value()},
        {"tools", std::move(tools)},
        {"documents", Value::none()},
        {"add_generation_prompt", Value(input.add_generation_prompt)},
        {"bos_token", Value(input.bos_token)},
        {"eos_token", Value(input.eos_token)},
    };
    Value context = Value::dict(std::move(entries));
    if (!input.extra_json.empty()) {
      auto extra = parse_json(input.extra_json, limits.max_value_depth);
      if (!extra.ok()) return Status(Code::invalid_argument, extra.status().message() + " (extra variables)");
      if (!extra->is_mapping()) return Status(Code::invalid_argument, "jinja: extra variables must be a JSON object");
      std::vector<std::pair<std::string, Value>> all = context.dict_data().entries;
      DictData merged{std::move(all), false};
      for (const auto& [k, v] : extra->dict_data().entries) merged.set(k, v);
      context = Value::dict(std::move(merged.entries));
    }
    return context;
  } catch (const std::bad_alloc&) {
    return Status(Code::out_of_memory, "jinja: out of memory reading the conversation");
  } catch (const std::exception& e) {
    return Status(Code::internal, std::string("jinja: ") + e.what());
  }
}

Result<std::string> render_chat(std::string_view source, const ChatInput& input, const Limits& limits) {
  auto tmpl = Template::compile(source, limits);
  if (!tmpl.ok()) return tmpl.status();
  auto context = chat_context(input, limits);
  if (!context.ok()) return context.status();
  RenderOptions options;
  options.now = input.now;
  return tmpl->render(*context, options);
}

}  // namespace llmsvc::jinja
