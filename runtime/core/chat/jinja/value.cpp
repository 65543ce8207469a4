// SPDX-License-Identifier: Apache-2.0
// Value construction, truthiness and equality with Python's semantics.
#include "runtime/core/chat/jinja/value.h"

#include <algorithm>

#include "runtime/core/chat/jinja/callable.h"

namespace llmsvc::jinja {

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void DictData::set(std::string_view key, Value v) {
  for (auto& [k, old] : entries) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  entries.emplace_back(std::string(key), std::move(v));
}

Value::Value(std::string s) : kind_(Kind::string), ptr_(std::make_shared<std::string>(std::move(s))) {}

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.ptr_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::list(std::vector<Value> items, ListKind kind) {
  uint32_t depth = 0;
  for (const Value& item : items) depth = std::max(depth, item.depth());
  Value v;
  v.kind_ = Kind::list;
  v.ptr_ = std::make_shared<ListData>(ListData{std::move(items), kind, depth + 1});
  return v;
}

Value Value::dict(std::vector<std::pair<std::string, Value>> entries) {
  uint32_t depth = 0;
  for (const auto& entry : entries) depth = std::max(depth, entry.second.depth());
  Value v;
  v.kind_ = Kind::dict;
  v.ptr_ = std::make_shared<DictData>(DictData{std::move(entries), false, depth + 1});
  return v;
}

Value Value::make_namespace() {
  Value v;
  v.kind_ = Kind::dict;
  v.ptr_ = std::make_shared<DictData>(DictData{{}, true, 1});
  return v;
}

uint32_t Value::depth() const {
  if (kind_ == Kind::list) return list_data().depth;
  if (kind_ == Kind::dict) return dict_data().depth;
  return 0;
}

Value Value::callable(std::shared_ptr<const Callable> c) {
  Value v;
  v.kind_ = Kind::callable;
  v.ptr_ = std::const_pointer_cast<Callable>(std::move(c));
  return v;
}

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  return kind_ == Kind::undefined && ptr_ ? str() : kEmpty;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean:
    case Kind::integer: return int_ != 0;
    case Kind::floating: return float_ != 0.0;
    case Kind::string: return !str().empty();
    // A generator object is always true in Python, however many items it would yield.
    case Kind::list: return list_kind() == ListKind::generator || !items().empty();
    case Kind::dict: return dict_data().is_namespace || !dict_data().entries.empty();
    case Kind::callable: return true;
  }
  return false;
}

std::string_view Value::type_name() const {
  switch (kind_) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::list:
      switch (list_kind()) {
        case ListKind::list: return "list";
        case ListKind::tuple: return "tuple";
        case ListKind::generator: return "generator";
      }
      return "list";
    case Kind::dict: return dict_data().is_namespace ? "Namespace" : "dict";
    case Kind::callable: return "function";
  }
  return "object";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::undefined:
    case Kind::none: return true;
    case Kind::string: return a.str() == b.str();
    case Kind::list: {
      // Generators compare by identity; a list never equals a tuple.
      if (a.is_generator() || b.is_generator()) return &a.items() == &b.items();
      if ((a.list_kind() == ListKind::tuple) != (b.list_kind() == ListKind::tuple)) return false;
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Kind::dict: {
      if (a.is_namespace() || b.is_namespace()) return &a.dict_data() == &b.dict_data();
      const auto& x = a.dict_data().entries;
      if (x.size() != b.dict_data().entries.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* o = b.dict_data().find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    case Kind::callable: return &a.callable_ref() == &b.callable_ref();
    default: return false;
  }
}

}  // namespace llmsvc::jinja
