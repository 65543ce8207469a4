// SPDX-License-Identifier: Apache-2.0
// Python str() / repr() of Values (see format.h).
#include "runtime/core/chat/jinja/format.h"

#include "runtime/core/chat/jinja/callable.h"
#include "runtime/core/chat/jinja/text.h"

namespace llmsvc::jinja {
namespace {

// Beyond this depth a container prints as "...", as Python does for a recursive one (a
// namespace that holds itself is the only way to build a cycle).
constexpr int kMaxReprDepth = 200;

void append_repr(std::string& out, const Value& v, int depth);

void append_items(std::string& out, const Value& v, int depth) {
  const auto& items = v.items();
  const bool tuple = v.list_kind() == ListKind::tuple;
  out += tuple ? '(' : '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, items[i], depth + 1);
  }
  if (tuple && items.size() == 1) out += ',';
  out += tuple ? ')' : ']';
}

void append_entries(std::string& out, const DictData& d, int depth) {
  out += '{';
  bool first = true;
  for (const auto& [k, val] : d.entries) {
    if (!first) out += ", ";
    first = false;
    out += text::repr(k);
    out += ": ";
    append_repr(out, val, depth + 1);
  }
  out += '}';
}

void append_repr(std::string& out, const Value& v, int depth) {
  if (depth > kMaxReprDepth) {
    out += "...";
    return;
  }
  switch (v.kind()) {
    case Kind::undefined: out += "Undefined"; return;
    case Kind::string: out += text::repr(v.str()); return;
    case Kind::list:
      if (v.is_generator()) {
        out += "<generator object>";
      } else {
        append_items(out, v, depth);
      }
      return;
    case Kind::dict:
      if (v.is_namespace()) {
        out += "<Namespace ";
        append_entries(out, v.dict_data(), depth);
        out += '>';
      } else {
        append_entries(out, v.dict_data(), depth);
      }
      return;
    default: append_str(out, v); return;
  }
}

}  // namespace

void append_str(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Kind::undefined: return;
    case Kind::none: out += "None"; return;
    case Kind::boolean: out += v.as_bool() ? "True" : "False"; return;
    case Kind::integer: out += std::to_string(v.as_int()); return;
    case Kind::floating: out += text::format_float(v.as_double()); return;
    case Kind::string: out += v.str(); return;
    case Kind::callable:
      out += v.callable_ref().kind == CallableKind::macro ? "<Macro '" + v.callable_ref().name + "'>"
                                                           : "<function " + v.callable_ref().name + ">";
      return;
    default: append_repr(out, v, 0); return;
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(out, v);
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  append_repr(out, v, 0);
  return out;
}

}  // namespace llmsvc::jinja
