// SPDX-License-Identifier: Apache-2.0
// jinja2's tests (`x is defined`, `x is divisibleby 3`...), with Python's type model: bool is
// a number but not an integer; undefined is iterable (as empty) and a sequence.
#include "runtime/core/chat/jinja/builtins.h"
#include "runtime/core/chat/jinja/operators.h"

namespace llmsvc::jinja {
namespace {

constexpr std::string_view kTests[] = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number", "string",
    "mapping", "iterable", "sequence", "callable", "sameas", "escaped", "in", "odd", "even", "divisibleby",
    "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge",
    ">=", "lower", "upper", "filter", "test"};

// The one argument a comparison-style test takes.
Result<Value> one_arg(Interpreter& in, std::string_view name, const CallArgs& args, Pos pos) {
  auto a = bind_args(in, name, args, {{"other", Value()}}, pos);
  if (!a.ok()) return a.status();
  return (*a)[0];
}

// value % divisor == 0 for ints and floats (Python's modulo).
Result<bool> divisible(Interpreter& in, const Value& v, const Value& divisor, bool odd_check, Pos pos) {
  auto m = binary_op(in, Op::mod, v, divisor, pos);
  if (!m.ok()) return m.status();
  return equals(*m, Value(odd_check ? 1 : 0));
}

bool has_cased(std::string_view s, bool upper) {
  bool cased = false;
  for (char c : s) {
    if (c >= 'a' && c <= 'z') {
      if (upper) return false;
      cased = true;
    } else if (c >= 'A' && c <= 'Z') {
      if (!upper) return false;
      cased = true;
    }
  }
  return cased;
}

}  // namespace

bool is_test_name(std::string_view name) {
  for (std::string_view t : kTests) {
    if (t == name) return true;
  }
  return false;
}

Result<bool> apply_test(Interpreter& in, std::string_view name, const Value& v, const CallArgs& args, Pos pos) {
  const bool no_args = args.positional.empty() && args.named.empty();
  auto takes_none = [&]() -> Status {
    if (no_args) return Status::Ok();
    return in.error(pos, "TypeError: test '" + std::string(name) + "' takes no arguments");
  };
  if (name == "defined" || name == "undefined") {
    LLMSVC_RETURN_IF_ERROR(takes_none());
    return v.is_undefined() == (name == "undefined");
  }
  if (name == "none") { LLMSVC_RETURN_IF_ERROR(takes_none()); return v.is_none(); }
  if (name == "boolean") { LLMSVC_RETURN_IF_ERROR(takes_none()); return v.is_bool(); }
  if (name == "false") { LLMSVC_RETURN_IF_ERROR(takes_none()); return v.is_bool() && !v.as_bool(); }
  if (name == "true") { LLMSVC_RETURN_IF_ERROR(takes_none()); return v.is_bool() && v.as_bool(); }
  if (name == "integer") { LLMSVC_RETURN_IF_ERROR(takes_none()); return v.is_int(); }
  if (name == "float") { LLMSVC_RETURN_IF_ERROR(takes_none()); return v.is_float(); }
  if (name == "number") { LLMSVC_RETURN_IF_ERROR(takes_none()); return v.is_number(); }
  if (name == "string") { LLMSVC_RETURN_IF_ERROR(takes_none()); return v.is_string(); }
  if (name == "mapping") { LLMSVC_RETURN_IF_ERROR(takes_none()); return v.is_mapping(); }
  if (name == "callable") { LLMSVC_RETURN_IF_ERROR(takes_none()); return v.is_callable(); }
  if (name == "escaped") { LLMSVC_RETURN_IF_ERROR(takes_none()); return false; }
  if (name == "iterable") {
    LLMSVC_RETURN_IF_ERROR(takes_none());
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_mapping();
  }
  if (name == "sequence") {
    LLMSVC_RETURN_IF_ERROR(takes_none());
    return v.is_undefined() || v.is_string() || (v.is_list() && !v.is_generator()) || v.is_mapping();
  }
  if (name == "lower" || name == "upper") {
    LLMSVC_RETURN_IF_ERROR(takes_none());
    if (!v.is_string()) return in.error(pos, "AttributeError: '" + std::string(v.type_name()) + "' has no attribute '" +
                                                 (name == "lower" ? "islower'" : "isupper'"));
    return has_cased(v.str(), name == "upper");
  }
  if (name == "odd" || name == "even") {
    LLMSVC_RETURN_IF_ERROR(takes_none());
    return divisible(in, v, Value(2), name == "odd", pos);
  }
  if (name == "divisibleby") {
    auto d = one_arg(in, name, args, pos);
    if (!d.ok()) return d.status();
    return divisible(in, v, *d, false, pos);
  }
  if (name == "filter" || name == "test") {
    LLMSVC_RETURN_IF_ERROR(takes_none());
    return v.is_string() && (name == "filter" ? is_filter_name(v.str()) : is_test_name(v.str()));
  }
  auto other = one_arg(in, name, args, pos);
  if (!other.ok()) return other.status();
  const Value& o = *other;
  if (name == "sameas") {
    if (v.kind() != o.kind()) return false;
    if (v.is_list() || v.is_dict() || v.is_callable() || v.is_string()) return v.identity() == o.identity();
    return equals(v, o);
  }
  if (name == "in") return contains(in, o, v, pos);
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, o);
  if (name == "ne" || name == "!=") return !equals(v, o);
  if (name == "lt" || name == "lessthan" || name == "<") return compare_op(in, Op::lt, v, o, pos);
  if (name == "le" || name == "<=") return compare_op(in, Op::le, v, o, pos);
  if (name == "gt" || name == "greaterthan" || name == ">") return compare_op(in, Op::gt, v, o, pos);
  if (name == "ge" || name == ">=") return compare_op(in, Op::ge, v, o, pos);
  return in.error(pos, "no test named '" + std::string(name) + "'", Code::unsupported);
}

}  // namespace llmsvc::jinja
