// SPDX-License-Identifier: Apache-2.0
// The names a template can call besides its macros: filters (filters.cpp), tests
// (tests.cpp), methods of str / dict / list (methods.cpp) and globals (globals.cpp), with
// jinja2's argument binding (positional, then by keyword, defaults).
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/core/chat/jinja/callable.h"
#include "runtime/core/chat/jinja/eval.h"

namespace llmsvc::jinja {

Result<Value> apply_filter(Interpreter& in, std::string_view name, const Value& target, const CallArgs& args, Pos pos);
Result<bool> apply_test(Interpreter& in, std::string_view name, const Value& v, const CallArgs& args, Pos pos);

// Filters and tests this interpreter implements (checked when a template compiles), and
// whether a missing filter is one of jinja2's (unsupported here) or unknown to jinja2 too.
bool is_filter_name(std::string_view name);
bool is_jinja2_filter(std::string_view name);
bool is_test_name(std::string_view name);

bool has_method(const Value& self, std::string_view name);
Result<Value> call_method(Interpreter& in, const Value& self, std::string_view name, const CallArgs& args, Pos pos);

// A global function by name (range, namespace, dict, raise_exception, strftime_now), or
// undefined.
Value find_global(std::string_view name);
Result<Value> call_global(Interpreter& in, std::string_view name, const CallArgs& args, Pos pos);

// HTML escaping as markupsafe does it (& < > " ').
std::string html_escape(std::string_view s);

struct ParamSpec {
  std::string_view name;
  Value default_value;  // undefined without a hint: required (Value::undefined("...") is optional)
};
// Binds args to params as Python does; extra, duplicate, unknown or missing arguments are
// errors naming `fn`.
Result<std::vector<Value>> bind_args(Interpreter& in, std::string_view fn, const CallArgs& args,
                                     std::initializer_list<ParamSpec> params, Pos pos);

// Checks that v is an int (bool counts, as in Python) and returns it.
Result<int64_t> int_arg(Interpreter& in, std::string_view fn, const Value& v, Pos pos);
// Checks that v is a str.
Result<std::string_view> str_arg(Interpreter& in, std::string_view fn, const Value& v, Pos pos);

}  // namespace llmsvc::jinja
