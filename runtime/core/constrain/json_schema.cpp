// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/constrain/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/core/constrain/number_range.h"

namespace llmsvc::constrain {
namespace {

using Json = nlohmann::ordered_json;  // keeps properties in declared order

// The shared rules every schema grammar may use. `char` is one JSON string character.
std::string primitives() {
  const std::string ws = std::to_string(kMaxWhitespace);
  const std::string d = std::to_string(kMaxIntDigits);
  const std::string d1 = std::to_string(kMaxIntDigits - 1);
  return "ws ::= [ \\t\\n\\r]{0," + ws + "}\n"
         "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
         "string ::= \"\\\"\" char* \"\\\"\"\n"
         "integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0," + d1 + "})\n"
         "number ::= integer (\".\" [0-9]{1," + d + "})? ([eE] [-+]? [0-9]{1,3})?\n"
         "boolean ::= \"true\" | \"false\"\n"
         "null ::= \"null\"\n"
         "value ::= object | array | string | number | boolean | null\n"
         "member ::= string ws \":\" ws value ws\n"
         "object ::= \"{\" ws (member (\",\" ws member)*)? \"}\"\n"
         "array ::= \"[\" ws (value ws (\",\" ws value ws)*)? \"]\"\n";
}

// A GBNF string literal holding `bytes` (UTF-8 passes through).
std::string literal(std::string_view bytes) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string alternatives(const std::vector<std::string>& alts) {
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Keywords that only annotate: never affect what is generated.
const std::set<std::string, std::less<>>& annotations() {
  static const std::set<std::string, std::less<>> k = {
      "$schema", "$id", "$comment", "$anchor", "title", "description", "default", "examples", "example",
      "deprecated", "readOnly", "writeOnly", "format", "contentEncoding", "contentMediaType", "$defs", "definitions"};
  return k;
}

// Keywords that change the language and are not implemented.
const std::set<std::string, std::less<>>& unsupported() {
  static const std::set<std::string, std::less<>> k = {
      "pattern", "patternProperties", "multipleOf", "not", "if", "then", "else", "prefixItems", "contains",
      "minContains", "maxContains", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas",
      "dependencies", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef",
      "additionalItems"};
  return k;
}

class Compiler {
 public:
  explicit Compiler(const SchemaLimits& limits) : limits_(limits) {}

  Result<std::string> run(std::string_view text) {
    if (text.size() > limits_.max_bytes)
      return Status(Code::invalid_argument, "json schema: larger than " + std::to_string(limits_.max_bytes) + " bytes");
    LLMSVC_RETURN_IF_ERROR(check_nesting(text));
    root_ = Json::parse(text, nullptr, false);
    if (root_.is_discarded()) return Status(Code::invalid_argument, "json schema: not valid JSON");
    auto top = visit(root_, "", 0);
    if (!top.ok()) return top.status();
    std::string out = "root ::= " + *top + "\n" + primitives();
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    if (out.size() > limits_.max_grammar_bytes) return fail("", "the grammar it compiles to is too large");
    return out;
  }

 private:
  // The JSON nesting of the text, checked before parsing (the parser and the values it
  // builds recurse per level).
  Status check_nesting(std::string_view text) const {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (char c : text) {
      if (in_string) {
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        if (++depth > 2 * limits_.max_depth)
          return Status(Code::invalid_argument, "json schema: nested deeper than " + std::to_string(2 * limits_.max_depth));
      } else if (c == '}' || c == ']') {
        --depth;
      }
    }
    return Status::Ok();
  }

  static Status fail(const std::string& ptr, const std::string& msg, Code code = Code::invalid_argument) {
    return Status(code, "json schema at #" + ptr + ": " + msg);
  }

  static std::string escape_pointer(const std::string& key) {
    std::string out;
    for (char c : key) {
      if (c == '~') out += "~0";
      else if (c == '/') out += "~1";
      else out += c;
    }
    return out;
  }

  // A fresh rule name from a pointer (GBNF names: letters, digits, '-').
  std::string new_name(const std::string& ptr) {
    std::string base;
    for (char c : ptr) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (ok) base += c;
      else if (!base.empty() && base.back() != '-') base += '-';
      if (base.size() > 40) break;
    }
    while (!base.empty() && base.back() == '-') base.pop_back();
    base = "s-" + (base.empty() ? std::string("root") : base);
    std::string name = base;
    for (int i = 2; !names_.insert(name).second; ++i) name = base + "-" + std::to_string(i);
    return name;
  }

  std::string add_rule(const std::string& ptr, std::string body) {
    std::string name = new_name(ptr);
    rules_.emplace_back(name, std::move(body));
    return name;
  }

  // A local JSON pointer ("#/a/b") resolved in the root document.
  Result<const Json*> resolve(const std::string& ref, const std::string& ptr) const {
    if (ref.empty() || ref[0] != '#') return fail(ptr, "$ref '" + ref + "' is not local (only '#...' refs)", Code::unsupported);
    const Json* at = &root_;
    size_t i = 1;
    while (i < ref.size()) {
      if (ref[i] != '/') return fail(ptr, "$ref '" + ref + "' is not a JSON pointer");
      const size_t j = std::min(ref.find('/', i + 1), ref.size());
      std::string tok;
      for (size_t k = i + 1; k < j; ++k) {
        if (ref[k] == '~' && k + 1 < j && (ref[k + 1] == '0' || ref[k + 1] == '1')) {
          tok += ref[k + 1] == '0' ? '~' : '/';
          ++k;
        } else {
          tok += ref[k];
        }
      }
      if (at->is_object() && at->contains(tok)) {
        at = &(*at)[tok];
      } else if (at->is_array() && !tok.empty() && tok.find_first_not_of("0123456789") == std::string::npos &&
                 tok.size() < 9 && std::stoul(tok) < at->size()) {
        at = &(*at)[std::stoul(tok)];
      } else {
        return fail(ptr, "$ref '" + ref + "' points nowhere");
      }
      i = j;
    }
    return at;
  }

  Result<std::string> visit(const Json& s, const std::string& ptr, int depth) {
    if (depth > limits_.max_depth) return fail(ptr, "nested deeper than " + std::to_string(limits_.max_depth));
    if (s.is_boolean()) {
      if (s.get<bool>()) return std::string("value");
      return fail(ptr, "the schema 'false' matches nothing");
    }
    if (!s.is_object()) return fail(ptr, "a schema must be an object or a boolean");
    for (const auto& [key, v] : s.items()) {
      if (unsupported().count(key)) {
        // additionalItems: true is the default.
        if (key == "additionalItems" && v.is_boolean() && v.get<bool>()) continue;
        return fail(ptr, "keyword '" + key + "' is not supported", Code::unsupported);
      }
    }
    if (s.contains("uniqueItems") && !(s["uniqueItems"].is_boolean() && !s["uniqueItems"].get<bool>()))
      return fail(ptr, "keyword 'uniqueItems' is not supported", Code::unsupported);
    if (s.contains("$ref")) return visit_ref(s, ptr, depth);
    for (const char* k : {"anyOf", "oneOf"})
      if (s.contains(k)) return visit_any_of(s, k, ptr, depth);
    if (s.contains("allOf")) {
      const Json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1)
        return fail(ptr + "/allOf", "only allOf with one member is supported", Code::unsupported);
      if (has_language_keywords(s, "allOf")) return fail(ptr, "allOf beside other constraints is not supported", Code::unsupported);
      return visit(all[0], ptr + "/allOf/0", depth + 1);
    }
    if (s.contains("const")) return literal_of(s["const"]);
    if (s.contains("enum")) return visit_enum(s["enum"], ptr + "/enum");
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const auto& x : t) {
          if (!x.is_string()) return fail(ptr + "/type", "type names must be strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return fail(ptr + "/type", "type must be a string or a non-empty array of strings");
      }
    } else {
      types.push_back(infer_type(s));
    }
    if (s.contains("nullable") && s["nullable"].is_boolean() && s["nullable"].get<bool>()) types.push_back("null");
    std::vector<std::string> alts;
    for (const auto& t : types) {
      auto r = visit_type(s, t, ptr, depth);
      if (!r.ok()) return r;
      if (std::find(alts.begin(), alts.end(), *r) == alts.end()) alts.push_back(*r);
    }
    return alts.size() == 1 ? alts[0] : add_rule(ptr, alternatives(alts));
  }

  static std::string infer_type(const Json& s) {
    for (const char* k : {"properties", "additionalProperties", "required"})
      if (s.contains(k)) return "object";
    for (const char* k : {"items", "minItems", "maxItems"})
      if (s.contains(k)) return "array";
    for (const char* k : {"minLength", "maxLength"})
      if (s.contains(k)) return "string";
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k)) return "number";
    return "any";
  }

  // Whether `s` has keywords besides `except` that constrain values.
  static bool has_language_keywords(const Json& s, std::string_view except) {
    for (const auto& [key, v] : s.items())
      if (key != except && !annotations().count(key)) return true;
    return false;
  }

  Result<std::string> visit_ref(const Json& s, const std::string& ptr, int depth) {
    if (!s["$ref"].is_string()) return fail(ptr + "/$ref", "$ref must be a string");
    if (has_language_keywords(s, "$ref")) return fail(ptr, "$ref beside other constraints is not supported", Code::unsupported);
    const std::string ref = s["$ref"].get<std::string>();
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    auto target = resolve(ref, ptr);
    if (!target.ok()) return target.status();
    // Named before visiting, so a recursive reference finds it.
    const std::string name = new_name(ref.substr(1));
    refs_[ref] = name;
    const size_t slot = rules_.size();
    rules_.emplace_back(name, "");
    auto body = visit(**target, ref.substr(1), depth + 1);
    if (!body.ok()) return body;
    rules_[slot].second = *body;
    return name;
  }

  Result<std::string> visit_any_of(const Json& s, const char* key, const std::string& ptr, int depth) {
    const Json& list = s[key];
    if (!list.is_array() || list.empty()) return fail(ptr + "/" + key, std::string(key) + " must be a non-empty array");
    if (has_language_keywords(s, key))
      return fail(ptr, std::string(key) + " beside other constraints is not supported", Code::unsupported);
    std::vector<std::string> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto r = visit(list[i], ptr + "/" + key + "/" + std::to_string(i), depth + 1);
      if (!r.ok()) return r;
      alts.push_back(*r);
    }
    return add_rule(ptr, alternatives(alts));
  }

  static std::string literal_of(const Json& v) { return literal(v.dump()); }

  Result<std::string> visit_enum(const Json& values, const std::string& ptr) {
    if (!values.is_array() || values.empty()) return fail(ptr, "enum must be a non-empty array");
    if (values.size() > limits_.max_enum) return fail(ptr, "more than " + std::to_string(limits_.max_enum) + " enum values");
    std::vector<std::string> alts;
    for (const auto& v : values) alts.push_back(literal_of(v));
    return add_rule(ptr, alternatives(alts));
  }

  Result<std::string> visit_type(const Json& s, const std::string& t, const std::string& ptr, int depth) {
    if (t == "string") return visit_string(s, ptr);
    if (t == "integer" || t == "number") return visit_number(s, t == "integer", ptr);
    if (t == "boolean") return std::string("boolean");
    if (t == "null") return std::string("null");
    if (t == "object") return visit_object(s, ptr, depth);
    if (t == "array") return visit_array(s, ptr, depth);
    if (t == "any") return std::string("value");
    return fail(ptr + "/type", "unknown type '" + t + "'");
  }

  // A non-negative integer keyword, or nullopt when absent.
  static Result<std::optional<int64_t>> count_of(const Json& s, const char* key, const std::string& ptr) {
    if (!s.contains(key)) return std::optional<int64_t>();
    const Json& v = s[key];
    if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
      return fail(ptr + "/" + key, std::string(key) + " must be a non-negative integer");
    const double d = v.get<double>();
    if (d < 0) return fail(ptr + "/" + key, std::string(key) + " must be a non-negative integer");
    return std::optional<int64_t>(d > 1e15 ? int64_t{1000000000000000} : static_cast<int64_t>(d));
  }

  // x{min,max} text for min/max counts; max capped at kMaxBoundedRepeat (narrower, valid).
  static Result<std::string> bounds(std::optional<int64_t> mn, std::optional<int64_t> mx, const std::string& ptr,
                                    const char* what) {
    const int64_t lo = mn.value_or(0);
    if (mx && *mx < lo) return fail(ptr, std::string("max") + what + " is below min" + what);
    if (lo > kMaxBoundedRepeat)
      return fail(ptr, std::string("min") + what + " above " + std::to_string(kMaxBoundedRepeat) + " is not supported",
                  Code::unsupported);
    std::string out(1, '{');  // ("{" + ... trips GCC 12's -Wrestrict false positive)
    out += std::to_string(lo);
    out += ',';
    if (mx) out += std::to_string(std::min<int64_t>(*mx, kMaxBoundedRepeat));
    out += '}';
    return out;
  }

  Result<std::string> visit_string(const Json& s, const std::string& ptr) {
    auto mn = count_of(s, "minLength", ptr);
    if (!mn.ok()) return mn.status();
    auto mx = count_of(s, "maxLength", ptr);
    if (!mx.ok()) return mx.status();
    if (!*mn && !*mx) return std::string("string");
    auto rep = bounds(*mn, *mx, ptr, "Length");
    if (!rep.ok()) return rep.status();
    return add_rule(ptr, "\"\\\"\" char" + *rep + " \"\\\"\"");
  }

  // A bound keyword as a number, or nullopt.
  static Result<std::optional<double>> bound_of(const Json& s, const char* key, const std::string& ptr) {
    if (!s.contains(key)) return std::optional<double>();
    const Json& v = s[key];
    if (v.is_boolean()) return std::optional<double>();  // draft-4 exclusive flags, read below
    if (!v.is_number()) return fail(ptr + "/" + key, std::string(key) + " must be a number");
    return std::optional<double>(v.get<double>());
  }

  Result<std::string> visit_number(const Json& s, bool integer, const std::string& ptr) {
    std::optional<double> lo_in, hi_in, lo_ex, hi_ex;
    using Slot = std::pair<const char*, std::optional<double>*>;
    for (auto [key, slot] : {Slot{"minimum", &lo_in}, Slot{"maximum", &hi_in}, Slot{"exclusiveMinimum", &lo_ex},
                             Slot{"exclusiveMaximum", &hi_ex}}) {
      auto b = bound_of(s, key, ptr);
      if (!b.ok()) return b.status();
      *slot = *b;
    }
    // Draft 4: exclusiveMinimum: true makes minimum exclusive.
    auto flag = [&](const char* k) { return s.contains(k) && s[k].is_boolean() && s[k].get<bool>(); };
    if (flag("exclusiveMinimum") && lo_in) std::swap(lo_in, lo_ex);
    if (flag("exclusiveMaximum") && hi_in) std::swap(hi_in, hi_ex);
    if (!lo_in && !hi_in && !lo_ex && !hi_ex) return std::string(integer ? "integer" : "number");
    // Integer bounds, rounded inward: exact for integers, narrower (still valid) for numbers.
    std::optional<int64_t> lo, hi;
    auto clampd = [](double d) { return std::max(-1e17, std::min(1e17, d)); };
    if (lo_in) lo = static_cast<int64_t>(std::ceil(clampd(*lo_in)));
    if (lo_ex) {
      const auto v = static_cast<int64_t>(std::floor(clampd(*lo_ex))) + 1;
      lo = lo ? std::max(*lo, v) : v;
    }
    if (hi_in) hi = static_cast<int64_t>(std::floor(clampd(*hi_in)));
    if (hi_ex) {
      const auto v = static_cast<int64_t>(std::ceil(clampd(*hi_ex))) - 1;
      hi = hi ? std::min(*hi, v) : v;
    }
    std::string body = integer ? integer_range_gbnf(lo, hi) : number_range_gbnf(lo, hi);
    if (body.empty()) return fail(ptr, "no " + std::string(integer ? "integer" : "number") + " satisfies the bounds");
    return add_rule(ptr, body);
  }

  Result<std::string> visit_object(const Json& s, const std::string& ptr, int depth) {
    const bool has_props = s.contains("properties");
    const Json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (!has_props && !extra && !s.contains("required")) return std::string("object");
    static const Json kEmpty = Json::object();
    const Json& props = has_props ? s["properties"] : kEmpty;
    if (!props.is_object()) return fail(ptr + "/properties", "properties must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return fail(ptr + "/required", "required must be an array of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) return fail(ptr + "/required", "required must be an array of names");
        if (!props.contains(r.get<std::string>()))
          return fail(ptr + "/required", "required property '" + r.get<std::string>() + "' is not in properties",
                      Code::unsupported);
        required.insert(r.get<std::string>());
      }
    }
    // Members: "key" ws ":" ws value ws, each rule-named for readable grammars.
    std::vector<std::string> members;
    std::vector<bool> needed;
    for (const auto& [key, sub] : props.items()) {
      const std::string sub_ptr = ptr + "/properties/" + escape_pointer(key);
      auto v = visit(sub, sub_ptr, depth + 1);
      if (!v.ok()) return v;
      members.push_back(literal(Json(key).dump()) + " ws \":\" ws " + *v + " ws");
      needed.push_back(required.count(key) > 0);
    }
    std::string extra_member;
    if (extra) {
      if (extra->is_boolean() && !extra->get<bool>()) {
        extra = nullptr;
      } else {
        auto v = visit(*extra, ptr + "/additionalProperties", depth + 1);
        if (!v.ok()) return v;
        extra_member = "string ws \":\" ws " + *v + " ws";
      }
    }
    // first_i: members from i on, none written yet; rest_i: the same after one was written
    // (each preceded by a comma). Optional members may be skipped; order is as declared.
    const size_t n = members.size();
    std::vector<std::string> first(n + 1), rest(n + 1);
    if (extra) {
      rest[n] = add_rule(ptr + "/additionalProperties", "(\",\" ws " + extra_member + ")*");
      first[n] = add_rule(ptr + "/additionalProperties", "(" + extra_member + " " + rest[n] + ")?");
    }
    for (size_t i = n; i-- > 0;) {
      const std::string tail_rest = rest[i + 1].empty() ? "" : " " + rest[i + 1];
      const std::string r = "\",\" ws " + members[i] + tail_rest;
      rest[i] = add_rule(ptr, needed[i] ? r : r + " | " + (rest[i + 1].empty() ? "\"\"" : rest[i + 1]));
      const std::string f = members[i] + tail_rest;
      first[i] = add_rule(ptr, needed[i] ? f : f + " | " + (first[i + 1].empty() ? "\"\"" : first[i + 1]));
    }
    return add_rule(ptr, "\"{\" ws " + (first[0].empty() ? "" : first[0] + " ") + "\"}\"");
  }

  Result<std::string> visit_array(const Json& s, const std::string& ptr, int depth) {
    std::string item = "value";
    if (s.contains("items")) {
      const Json& items = s["items"];
      if (items.is_array()) return fail(ptr + "/items", "tuple-form items is not supported", Code::unsupported);
      if (items.is_boolean() && !items.get<bool>()) {
        item.clear();
      } else {
        auto v = visit(items, ptr + "/items", depth + 1);
        if (!v.ok()) return v;
        item = *v;
      }
    }
    auto mn = count_of(s, "minItems", ptr);
    if (!mn.ok()) return mn.status();
    auto mx = count_of(s, "maxItems", ptr);
    if (!mx.ok()) return mx.status();
    if (item.empty()) {  // items: false: only the empty array
      if (mn->value_or(0) > 0) return fail(ptr, "minItems above 0 with items false matches nothing");
      return add_rule(ptr, "\"[\" ws \"]\"");
    }
    if (!*mn && !*mx && item == "value") return std::string("array");
    const int64_t lo = mn->value_or(0);
    // The first item, then the others each after a comma: bounds shift by one.
    std::optional<int64_t> more_lo = std::max<int64_t>(lo - 1, 0), more_hi;
    if (*mx) {
      if (**mx < lo) return fail(ptr, "maxItems is below minItems");
      if (**mx == 0) return add_rule(ptr, "\"[\" ws \"]\"");
      more_hi = **mx - 1;
    }
    auto rep = bounds(more_lo, more_hi, ptr, "Items");
    if (!rep.ok()) return rep.status();
    const std::string items = item + " ws (\",\" ws " + item + " ws)" + *rep;
    return add_rule(ptr, "\"[\" ws " + (lo > 0 ? items : "(" + items + ")?") + " \"]\"");
  }

  SchemaLimits limits_;
  Json root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  std::map<std::string, std::string> refs_;
};

}  // namespace

std::string any_json_gbnf() { return "root ::= value\n" + primitives(); }

Result<std::string> json_schema_to_gbnf(std::string_view schema, const SchemaLimits& limits) {
  try {
    return Compiler(limits).run(schema);
  } catch (const std::exception& e) {  // allocation failure, or a json accessor we misjudged
    return Status(Code::invalid_argument, std::string("json schema: ") + e.what());
  }
}

}  // namespace llmsvc::constrain
