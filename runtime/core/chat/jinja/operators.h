// SPDX-License-Identifier: Apache-2.0
// Python's operators and element access on Values, as jinja2 applies them: arithmetic,
// comparisons, `in`, attribute / item lookup (a missing key is undefined, only an undefined
// object is an error), slices and iteration.
#pragma once

#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/core/chat/jinja/ast.h"
#include "runtime/core/chat/jinja/eval.h"
#include "runtime/core/chat/jinja/value.h"

namespace llmsvc::jinja {

Result<Value> binary_op(Interpreter& in, Op op, const Value& a, const Value& b, Pos pos);
Result<Value> unary_op(Interpreter& in, Op op, const Value& a, Pos pos);
// ==, !=, <, <=, >, >=, in, not in.
Result<bool> compare_op(Interpreter& in, Op op, const Value& a, const Value& b, Pos pos);
// a < b as Python orders them (numbers, strings, lists); a TypeError otherwise.
Result<bool> less_than(Interpreter& in, const Value& a, const Value& b, Pos pos);
Result<bool> contains(Interpreter& in, const Value& container, const Value& item, Pos pos);

Result<Value> get_attr(Interpreter& in, const Value& obj, std::string_view name, Pos pos);
Result<Value> get_item(Interpreter& in, const Value& obj, const Value& key, Pos pos);
// obj[start:stop:step]; undefined parts are absent.
Result<Value> get_slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop,
                        const Value& step, Pos pos);
// The items a for loop visits: list items, dict keys, a string's characters; undefined
// iterates as empty; anything else is not iterable.
Result<std::vector<Value>> iterate(Interpreter& in, const Value& v, Pos pos);

}  // namespace llmsvc::jinja
