// SPDX-License-Identifier: Apache-2.0
// JSON <-> Value (see json.h). to_json follows CPython's json encoder: the same separators,
// indentation, escapes and float spelling (repr; NaN / Infinity).
#include "runtime/core/chat/jinja/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/core/chat/jinja/text.h"

namespace llmsvc::jinja {
namespace {

Result<Value> convert(const nlohmann::ordered_json& j, uint32_t depth, uint32_t max_depth) {
  if (depth > max_depth) return Status(Code::invalid_argument, "jinja: JSON nested deeper than " + std::to_string(max_depth));
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::json::value_t::string: return Value(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        auto v = convert(e, depth + 1, max_depth);
        if (!v.ok()) return v;
        items.push_back(std::move(v).value());
      }
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::pair<std::string, Value>> entries;
      entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) {
        auto v = convert(e, depth + 1, max_depth);
        if (!v.ok()) return v;
        entries.emplace_back(k, std::move(v).value());
      }
      return Value::dict(std::move(entries));
    }
    default: return Status(Code::invalid_argument, "jinja: unsupported JSON value (binary)");
  }
}

void escape(std::string& out, std::string_view s, bool ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const uint32_t cp = text::next_code_point(s, i);
    char buf[16];
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20 || (ascii && cp >= 0x7F)) {
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
    } else {
      out += s.substr(at, i - at);
    }
  }
  out += '"';
}

class Encoder {
 public:
  explicit Encoder(const JsonStyle& style) : style_(style) {}

  Status encode(const Value& v, int level) {
    switch (v.kind()) {
      case Kind::none: out_ += "null"; return Status::Ok();
      case Kind::boolean: out_ += v.as_bool() ? "true" : "false"; return Status::Ok();
      case Kind::integer: out_ += std::to_string(v.as_int()); return Status::Ok();
      case Kind::floating: {
        const double d = v.as_double();
        if (std::isnan(d)) out_ += "NaN";
        else if (std::isinf(d)) out_ += d > 0 ? "Infinity" : "-Infinity";
        else out_ += text::format_float(d);
        return Status::Ok();
      }
      case Kind::string: escape(out_, v.str(), style_.ensure_ascii); return Status::Ok();
      case Kind::list:
        if (v.is_generator()) break;
        return encode_list(v, level);
      case Kind::dict:
        if (v.is_namespace()) break;
        return encode_dict(v.dict_data(), level);
      default: break;
    }
    return Status(Code::invalid_argument,
                  "TypeError: Object of type " + std::string(v.type_name()) + " is not JSON serializable");
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(int level) {
    if (!style_.indent) return;
    out_ += '\n';
    for (int i = 0; i < level; ++i) out_ += *style_.indent;
  }

  Status encode_list(const Value& v, int level) {
    if (v.items().empty()) {
      out_ += "[]";
      return Status::Ok();
    }
    out_ += '[';
    newline(level + 1);
    bool first = true;
    for (const Value& item : v.items()) {
      if (!first) {
        out_ += style_.item_separator;
        newline(level + 1);
      }
      first = false;
      LLMSVC_RETURN_IF_ERROR(encode(item, level + 1));
    }
    newline(level);
    out_ += ']';
    return Status::Ok();
  }

  Status encode_dict(const DictData& d, int level) {
    if (d.entries.empty()) {
      out_ += "{}";
      return Status::Ok();
    }
    std::vector<const std::pair<std::string, Value>*> order;
    order.reserve(d.entries.size());
    for (const auto& e : d.entries) order.push_back(&e);
    if (style_.sort_keys) {
      std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->first < b->first; });
    }
    out_ += '{';
    newline(level + 1);
    bool first = true;
    for (const auto* e : order) {
      if (!first) {
        out_ += style_.item_separator;
        newline(level + 1);
      }
      first = false;
      escape(out_, e->first, style_.ensure_ascii);
      out_ += style_.key_separator;
      LLMSVC_RETURN_IF_ERROR(encode(e->second, level + 1));
    }
    newline(level);
    out_ += '}';
    return Status::Ok();
  }

  const JsonStyle& style_;
  std::string out_;
};

}  // namespace

Result<Value> from_json(const nlohmann::ordered_json& j, uint32_t max_depth) { return convert(j, 0, max_depth); }

Result<Value> parse_json(std::string_view text, uint32_t max_depth) {
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status(Code::invalid_argument, "jinja: invalid JSON");
  return from_json(j, max_depth);
}

Result<std::string> to_json(const Value& v, const JsonStyle& style) {
  Encoder e(style);
  LLMSVC_RETURN_IF_ERROR(e.encode(v, 0));
  return e.take();
}

}  // namespace llmsvc::jinja
