// SPDX-License-Identifier: Apache-2.0
// normalize_tools: an app's tool list checked and put in the form chat templates read, its
// objects' keys in the app's order (templates print them with tojson as given).
#include "runtime/core/chat/tool_spec.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace llmsvc::chat {
namespace {

Status bad(size_t i, const std::string& why) {
  return Status(Code::invalid_argument, "tools[" + std::to_string(i) + "]: " + why);
}

// The deepest nesting of arrays and objects in `json`, strings skipped (bounds the parser's
// recursion before it runs).
size_t depth_of(std::string_view json) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
      return false;
  return true;
}

}  // namespace

Result<std::string> normalize_tools(std::string_view json) {
  if (json.empty()) return std::string();
  if (json.size() > kMaxToolsBytes)
    return Status(Code::invalid_argument, "tools: " + std::to_string(json.size()) + " bytes, more than the " +
                                              std::to_string(kMaxToolsBytes) + " a context takes");
  if (depth_of(json) > kMaxToolsDepth)
    return Status(Code::invalid_argument, "tools: nested deeper than " + std::to_string(kMaxToolsDepth));
  const nlohmann::ordered_json list = nlohmann::ordered_json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded()) return Status(Code::invalid_argument, "tools: not JSON");
  if (!list.is_array()) return Status(Code::invalid_argument, "tools: not a JSON array");
  if (list.size() > kMaxTools)
    return Status(Code::invalid_argument, "tools: " + std::to_string(list.size()) + " tools, more than " +
                                              std::to_string(kMaxTools));
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::vector<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::ordered_json& t = list[i];
    if (!t.is_object()) return bad(i, "not an object");
    const nlohmann::ordered_json* fn = &t;
    if (t.contains("type")) {
      if (t["type"] != "function") return bad(i, "type is not \"function\"");
      if (!t.contains("function") || !t["function"].is_object()) return bad(i, "function: not an object");
      fn = &t["function"];
    }
    if (!fn->contains("name") || !(*fn)["name"].is_string()) return bad(i, "name: not a string");
    const std::string name = (*fn)["name"].get<std::string>();
    if (!valid_name(name)) return bad(i, "name: 1 to 64 characters of [A-Za-z0-9_.-]");
    for (const std::string& n : names)
      if (n == name) return bad(i, "name: \"" + name + "\" is declared twice");
    names.push_back(name);
    nlohmann::ordered_json f = {{"name", name}};
    if (fn->contains("description")) {
      if (!(*fn)["description"].is_string()) return bad(i, "description: not a string");
      f["description"] = (*fn)["description"];
    }
    if (fn->contains("parameters")) {
      if (!(*fn)["parameters"].is_object()) return bad(i, "parameters: not a JSON Schema object");
      f["parameters"] = (*fn)["parameters"];
    }
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  if (out.empty()) return std::string();
  return out.dump();
}

Result<std::vector<ToolCall>> parse_app_tool_calls(std::string_view json) {
  auto bad_call = [](size_t i, const std::string& why) {
    return Status(Code::invalid_argument, "tool_calls[" + std::to_string(i) + "]: " + why);
  };
  if (json.size() > kMaxToolsBytes) return Status(Code::invalid_argument, "tool_calls: more than 64 KiB");
  if (depth_of(json) > kMaxToolsDepth)
    return Status(Code::invalid_argument, "tool_calls: nested deeper than " + std::to_string(kMaxToolsDepth));
  const nlohmann::ordered_json list = nlohmann::ordered_json::parse(json, nullptr, false);
  if (list.is_discarded() || !list.is_array()) return Status(Code::invalid_argument, "tool_calls: not a JSON array");
  if (list.size() > kMaxToolCalls) return Status(Code::invalid_argument, "tool_calls: too many calls");
  std::vector<ToolCall> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& c = list[i];
    if (!c.is_object()) return bad_call(i, "not an object");
    const auto* fn = &c;
    if (c.contains("function")) {
      if (!c["function"].is_object()) return bad_call(i, "function: not an object");
      fn = &c["function"];
    }
    if (!fn->contains("name") || !(*fn)["name"].is_string() || !valid_name((*fn)["name"].get<std::string>()))
      return bad_call(i, "name: 1 to 64 characters of [A-Za-z0-9_.-]");
    ToolCall call;
    call.name = (*fn)["name"].get<std::string>();
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    if (fn->contains("arguments")) {
      const auto& a = (*fn)["arguments"];
      if (a.is_string()) args = nlohmann::ordered_json::parse(a.get<std::string>(), nullptr, false);
      else args = a;
      if (!args.is_object()) return bad_call(i, "arguments: not a JSON object (or its text)");
    }
    call.arguments_json = args.dump();
    if (c.contains("id")) {
      if (!c["id"].is_string() || c["id"].get<std::string>().empty()) return bad_call(i, "id: not a string");
      call.id = c["id"].get<std::string>();
    } else {
      call.id = "call_" + std::to_string(i);
    }
    out.push_back(std::move(call));
  }
  return out;
}

std::vector<std::string> tool_names(std::string_view normalized) {
  std::vector<std::string> names;
  const nlohmann::ordered_json list = nlohmann::ordered_json::parse(normalized, nullptr, false);
  if (!list.is_array()) return names;
  for (const auto& t : list)
    if (t.contains("function") && t["function"].contains("name") && t["function"]["name"].is_string())
      names.push_back(t["function"]["name"].get<std::string>());
  return names;
}

}  // namespace llmsvc::chat
