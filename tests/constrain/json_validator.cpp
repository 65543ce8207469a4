// SPDX-License-Identifier: Apache-2.0
#include "tests/constrain/json_validator.h"

#include <cmath>

namespace llmsvc::constrain::test {
namespace {

using nlohmann::json;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_integer(const json& v) {
  return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
}

bool has_type(const json& v, const std::string& t) {
  if (t == "string") return v.is_string();
  if (t == "integer") return is_integer(v);
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  return false;
}

}  // namespace

std::string validate(const json& v, const json& s, const json& root) {
  if (s.is_boolean()) return s.get<bool>() ? "" : "schema false";
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    const json& target = ref == "#" ? root : root.at(json::json_pointer(ref.substr(1)));
    return validate(v, target, root);
  }
  if (s.contains("type")) {
    bool ok = false;
    if (s["type"].is_string()) ok = has_type(v, s["type"]);
    else for (const auto& t : s["type"]) ok = ok || has_type(v, t);
    if (s.value("nullable", false) && v.is_null()) ok = true;
    if (!ok) return "type " + s["type"].dump() + " but got " + v.dump();
  }
  if (s.contains("const") && v != s["const"]) return "const " + s["const"].dump();
  if (s.contains("enum")) {
    bool found = false;
    for (const auto& e : s["enum"]) found = found || e == v;
    if (!found) return v.dump() + " not in enum";
  }
  if (s.contains("anyOf")) {
    bool any = false;
    for (const auto& a : s["anyOf"]) any = any || validate(v, a, root).empty();
    if (!any) return "no anyOf branch matches " + v.dump();
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const auto& a : s["oneOf"]) n += validate(v, a, root).empty();
    if (n != 1) return std::to_string(n) + " oneOf branches match " + v.dump();
  }
  if (s.contains("allOf"))
    for (const auto& a : s["allOf"])
      if (auto r = validate(v, a, root); !r.empty()) return r;
  if (v.is_string()) {
    const size_t n = code_points(v.get<std::string>());
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return "shorter than minLength";
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return "longer than maxLength";
  }
  if (v.is_number()) {
    const double d = v.get<double>();
    if (s.contains("minimum") && d < s["minimum"].get<double>()) return v.dump() + " below minimum";
    if (s.contains("maximum") && d > s["maximum"].get<double>()) return v.dump() + " above maximum";
    if (s.contains("exclusiveMinimum") && d <= s["exclusiveMinimum"].get<double>()) return "not above exclusiveMinimum";
    if (s.contains("exclusiveMaximum") && d >= s["exclusiveMaximum"].get<double>()) return "not below exclusiveMaximum";
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return "fewer than minItems";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return "more than maxItems";
    if (s.contains("items"))
      for (const auto& e : v)
        if (auto r = validate(e, s["items"], root); !r.empty()) return "item: " + r;
  }
  if (v.is_object()) {
    if (s.contains("required"))
      for (const auto& r : s["required"])
        if (!v.contains(r.get<std::string>())) return "missing required " + r.dump();
    const json props = s.value("properties", json::object());
    for (const auto& [k, e] : v.items()) {
      if (props.contains(k)) {
        if (auto r = validate(e, props[k], root); !r.empty()) return k + ": " + r;
      } else if (s.contains("additionalProperties")) {
        if (auto r = validate(e, s["additionalProperties"], root); !r.empty()) return "additional " + k + ": " + r;
      }
    }
  }
  return "";
}

}  // namespace llmsvc::constrain::test
