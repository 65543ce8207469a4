// SPDX-License-Identifier: Apache-2.0
// Methods of str, dict and list that templates call (`content.strip()`, `message.get('x')`,
// `d.items()`). Mutating methods (list.append, dict.update...) do not exist here, as in the
// immutable sandbox Hugging Face renders with: calling one is an error.
#include "runtime/core/chat/jinja/builtins.h"
#include "runtime/core/chat/jinja/format.h"
#include "runtime/core/chat/jinja/operators.h"
#include "runtime/core/chat/jinja/text.h"

namespace llmsvc::jinja {
namespace {

constexpr std::string_view kStrMethods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "replace", "find", "rfind", "count", "join", "isdigit", "isalpha", "isalnum",
    "isspace", "islower", "isupper", "removeprefix", "removesuffix"};
constexpr std::string_view kDictMethods[] = {"items", "keys", "values", "get"};
constexpr std::string_view kListMethods[] = {"index", "count"};

template <size_t N>
bool in_list(const std::string_view (&names)[N], std::string_view name) {
  for (std::string_view n : names) {
    if (n == name) return true;
  }
  return false;
}

std::vector<Value> strings(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (const std::string& p : parts) out.emplace_back(p);
  return out;
}

// The optional chars argument of strip / lstrip / rstrip.
Result<Value> strip_method(Interpreter& in, std::string_view s, std::string_view name, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, name, args, {{"chars", Value::none()}}, pos);
  if (!a.ok()) return a.status();
  const bool left = name != "rstrip", right = name != "lstrip";
  if ((*a)[0].is_none()) return Value(text::strip(s, nullptr, left, right));
  auto chars = str_arg(in, name, (*a)[0], pos);
  if (!chars.ok()) return chars.status();
  const std::string_view c = *chars;
  return Value(text::strip(s, &c, left, right));
}

// startswith / endswith with a str or a tuple of them.
Result<Value> affix_method(Interpreter& in, std::string_view s, std::string_view name, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, name, args, {{"prefix", Value()}}, pos);
  if (!a.ok()) return a.status();
  std::vector<Value> options = (*a)[0].is_list() ? (*a)[0].items() : std::vector<Value>{(*a)[0]};
  for (const Value& o : options) {
    auto p = str_arg(in, name, o, pos);
    if (!p.ok()) return p.status();
    const bool hit = name == "startswith" ? s.substr(0, p->size()) == *p
                                          : s.size() >= p->size() && s.substr(s.size() - p->size()) == *p;
    if (hit) return Value(true);
  }
  return Value(false);
}

Result<Value> split_method(Interpreter& in, std::string_view s, std::string_view name, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, name, args, {{"sep", Value::none()}, {"maxsplit", Value(-1)}}, pos);
  if (!a.ok()) return a.status();
  auto maxsplit = int_arg(in, name, (*a)[1], pos);
  if (!maxsplit.ok()) return maxsplit.status();
  std::vector<std::string> parts;
  if ((*a)[0].is_none()) {
    if (name == "rsplit" && *maxsplit >= 0) return in.error(pos, "unsupported: rsplit on whitespace with maxsplit", Code::unsupported);
    parts = text::split(s, nullptr, *maxsplit);
  } else {
    auto sep = str_arg(in, name, (*a)[0], pos);
    if (!sep.ok()) return sep.status();
    if (sep->empty()) return in.error(pos, "ValueError: empty separator");
    parts = name == "split" ? text::split(s, &*sep, *maxsplit) : text::rsplit(s, *sep, *maxsplit);
  }
  LLMSVC_RETURN_IF_ERROR(in.check_list(parts.size(), pos));
  return Value::list(strings(parts));
}

Result<Value> find_method(Interpreter& in, std::string_view s, std::string_view name, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, name, args, {{"sub", Value()}}, pos);
  if (!a.ok()) return a.status();
  auto sub = str_arg(in, name, (*a)[0], pos);
  if (!sub.ok()) return sub.status();
  if (name == "count") {
    if (sub->empty()) return Value(static_cast<int64_t>(text::length(s) + 1));
    int64_t n = 0;
    for (size_t at = s.find(*sub); at != std::string_view::npos; at = s.find(*sub, at + sub->size())) ++n;
    return Value(n);
  }
  const size_t at = name == "find" ? s.find(*sub) : s.rfind(*sub);
  if (at == std::string_view::npos) return Value(-1);
  return Value(static_cast<int64_t>(text::length(s.substr(0, at))));
}

// isdigit / isalpha / isalnum / isspace / islower / isupper over ASCII classes (non-ASCII
// letters count as alphabetic).
Result<Value> class_method(Interpreter& in, std::string_view s, std::string_view name, const CallArgs& args, Pos pos) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, name, args, {}, pos).status());
  if (name == "isspace") return Value(!s.empty() && text::strip(s, nullptr, true, true).empty());
  if (name == "islower" || name == "isupper") {
    bool cased = false;
    for (char c : s) {
      const bool lo = c >= 'a' && c <= 'z', up = c >= 'A' && c <= 'Z';
      if ((name == "islower" && up) || (name == "isupper" && lo)) return Value(false);
      cased |= lo || up;
    }
    return Value(cased);
  }
  if (s.empty()) return Value(false);
  for (char c : s) {
    const bool digit = c >= '0' && c <= '9';
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || static_cast<unsigned char>(c) >= 0x80;
    const bool ok = name == "isdigit" ? digit : name == "isalpha" ? alpha : digit || alpha;
    if (!ok) return Value(false);
  }
  return Value(true);
}

Result<Value> str_method(Interpreter& in, const std::string& s, std::string_view name, const CallArgs& args, Pos pos) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") return strip_method(in, s, name, args, pos);
  if (name == "startswith" || name == "endswith") return affix_method(in, s, name, args, pos);
  if (name == "split" || name == "rsplit") return split_method(in, s, name, args, pos);
  if (name == "find" || name == "rfind" || name == "count") return find_method(in, s, name, args, pos);
  if (name.substr(0, 2) == "is") return class_method(in, s, name, args, pos);
  if (name == "replace") {
    auto a = bind_args(in, name, args, {{"old", Value()}, {"new", Value()}, {"count", Value(-1)}}, pos);
    if (!a.ok()) return a.status();
    auto from = str_arg(in, name, (*a)[0], pos);
    auto to = str_arg(in, name, (*a)[1], pos);
    auto count = int_arg(in, name, (*a)[2], pos);
    if (!from.ok()) return from.status();
    if (!to.ok()) return to.status();
    if (!count.ok()) return count.status();
    std::string out = text::replace(s, *from, *to, *count);
    LLMSVC_RETURN_IF_ERROR(in.check_string(out.size(), pos));
    return Value(std::move(out));
  }
  if (name == "join") {
    auto a = bind_args(in, name, args, {{"iterable", Value()}}, pos);
    if (!a.ok()) return a.status();
    auto items = iterate(in, (*a)[0], pos);
    if (!items.ok()) return items.status();
    std::string out;
    for (size_t i = 0; i < items->size(); ++i) {
      auto part = str_arg(in, name, (*items)[i], pos);
      if (!part.ok()) return part.status();
      if (i) out += s;
      out += *part;
      LLMSVC_RETURN_IF_ERROR(in.check_string(out.size(), pos));
    }
    return Value(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto a = bind_args(in, name, args, {{"affix", Value()}}, pos);
    if (!a.ok()) return a.status();
    auto x = str_arg(in, name, (*a)[0], pos);
    if (!x.ok()) return x.status();
    const std::string_view v = s;
    if (name == "removeprefix" && v.substr(0, x->size()) == *x) return Value(v.substr(x->size()));
    if (name == "removesuffix" && !x->empty() && v.size() >= x->size() && v.substr(v.size() - x->size()) == *x) {
      return Value(v.substr(0, v.size() - x->size()));
    }
    return Value(s);
  }
  LLMSVC_RETURN_IF_ERROR(bind_args(in, name, args, {}, pos).status());
  if (name == "splitlines") {
    std::vector<Value> out;
    for (std::string_view line : text::splitlines(s)) out.emplace_back(line);
    return Value::list(std::move(out));
  }
  if (name == "upper") return Value(text::upper(s));
  if (name == "lower") return Value(text::lower(s));
  if (name == "title") return Value(text::py_title(s));
  return Value(text::capitalize(s));
}

Result<Value> dict_method(Interpreter& in, const DictData& d, std::string_view name, const CallArgs& args, Pos pos) {
  if (name == "get") {
    auto a = bind_args(in, name, args, {{"key", Value()}, {"default", Value::none()}}, pos);
    if (!a.ok()) return a.status();
    if ((*a)[0].is_string()) {
      if (const Value* v = d.find((*a)[0].str())) return *v;
    }
    return (*a)[1];
  }
  LLMSVC_RETURN_IF_ERROR(bind_args(in, name, args, {}, pos).status());
  std::vector<Value> out;
  out.reserve(d.entries.size());
  for (const auto& [k, v] : d.entries) {
    if (name == "keys") out.emplace_back(k);
    else if (name == "values") out.push_back(v);
    else out.push_back(Value::list({Value(k), v}, ListKind::tuple));
  }
  return Value::list(std::move(out));
}

Result<Value> list_method(Interpreter& in, const std::vector<Value>& items, std::string_view name, const CallArgs& args,
                          Pos pos) {
  auto a = bind_args(in, name, args, {{"value", Value()}}, pos);
  if (!a.ok()) return a.status();
  int64_t count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!equals(items[i], (*a)[0])) continue;
    if (name == "index") return Value(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") return in.error(pos, "ValueError: " + repr((*a)[0]) + " is not in list");
  return Value(count);
}

}  // namespace

bool has_method(const Value& self, std::string_view name) {
  if (self.is_string()) return in_list(kStrMethods, name);
  if (self.is_mapping()) return in_list(kDictMethods, name);
  if (self.is_list() && !self.is_generator()) return in_list(kListMethods, name);
  return false;
}

Result<Value> call_method(Interpreter& in, const Value& self, std::string_view name, const CallArgs& args, Pos pos) {
  if (self.is_string() && in_list(kStrMethods, name)) return str_method(in, self.str(), name, args, pos);
  if (self.is_mapping() && in_list(kDictMethods, name)) return dict_method(in, self.dict_data(), name, args, pos);
  if (self.is_list() && in_list(kListMethods, name)) return list_method(in, self.items(), name, args, pos);
  return in.error(pos, text::quote(self.type_name()) + " object has no method " + text::quote(name));
}

}  // namespace llmsvc::jinja
