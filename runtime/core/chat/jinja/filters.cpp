// SPDX-License-Identifier: Apache-2.0
// jinja2's filters as chat templates use them, with Hugging Face's `tojson` (json.dumps with
// ensure_ascii=False). map / select / reject / selectattr / rejectattr / unique / items return
// generators as in jinja2: iterable and joinable, but `|length` and `|tojson` fail on them
// until `|list` makes a list.
#include <algorithm>
#include <cerrno>
#include <cmath>

#include "runtime/core/chat/jinja/builtins.h"
#include "runtime/core/chat/jinja/format.h"
#include "runtime/core/chat/jinja/json.h"
#include "runtime/core/chat/jinja/operators.h"
#include "runtime/core/chat/jinja/text.h"

namespace llmsvc::jinja {
namespace {

using FilterFn = Result<Value> (*)(Interpreter&, const Value&, const CallArgs&, Pos);

Value generator(std::vector<Value> items) { return Value::list(std::move(items), ListKind::generator); }

// Looks up a dotted attribute path ("function.name", "0") the way jinja2's attribute
// filters do: item access per part, integer parts as indexes.
Result<Value> attr_path(Interpreter& in, const Value& item, std::string_view path, Pos pos) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string_view part = path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    Value key(part);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        part.size() < 18) {
      key = Value(static_cast<int64_t>(std::stoll(std::string(part))));
    }
    auto next = get_item(in, cur, key, pos);
    if (!next.ok()) return next;
    cur = std::move(next).value();
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

Result<Value> f_length(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, "length", args, {}, pos).status());
  switch (v.kind()) {
    case Kind::undefined: return Value(0);
    case Kind::string: return Value(static_cast<int64_t>(text::length(v.str())));
    case Kind::list:
      if (v.is_generator()) break;
      return Value(static_cast<int64_t>(v.items().size()));
    case Kind::dict:
      if (v.is_namespace()) break;
      return Value(static_cast<int64_t>(v.dict_data().entries.size()));
    default: break;
  }
  return in.error(pos, "TypeError: object of type '" + std::string(v.type_name()) + "' has no len()");
}

// The filters that take a string and one transformation.
template <std::string (*F)(std::string_view)>
Result<Value> f_text(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, "filter", args, {}, pos).status());
  return Value(F(to_str(v)));
}

Result<Value> f_safe(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, "safe", args, {}, pos).status());
  return Value::markup(to_str(v));
}

Result<Value> f_escape(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, "escape", args, {}, pos).status());
  return v.is_markup() ? v : Value::markup(html_escape(to_str(v)));
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

Result<Value> f_trim(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "trim", args, {{"chars", Value::none()}}, pos);
  if (!a.ok()) return a.status();
  const std::string s = to_str(v);
  if ((*a)[0].is_none()) return Value(text::strip(s, nullptr, true, true));
  auto chars = str_arg(in, "trim", (*a)[0], pos);
  if (!chars.ok()) return chars.status();
  const std::string_view c = *chars;
  return Value(text::strip(s, &c, true, true));
}

Result<Value> f_replace(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "replace", args, {{"old", Value()}, {"new", Value()}, {"count", Value::none()}}, pos);
  if (!a.ok()) return a.status();
  auto from = str_arg(in, "replace", (*a)[0], pos);
  auto to = str_arg(in, "replace", (*a)[1], pos);
  if (!from.ok()) return from.status();
  if (!to.ok()) return to.status();
  int64_t count = -1;
  if (!(*a)[2].is_none()) {
    auto c = int_arg(in, "replace", (*a)[2], pos);
    if (!c.ok()) return c.status();
    count = *c;
  }
  std::string out = text::replace(to_str(v), *from, *to, count);
  LLMSVC_RETURN_IF_ERROR(in.check_string(out.size(), pos));
  return Value(std::move(out));
}

Result<Value> f_default(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "default", args, {{"default_value", Value("")}, {"boolean", Value(false)}}, pos);
  if (!a.ok()) return a.status();
  if (v.is_undefined() || ((*a)[1].truthy() && !v.truthy())) return (*a)[0];
  return v;
}

Result<Value> f_string(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, "string", args, {}, pos).status());
  return v.is_string() ? v : Value(to_str(v));
}

Result<Value> f_list(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, "list", args, {}, pos).status());
  auto items = iterate(in, v, pos);
  if (!items.ok()) return items.status();
  return Value::list(std::move(items).value());
}

Result<Value> f_first_last(Interpreter& in, const Value& v, const CallArgs& args, Pos pos, bool last) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, last ? "last" : "first", args, {}, pos).status());
  if (last && v.is_generator()) return in.error(pos, "TypeError: 'generator' object is not reversible");
  auto items = iterate(in, v, pos);
  if (!items.ok()) return items.status();
  if (items->empty()) return Value::undefined(std::string("No ") + (last ? "last" : "first") + " item, sequence was empty.");
  return last ? items->back() : items->front();
}
Result<Value> f_first(Interpreter& in, const Value& v, const CallArgs& a, Pos p) { return f_first_last(in, v, a, p, false); }
Result<Value> f_last(Interpreter& in, const Value& v, const CallArgs& a, Pos p) { return f_first_last(in, v, a, p, true); }

Result<Value> f_join(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "join", args, {{"d", Value("")}, {"attribute", Value::none()}}, pos);
  if (!a.ok()) return a.status();
  auto items = iterate(in, v, pos);
  if (!items.ok()) return items.status();
  const std::string sep = to_str((*a)[0]);
  std::string out;
  for (size_t i = 0; i < items->size(); ++i) {
    if (i) out += sep;
    if (!(*a)[1].is_none()) {
      auto x = attr_path(in, (*items)[i], to_str((*a)[1]), pos);
      if (!x.ok()) return x;
      append_str(out, *x);
    } else {
      append_str(out, (*items)[i]);
    }
    LLMSVC_RETURN_IF_ERROR(in.check_string(out.size(), pos));
  }
  return Value(std::move(out));
}

Result<Value> f_items(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, "items", args, {}, pos).status());
  if (v.is_undefined()) return generator({});
  if (!v.is_mapping()) return in.error(pos, "TypeError: Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict_data().entries) out.push_back(Value::list({Value(k), val}, ListKind::tuple));
  return generator(std::move(out));
}

Result<Value> f_tojson(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  // Hugging Face's signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  auto a = bind_args(in, "tojson", args,
                     {{"ensure_ascii", Value(false)}, {"indent", Value::none()}, {"separators", Value::none()},
                      {"sort_keys", Value(false)}},
                     pos);
  if (!a.ok()) return a.status();
  JsonStyle style;
  style.ensure_ascii = (*a)[0].truthy();
  const Value& indent = (*a)[1];
  if (indent.is_string()) {
    style.indent = indent.str();
  } else if (!indent.is_none()) {
    auto n = int_arg(in, "tojson", indent, pos);
    if (!n.ok()) return n.status();
    style.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(*n, 0, 64)), ' ');
  }
  if (style.indent) style.item_separator = ",";
  const Value& seps = (*a)[2];
  if (!seps.is_none()) {
    if (!seps.is_list() || seps.items().size() != 2 || !seps.items()[0].is_string() || !seps.items()[1].is_string()) {
      return in.error(pos, "tojson: separators must be a pair of strings");
    }
    style.item_separator = seps.items()[0].str();
    style.key_separator = seps.items()[1].str();
  }
  style.sort_keys = (*a)[3].truthy();
  auto out = to_json(v, style);
  if (!out.ok()) {
    if (v.is_undefined()) return in.undefined_error(pos, v);
    return in.error(pos, out.status().message());
  }
  LLMSVC_RETURN_IF_ERROR(in.check_string(out->size(), pos));
  return Value(std::move(out).value());
}

Result<Value> f_indent(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "indent", args, {{"width", Value(4)}, {"first", Value(false)}, {"blank", Value(false)}}, pos);
  if (!a.ok()) return a.status();
  std::string pad;
  if ((*a)[0].is_string()) {
    pad = (*a)[0].str();
  } else {
    auto w = int_arg(in, "indent", (*a)[0], pos);
    if (!w.ok()) return w.status();
    pad.assign(static_cast<size_t>(std::clamp<int64_t>(*w, 0, 1024)), ' ');
  }
  // jinja2 appends a newline before splitting, so a trailing newline is not a line.
  const std::string s = to_str(v) + "\n";
  const auto lines = text::splitlines(s);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) {
      out += '\n';
      if ((*a)[2].truthy() || !lines[i].empty()) out += pad;
    }
    out += lines[i];
    LLMSVC_RETURN_IF_ERROR(in.check_string(out.size(), pos));
  }
  if ((*a)[1].truthy()) out = pad + out;
  return Value(std::move(out));
}

Result<Value> f_int(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "int", args, {{"default", Value(0)}, {"base", Value(10)}}, pos);
  if (!a.ok()) return a.status();
  if (v.is_undefined()) return in.undefined_error(pos, v);
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    const double d = v.as_double();
    if (std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(static_cast<int64_t>(d));
    return (*a)[0];
  }
  if (v.is_string()) {
    std::string s(text::strip(v.str(), nullptr, true, true));
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    auto base = int_arg(in, "int", (*a)[1], pos);
    if (!base.ok()) return base.status();
    if (*base < 2 || *base > 36) return (*a)[0];
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(s.c_str(), &end, static_cast<int>(*base));
    if (!s.empty() && end && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(n));
    end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value(static_cast<int64_t>(d));
    }
  }
  return (*a)[0];
}

Result<Value> f_float(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "float", args, {{"default", Value(0.0)}}, pos);
  if (!a.ok()) return a.status();
  if (v.is_undefined()) return in.undefined_error(pos, v);
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    const std::string s(text::strip(v.str(), nullptr, true, true));
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value(d);
  }
  return (*a)[0];
}

Result<Value> f_abs(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, "abs", args, {}, pos).status());
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) return in.error(pos, "integer overflow (beyond 64 bits)");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (v.is_undefined()) return in.undefined_error(pos, v);
  return in.error(pos, "TypeError: bad operand type for abs(): '" + std::string(v.type_name()) + "'");
}

Result<Value> f_round(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "round", args, {{"precision", Value(0)}, {"method", Value("common")}}, pos);
  if (!a.ok()) return a.status();
  auto prec = int_arg(in, "round", (*a)[0], pos);
  if (!prec.ok()) return prec.status();
  const std::string method = to_str((*a)[1]);
  if (method != "common" && method != "ceil" && method != "floor") {
    return in.error(pos, "FilterArgumentError: method must be common, ceil or floor");
  }
  if (v.is_undefined()) return in.undefined_error(pos, v);
  if (!v.is_number()) return in.error(pos, "TypeError: type " + std::string(v.type_name()) + " doesn't define __round__");
  if (method == "common" && !v.is_float()) return Value(v.as_int());  // round(int, n) stays an int
  const double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(*prec, -300, 300)));
  const double x = v.as_double() * scale;
  const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value(r / scale);
}

// A predicate over items for select / reject (a test name) and selectattr / rejectattr.
Result<std::vector<Value>> select_items(Interpreter& in, const Value& v, const CallArgs& args, Pos pos, bool by_attr,
                                        bool keep) {
  if (!v.truthy()) return std::vector<Value>{};  // jinja2 yields nothing for a false value (None included)
  auto items = iterate(in, v, pos);
  if (!items.ok()) return items.status();
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty()) return in.error(pos, "TypeError: selectattr / rejectattr need an attribute");
    attr = to_str(args.positional[next++]);
  }
  std::string test;
  if (next < args.positional.size()) test = to_str(args.positional[next++]);
  if (!test.empty() && !is_test_name(test)) return in.error(pos, "no test named '" + test + "'", Code::unsupported);
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
  test_args.named = args.named;
  std::vector<Value> out;
  for (const Value& item : *items) {
    Value probe = item;
    if (by_attr) {
      auto x = attr_path(in, item, attr, pos);
      if (!x.ok()) return x.status();
      probe = std::move(x).value();
    }
    bool pass = probe.truthy();
    if (!test.empty()) {
      auto r = apply_test(in, test, probe, test_args, pos);
      if (!r.ok()) return r.status();
      pass = *r;
    }
    if (pass == keep) out.push_back(item);
  }
  return out;
}

template <bool ByAttr, bool Keep>
Result<Value> f_select(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto out = select_items(in, v, args, pos, ByAttr, Keep);
  if (!out.ok()) return out.status();
  return generator(std::move(out).value());
}

Result<Value> f_map(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  if (!v.truthy()) return generator({});  // as select: nothing for a false value
  auto items = iterate(in, v, pos);
  if (!items.ok()) return items.status();
  std::vector<Value> out;
  out.reserve(items->size());
  if (args.positional.empty()) {
    // map(attribute='x', default=...)
    auto a = bind_args(in, "map", args, {{"attribute", Value()}, {"default", Value::undefined("no default")}}, pos);
    if (!a.ok()) return a.status();
    const std::string attr = to_str((*a)[0]);
    for (const Value& item : *items) {
      auto x = attr_path(in, item, attr, pos);
      if (!x.ok()) return x;
      out.push_back(x->is_undefined() && !(*a)[1].is_undefined() ? (*a)[1] : std::move(x).value());
    }
    return generator(std::move(out));
  }
  const std::string filter = to_str(args.positional[0]);
  if (!is_filter_name(filter)) return in.error(pos, "no filter named '" + filter + "'", Code::unsupported);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.named = args.named;
  for (const Value& item : *items) {
    auto x = apply_filter(in, filter, item, rest, pos);
    if (!x.ok()) return x;
    out.push_back(std::move(x).value());
  }
  return generator(std::move(out));
}

// The key an item sorts / dedups by: its attribute, lowercased unless case-sensitive.
Result<Value> sort_key(Interpreter& in, const Value& item, const Value& attribute, bool case_sensitive, Pos pos) {
  Value key = item;
  if (!attribute.is_none()) {
    auto x = attr_path(in, item, to_str(attribute), pos);
    if (!x.ok()) return x;
    key = std::move(x).value();
  }
  if (!case_sensitive && key.is_string()) key = Value(text::lower(key.str()));
  return key;
}

Result<Value> f_unique(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "unique", args, {{"case_sensitive", Value(false)}, {"attribute", Value::none()}}, pos);
  if (!a.ok()) return a.status();
  auto items = iterate(in, v, pos);
  if (!items.ok()) return items.status();
  std::vector<Value> out, seen;
  for (const Value& item : *items) {
    auto key = sort_key(in, item, (*a)[1], (*a)[0].truthy(), pos);
    if (!key.ok()) return key;
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, *key); })) continue;
    LLMSVC_RETURN_IF_ERROR(in.charge(seen.size(), pos));
    seen.push_back(std::move(key).value());
    out.push_back(item);
  }
  return generator(std::move(out));
}

Result<Value> f_sort(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "sort", args,
                     {{"reverse", Value(false)}, {"case_sensitive", Value(false)}, {"attribute", Value::none()}}, pos);
  if (!a.ok()) return a.status();
  auto items = iterate(in, v, pos);
  if (!items.ok()) return items.status();
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : *items) {
    auto key = sort_key(in, item, (*a)[2], (*a)[1].truthy(), pos);
    if (!key.ok()) return key;
    keyed.emplace_back(std::move(key).value(), item);
  }
  // A stable insertion sort that can report a comparison error (mixed types).
  LLMSVC_RETURN_IF_ERROR(in.charge(keyed.size() * keyed.size(), pos));
  const bool reverse = (*a)[0].truthy();
  for (size_t i = 1; i < keyed.size(); ++i) {
    for (size_t j = i; j > 0; --j) {
      auto lt = reverse ? less_than(in, keyed[j - 1].first, keyed[j].first, pos)
                        : less_than(in, keyed[j].first, keyed[j - 1].first, pos);
      if (!lt.ok()) return lt.status();
      if (!*lt) break;
      std::swap(keyed[j], keyed[j - 1]);
    }
  }
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

Result<Value> f_dictsort(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "dictsort", args,
                     {{"case_sensitive", Value(false)}, {"by", Value("key")}, {"reverse", Value(false)}}, pos);
  if (!a.ok()) return a.status();
  auto pairs = f_items(in, v, {}, pos);
  if (!pairs.ok()) return pairs;
  CallArgs sort_args;
  sort_args.named = {{"reverse", (*a)[2]}, {"case_sensitive", (*a)[0]},
                     {"attribute", Value(to_str((*a)[1]) == "value" ? "1" : "0")}};
  return f_sort(in, *pairs, sort_args, pos);
}

Result<Value> f_reverse(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, "reverse", args, {}, pos).status());
  if (v.is_string()) {
    auto cps = text::code_points(v.str());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) text::append_utf8(out, *it);
    return Value(std::move(out));
  }
  auto items = iterate(in, v, pos);
  if (!items.ok()) return items.status();
  std::reverse(items->begin(), items->end());
  return v.is_generator() ? Value::list(std::move(items).value()) : generator(std::move(items).value());
}

Result<Value> f_sum(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "sum", args, {{"attribute", Value::none()}, {"start", Value(0)}}, pos);
  if (!a.ok()) return a.status();
  auto items = iterate(in, v, pos);
  if (!items.ok()) return items.status();
  Value total = (*a)[1];
  for (const Value& item : *items) {
    auto x = sort_key(in, item, (*a)[0], true, pos);
    if (!x.ok()) return x;
    auto s = binary_op(in, Op::add, total, *x, pos);
    if (!s.ok()) return s;
    total = std::move(s).value();
  }
  return total;
}

Result<Value> f_attr(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "attr", args, {{"name", Value()}}, pos);
  if (!a.ok()) return a.status();
  return get_attr(in, v, to_str((*a)[0]), pos);
}

Result<Value> f_wordcount(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  LLMSVC_RETURN_IF_ERROR(bind_args(in, "wordcount", args, {}, pos).status());
  int64_t n = 0;
  bool in_word = false;
  for (char c : to_str(v)) {  // \w+ runs: letters, digits, underscore (non-ASCII counts as a letter)
    const bool w = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                   static_cast<unsigned char>(c) >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Result<Value> f_center(Interpreter& in, const Value& v, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, "center", args, {{"width", Value(80)}}, pos);
  if (!a.ok()) return a.status();
  auto w = int_arg(in, "center", (*a)[0], pos);
  if (!w.ok()) return w.status();
  const std::string s = to_str(v);
  const int64_t len = static_cast<int64_t>(text::length(s));
  const int64_t width = std::min<int64_t>(*w, 1 << 16);
  if (width <= len) return Value(s);
  // Python's str.center: the odd space goes right unless the padding and width are both odd.
  const int64_t pad = width - len;
  const int64_t left = pad / 2 + (pad & width & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '));
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"capitalize", f_text<text::capitalize>},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_escape},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_text<text::lower>},
    {"map", f_map},
    {"reject", f_select<false, false>},
    {"rejectattr", f_select<true, false>},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select<false, true>},
    {"selectattr", f_select<true, true>},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_text<text::jinja_title>},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_text<text::upper>},
    {"wordcount", f_wordcount},
};

// jinja2 filters not implemented here: a template using one fails to compile, saying so.
constexpr std::string_view kUnsupported[] = {"batch", "filesizeformat", "format", "groupby", "max", "min", "pprint",
                                             "random", "slice", "striptags", "truncate", "urlencode", "urlize",
                                             "wordwrap", "xmlattr"};

const FilterEntry* find_filter(std::string_view name) {
  for (const FilterEntry& f : kFilters) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

bool is_filter_name(std::string_view name) { return find_filter(name) != nullptr; }

bool is_jinja2_filter(std::string_view name) {
  return is_filter_name(name) || std::find(std::begin(kUnsupported), std::end(kUnsupported), name) != std::end(kUnsupported);
}

Result<Value> apply_filter(Interpreter& in, std::string_view name, const Value& target, const CallArgs& args, Pos pos) {
  const FilterEntry* f = find_filter(name);
  if (!f) return in.error(pos, "no filter named '" + std::string(name) + "'", Code::unsupported);
  return f->fn(in, target, args, pos);
}

}  // namespace llmsvc::jinja
