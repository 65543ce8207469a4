// SPDX-License-Identifier: Apache-2.0
// Tool calls in a model's reply: which syntax a chat template teaches its model (detected from
// the template's source), the parser for each syntax (a reply -> its text and its calls), and
// the OpenAI-style `tool_calls` array that templates render back into the conversation.
// Replies are untrusted text: parsing is bounded (calls, JSON nesting) and never throws; a
// reply that starts a call it does not finish comes back whole as text, marked parse_failed.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace llmsvc::chat {

enum class ToolCallFormat {
  none,              // no tool-call syntax known: the reply is text
  hermes,            // Hermes 2/3, Qwen 2.5 / QwQ / Qwen 3: <tool_call>{"name", "arguments"}</tool_call>
  llama3,            // Llama 3.1-3.3: {"name", "parameters"}, or <|python_tag|>name.call(k=v) / code
  mistral,           // [TOOL_CALLS][{"name", "arguments", "id"}] or [TOOL_CALLS]name[CALL_ID]id[ARGS]{...}
  functionary_v3_1,  // <function=name>{...}</function>, <|python_tag|>code
  functionary_v3_2,  // name\n{...}>>>name\n{...} (the prompt ends in ">>>"); "all" is text
  firefunction_v2,   // functools[{"name", "arguments"}]
  command_r,         // Command R+: Action: ```json [{"tool_name", "parameters"}] ```
  command_r7b,       // <|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>
  granite,           // <|tool_call|>[{"name", "arguments"}]
  deepseek_r1,       // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{...}\n```...
  kimi_k2,           // <|tool_calls_section_begin|><|tool_call_begin|>functions.name:0<|tool_call_argument_begin|>{...}
};

// A stable lower-case name ("hermes", "llama3"...), for logs and tests.
std::string_view tool_call_format_name(ToolCallFormat format);

// The syntax a template's source renders for assistant tool calls (none when it has none
// this library parses).
ToolCallFormat detect_tool_call_format(std::string_view template_source);

struct ToolCall {
  std::string id;              // the model's id where the syntax has one, else "call_<n>"
  std::string name;
  std::string arguments_json;  // a JSON object, compact (no spaces)
  bool operator==(const ToolCall&) const = default;
};

struct ParsedReply {
  std::string content;  // the text around the calls (trimmed when there are calls)
  std::vector<ToolCall> calls;
  bool parse_failed = false;  // a call was started but not parsed: content is the whole reply
  std::string error;          // why, when parse_failed
};

inline constexpr size_t kMaxToolCalls = 64;
inline constexpr size_t kMaxToolCallJsonDepth = 64;

ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view model_output);

// How a template reads a call's arguments: most render them with tojson (an object); some
// concatenate them as text (Functionary, Firefunction, DeepSeek R1), where an object fails.
enum class ArgumentsAs { object, json_text };
ArgumentsAs template_arguments(ToolCallFormat format);

// `calls` as the `tool_calls` JSON array of an OpenAI-style assistant message:
// [{"id", "type": "function", "function": {"name", "arguments"}}], arguments as an object
// or as their JSON text (see ArgumentsAs); arguments that are not a JSON object are kept as
// text either way.
std::string tool_calls_json(std::span<const ToolCall> calls, ArgumentsAs arguments = ArgumentsAs::object);

}  // namespace llmsvc::chat
