// SPDX-License-Identifier: Apache-2.0
// The tools a context declares, as an app gives them (untrusted JSON): checked and normalized
// into the OpenAI-style array chat templates read, [{"type": "function", "function": {"name",
// "description", "parameters"}}]. Bounded: 64 tools, 64 KiB, JSON nesting 64. And the calls of
// an assistant message an app appends (its own history), checked the same way.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/core/chat/tool_calls.h"

namespace llmsvc::chat {

inline constexpr size_t kMaxTools = 64;
inline constexpr size_t kMaxToolsBytes = size_t{64} << 10;
inline constexpr size_t kMaxToolsDepth = 64;

// Each tool is {"type": "function", "function": {...}} or the function object alone: a name
// of 1..64 characters [A-Za-z0-9_.-], an optional description (a string), optional parameters
// (a JSON Schema object; not compiled here). Returns the normalized array as compact JSON;
// invalid_argument names the tool and the field at fault. "" or "[]": no tools ("").
Result<std::string> normalize_tools(std::string_view json);

// The tools' names, in order, of a normalized array.
std::vector<std::string> tool_names(std::string_view normalized);

// An appended assistant message's calls, as an app gives them: a JSON array of OpenAI-style
// calls {"id", "type": "function", "function": {"name", "arguments"}} (or the function objects
// alone), arguments a JSON object or its text (OpenAI's form). Ids default to "call_<i>".
// invalid_argument names the call and the field at fault. At most kMaxToolCalls, 64 KiB.
Result<std::vector<ToolCall>> parse_app_tool_calls(std::string_view json);

}  // namespace llmsvc::chat
