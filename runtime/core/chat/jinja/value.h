// SPDX-License-Identifier: Apache-2.0
// Value: what a Jinja expression evaluates to, with Python's data model as jinja2 sees it:
// undefined, None, bool, int, float, str, list (also tuples and the lazy sequences that
// jinja2's map/select filters return), dict (insertion-ordered), namespace and callables.
// Strings, lists and dicts are shared and immutable once built (the sandbox HF renders in
// forbids mutation); only a namespace changes, through `{% set ns.attr = ... %}`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmsvc::jinja {

class Value;
struct Callable;

enum class Kind : uint8_t { undefined, none, boolean, integer, floating, string, list, dict, callable };

// What a list value stands for in Python: it decides how it prints and what it supports.
enum class ListKind : uint8_t { list, tuple, generator };

struct ListData {
  std::vector<Value> items;
  ListKind kind = ListKind::list;
  uint32_t depth = 1;  // nesting depth of lists and dicts, bounded by the interpreter
};

// An insertion-ordered str -> Value map (Python dict), or a jinja2 Namespace.
struct DictData {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_namespace = false;
  uint32_t depth = 1;  // as ListData::depth; a namespace counts as 1 (it is opaque)

  const Value* find(std::string_view key) const;
  // Sets key (appending when new), as Python's d[key] = v.
  void set(std::string_view key, Value v);
};

class Value {
 public:
  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::boolean), int_(b) {}                   // NOLINT(google-explicit-constructor)
  Value(int v) : kind_(Kind::integer), int_(v) {}                    // NOLINT(google-explicit-constructor)
  Value(int64_t v) : kind_(Kind::integer), int_(v) {}                // NOLINT(google-explicit-constructor)
  Value(double v) : kind_(Kind::floating) { float_ = v; }              // NOLINT(google-explicit-constructor)
  Value(std::string s);                                              // NOLINT(google-explicit-constructor)
  Value(std::string_view s) : Value(std::string(s)) {}               // NOLINT(google-explicit-constructor)
  Value(const char* s) : Value(std::string(s)) {}                    // NOLINT(google-explicit-constructor)

  static Value none();
  // A str marked safe (jinja2's Markup, from |safe): `+` HTML-escapes a plain str joined to it.
  static Value markup(std::string s);
  // An undefined value that remembers what was looked up, for jinja2's "'x' is undefined".
  static Value undefined(std::string hint);
  static Value list(std::vector<Value> items, ListKind kind = ListKind::list);
  static Value dict(std::vector<std::pair<std::string, Value>> entries = {});
  static Value make_namespace();
  static Value callable(std::shared_ptr<const Callable> c);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_int() const { return kind_ == Kind::integer; }
  bool is_float() const { return kind_ == Kind::floating; }
  // int, float or bool: Python's numbers.Number (bool is an int there).
  bool is_number() const { return kind_ == Kind::integer || kind_ == Kind::floating || kind_ == Kind::boolean; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_markup() const { return kind_ == Kind::string && markup_; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_dict() const { return kind_ == Kind::dict; }
  bool is_namespace() const { return kind_ == Kind::dict && dict_data().is_namespace; }
  bool is_mapping() const { return kind_ == Kind::dict && !dict_data().is_namespace; }
  bool is_callable() const { return kind_ == Kind::callable; }
  bool is_generator() const { return kind_ == Kind::list && list_data().kind == ListKind::generator; }

  bool as_bool() const { return int_ != 0; }
  // int value of an int or bool.
  int64_t as_int() const { return int_; }
  // float value of any number.
  double as_double() const { return kind_ == Kind::floating ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  const std::vector<Value>& items() const { return list_data().items; }
  ListKind list_kind() const { return list_data().kind; }
  const DictData& dict_data() const { return *static_cast<const DictData*>(ptr_.get()); }
  // The namespace's entries, the one mutable container.
  DictData& namespace_data() const { return *static_cast<DictData*>(ptr_.get()); }
  const Callable& callable_ref() const { return *static_cast<const Callable*>(ptr_.get()); }
  // What an undefined value was looked up as (empty when unknown).
  const std::string& undefined_hint() const;

  // The shared payload's address: Python's `is` for strings and containers.
  const void* identity() const { return ptr_.get(); }
  // Nesting depth of containers (0 for scalars, 1 for a flat list).
  uint32_t depth() const;

  // Python truthiness.
  bool truthy() const;
  // Python's type name ('str', 'list', 'NoneType'...), for error messages.
  std::string_view type_name() const;

 private:
  const ListData& list_data() const { return *static_cast<const ListData*>(ptr_.get()); }

  Kind kind_ = Kind::undefined;
  bool markup_ = false;
  union {
    int64_t int_ = 0;  // int and bool
    double float_;
  };
  // The shared payload, by kind: std::string (also an undefined's hint), ListData, DictData
  // or Callable. One pointer keeps a Value at 32 bytes and its copies cheap.
  std::shared_ptr<void> ptr_;
};

// Python ==: numbers across int/float/bool, containers element-wise, undefined == undefined.
bool equals(const Value& a, const Value& b);

}  // namespace llmsvc::jinja
