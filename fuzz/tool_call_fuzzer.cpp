// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the tool-call parsers. The first byte picks the syntax; the rest is a
// model's reply. Every reply must parse or fail without throwing; a failed reply comes back
// whole; a parsed one has at most kMaxToolCalls calls, each with a name, an id and compact
// JSON-object arguments, which tool_calls_json renders and the same syntax-free check reads
// back. The reply is also read as a template source (detection is a few searches), and as an
// app's tools and an appended reply's calls (tool_spec): each is accepted in its bounds, its
// normalized form accepted again unchanged, or refused with a status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/core/chat/tool_calls.h"
#include "runtime/core/chat/tool_spec.h"

using llmsvc::chat::ArgumentsAs;
using llmsvc::chat::ToolCallFormat;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  constexpr int kFormats = static_cast<int>(ToolCallFormat::kimi_k2) + 1;
  const auto format = static_cast<ToolCallFormat>(data[0] % kFormats);
  const std::string_view reply(reinterpret_cast<const char*>(data) + 1, size - 1);

  (void)llmsvc::chat::detect_tool_call_format(reply);
  if (auto tools = llmsvc::chat::normalize_tools(reply); tools.ok()) {
    auto again = llmsvc::chat::normalize_tools(*tools);
    if (!again.ok() || *again != *tools) std::abort();  // normalized is a fixed point
    if (!tools->empty() && llmsvc::chat::tool_names(*tools).empty()) std::abort();
  }
  if (auto calls = llmsvc::chat::parse_app_tool_calls(reply); calls.ok()) {
    if (calls->size() > llmsvc::chat::kMaxToolCalls) std::abort();
    for (const auto& c : *calls)
      if (c.name.empty() || c.id.empty() || !nlohmann::ordered_json::parse(c.arguments_json, nullptr, false).is_object())
        std::abort();
  }
  const auto r = llmsvc::chat::parse_tool_calls(format, reply);
  if (r.parse_failed) {
    if (r.content != reply || r.error.empty() || !r.calls.empty()) std::abort();
    return 0;
  }
  if (r.calls.size() > llmsvc::chat::kMaxToolCalls) std::abort();
  for (const auto& c : r.calls) {
    if (c.name.empty() || c.id.empty()) std::abort();
    const auto args = nlohmann::ordered_json::parse(c.arguments_json, nullptr, false);
    if (!args.is_object() || args.dump() != c.arguments_json) std::abort();  // compact and stable
  }
  const auto as = data[0] / kFormats % 2 ? ArgumentsAs::json_text : ArgumentsAs::object;
  const auto rendered = nlohmann::ordered_json::parse(llmsvc::chat::tool_calls_json(r.calls, as), nullptr, false);
  if (!rendered.is_array() || rendered.size() != r.calls.size()) std::abort();
  return 0;
}
