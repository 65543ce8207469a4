// SPDX-License-Identifier: Apache-2.0
// JSON <-> Value. from_json builds template input (messages, tools) from nlohmann::json;
// to_json is Python's json.dumps, which Hugging Face's `tojson` filter calls
// (ensure_ascii=False by default, separators ", " / ": ", or "," / ": " with an indent).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "runtime/core/chat/jinja/value.h"

namespace llmsvc::jinja {

// Objects keep their key order. Nesting deeper than max_depth is an error.
Result<Value> from_json(const nlohmann::ordered_json& j, uint32_t max_depth = 128);
// Parses JSON text (objects keep their key order, as Python's json.loads does).
Result<Value> parse_json(std::string_view text, uint32_t max_depth = 128);

struct JsonStyle {
  std::optional<std::string> indent;  // null: one line; else the text of one level
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Errors like Python's for what JSON cannot hold: "Object of type Undefined is not JSON
// serializable" (also namespaces, callables and generators).
Result<std::string> to_json(const Value& v, const JsonStyle& style);

}  // namespace llmsvc::jinja
