// SPDX-License-Identifier: Apache-2.0
// Operators and access (see operators.h). Integers are 64-bit: where Python would grow a
// big integer, this reports an overflow error instead.
#include "runtime/core/chat/jinja/operators.h"

#include <cmath>

#include "runtime/core/chat/jinja/builtins.h"
#include "runtime/core/chat/jinja/format.h"
#include "runtime/core/chat/jinja/text.h"

namespace llmsvc::jinja {
namespace {

const char* op_symbol(Op op) {
  switch (op) {
    case Op::add: return "+";
    case Op::sub: return "-";
    case Op::mul: return "*";
    case Op::div: return "/";
    case Op::floordiv: return "//";
    case Op::mod: return "%";
    case Op::pow: return "** or pow()";
    case Op::concat: return "~";
    case Op::lt: return "<";
    case Op::le: return "<=";
    case Op::gt: return ">";
    case Op::ge: return ">=";
    default: return "?";
  }
}

Status type_error(Interpreter& in, Op op, const Value& a, const Value& b, Pos pos) {
  std::string msg;
  if (op == Op::add && a.is_string()) {
    msg = "can only concatenate str (not \"" + std::string(b.type_name()) + "\") to str";
  } else if (op == Op::add && a.is_list() && a.list_kind() != ListKind::generator) {
    msg = "can only concatenate " + std::string(a.type_name()) + " (not \"" + std::string(b.type_name()) + "\") to " +
          std::string(a.type_name());
  } else if (op == Op::lt || op == Op::le || op == Op::gt || op == Op::ge) {
    msg = std::string("'") + op_symbol(op) + "' not supported between instances of '" + std::string(a.type_name()) +
          "' and '" + std::string(b.type_name()) + "'";
  } else {
    msg = std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + std::string(a.type_name()) +
          "' and '" + std::string(b.type_name()) + "'";
  }
  return in.error(pos, "TypeError: " + msg);
}

Status overflow(Interpreter& in, Pos pos) { return in.error(pos, "integer overflow (beyond 64 bits)"); }

bool is_seq(const Value& v) { return v.is_list() && v.list_kind() != ListKind::generator; }

// seq * n (string or list), n clamped at 0.
Result<Value> repeat(Interpreter& in, const Value& seq, int64_t n, Pos pos) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const size_t unit = seq.str().size();
    if (unit && static_cast<uint64_t>(n) > in.limits().max_output_bytes / unit + 1) {
      return in.error(pos, "string repetition beyond the output limit");
    }
    LLMSVC_RETURN_IF_ERROR(in.check_string(unit * static_cast<size_t>(n), pos));
    std::string out;
    out.reserve(unit * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  const size_t unit = seq.items().size();
  if (unit && static_cast<uint64_t>(n) > in.limits().max_list_items / unit + 1) {
    return in.error(pos, "list repetition beyond the list size limit");
  }
  LLMSVC_RETURN_IF_ERROR(in.check_list(unit * static_cast<size_t>(n), pos));
  std::vector<Value> out;
  out.reserve(unit * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.list_kind());
}

Result<Value> arithmetic(Interpreter& in, Op op, const Value& a, const Value& b, Pos pos) {
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  const int64_t x = a.as_int(), y = b.as_int();
  const double fx = a.as_double(), fy = b.as_double();
  int64_t r = 0;
  switch (op) {
    case Op::add:
      if (!ints) return Value(fx + fy);
      if (__builtin_add_overflow(x, y, &r)) return overflow(in, pos);
      return Value(r);
    case Op::sub:
      if (!ints) return Value(fx - fy);
      if (__builtin_sub_overflow(x, y, &r)) return overflow(in, pos);
      return Value(r);
    case Op::mul:
      if (!ints) return Value(fx * fy);
      if (__builtin_mul_overflow(x, y, &r)) return overflow(in, pos);
      return Value(r);
    case Op::div:
      if (fy == 0) return in.error(pos, "ZeroDivisionError: division by zero");
      return Value(fx / fy);
    case Op::floordiv:
    case Op::mod: {
      if (ints ? y == 0 : fy == 0) {
        return in.error(pos, op == Op::mod ? "ZeroDivisionError: modulo by zero"
                                           : "ZeroDivisionError: integer division or modulo by zero");
      }
      if (ints) {
        if (x == INT64_MIN && y == -1) return op == Op::mod ? Value(int64_t{0}) : Result<Value>(overflow(in, pos));
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors toward negative infinity
          --q;
          m += y;
        }
        return Value(op == Op::mod ? m : q);
      }
      // CPython's float_divmod.
      double m = std::fmod(fx, fy);
      double div = (fx - m) / fy;
      if (m != 0 && ((m < 0) != (fy < 0))) {
        m += fy;
        div -= 1.0;
      }
      double q = std::floor(div);
      if (div - q > 0.5) q += 1.0;
      return Value(op == Op::mod ? m : q);
    }
    case Op::pow: {
      if (ints && y >= 0) {
        int64_t acc = 1, base = x;
        for (int64_t e = y; e > 0; e >>= 1) {
          if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) return overflow(in, pos);
          if (e > 1 && __builtin_mul_overflow(base, base, &base)) return overflow(in, pos);
        }
        return Value(acc);
      }
      if (fx == 0 && fy < 0) return in.error(pos, "ZeroDivisionError: 0.0 cannot be raised to a negative power");
      return Value(std::pow(fx, fy));
    }
    default: return type_error(in, op, a, b, pos);
  }
}

Result<bool> seq_less(Interpreter& in, const std::vector<Value>& x, const std::vector<Value>& y, Pos pos) {
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (equals(x[i], y[i])) continue;
    return less_than(in, x[i], y[i], pos);
  }
  return x.size() < y.size();
}

}  // namespace

Result<Value> binary_op(Interpreter& in, Op op, const Value& a, const Value& b, Pos pos) {
  if (op == Op::concat) {
    std::string out = to_str(a);
    append_str(out, b);
    LLMSVC_RETURN_IF_ERROR(in.check_string(out.size(), pos));
    return Value(std::move(out));
  }
  if (a.is_undefined()) return in.undefined_error(pos, a);
  if (b.is_undefined()) return in.undefined_error(pos, b);
  if (a.is_number() && b.is_number()) return arithmetic(in, op, a, b, pos);
  if (op == Op::add && a.is_string() && b.is_string()) {
    if (a.is_markup() || b.is_markup()) {
      // Markup + str escapes the str (jinja2's |safe strings are markupsafe.Markup).
      std::string out = a.is_markup() ? a.str() : html_escape(a.str());
      out += b.is_markup() ? b.str() : html_escape(b.str());
      LLMSVC_RETURN_IF_ERROR(in.check_string(out.size(), pos));
      return Value::markup(std::move(out));
    }
    LLMSVC_RETURN_IF_ERROR(in.check_string(a.str().size() + b.str().size(), pos));
    std::string out;
    out.reserve(a.str().size() + b.str().size());
    out += a.str();
    out += b.str();
    return Value(std::move(out));
  }
  if (op == Op::add && is_seq(a) && is_seq(b) && a.list_kind() == b.list_kind()) {
    LLMSVC_RETURN_IF_ERROR(in.check_list(a.items().size() + b.items().size(), pos));
    std::vector<Value> out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return Value::list(std::move(out), a.list_kind());
  }
  if (op == Op::mul) {
    if ((a.is_string() || is_seq(a)) && (b.is_int() || b.is_bool())) return repeat(in, a, b.as_int(), pos);
    if ((b.is_string() || is_seq(b)) && (a.is_int() || a.is_bool())) return repeat(in, b, a.as_int(), pos);
  }
  if (op == Op::mod && a.is_string()) {
    return in.error(pos, "unsupported: printf-style string formatting ('...' % value)", Code::unsupported);
  }
  return type_error(in, op, a, b, pos);
}

Result<Value> unary_op(Interpreter& in, Op op, const Value& a, Pos pos) {
  if (a.is_undefined()) return in.undefined_error(pos, a);
  if (!a.is_number()) {
    return in.error(pos, std::string("TypeError: bad operand type for unary ") + (op == Op::neg ? "-" : "+") + ": '" +
                             std::string(a.type_name()) + "'");
  }
  if (op == Op::pos) return a.is_bool() ? Value(a.as_int()) : a;
  if (a.is_float()) return Value(-a.as_double());
  if (a.as_int() == INT64_MIN) return overflow(in, pos);
  return Value(-a.as_int());
}

Result<bool> less_than(Interpreter& in, const Value& a, const Value& b, Pos pos) {
  if (a.is_undefined()) return in.undefined_error(pos, a);
  if (b.is_undefined()) return in.undefined_error(pos, b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order is code point order
  if (is_seq(a) && is_seq(b) && a.list_kind() == b.list_kind()) return seq_less(in, a.items(), b.items(), pos);
  return type_error(in, Op::lt, a, b, pos);
}

Result<bool> compare_op(Interpreter& in, Op op, const Value& a, const Value& b, Pos pos) {
  switch (op) {
    case Op::eq: return equals(a, b);
    case Op::ne: return !equals(a, b);
    case Op::in: return contains(in, b, a, pos);
    case Op::not_in: {
      auto r = contains(in, b, a, pos);
      if (!r.ok()) return r;
      return !*r;
    }
    case Op::lt: return less_than(in, a, b, pos);
    case Op::gt: return less_than(in, b, a, pos);
    case Op::le:
    case Op::ge: {
      const Value& x = op == Op::le ? a : b;
      const Value& y = op == Op::le ? b : a;
      if (equals(x, y) && (x.kind() == y.kind() || (x.is_number() && y.is_number()))) {
        if (x.is_undefined()) return in.undefined_error(pos, x);
        return true;
      }
      auto r = less_than(in, x, y, pos);
      if (!r.ok() && !x.is_undefined() && !y.is_undefined()) return type_error(in, op, a, b, pos);
      return r;
    }
    default: return in.error(pos, "internal: not a comparison", Code::internal);
  }
}

Result<bool> contains(Interpreter& in, const Value& container, const Value& item, Pos pos) {
  switch (container.kind()) {
    case Kind::undefined: return false;  // jinja2's Undefined iterates as empty
    case Kind::string:
      if (!item.is_string()) {
        return in.error(pos, "TypeError: 'in <string>' requires string as left operand, not " +
                                 std::string(item.type_name()));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::list:
      for (const Value& v : container.items()) {
        if (equals(v, item)) return true;
      }
      return false;
    case Kind::dict:
      if (container.is_namespace()) break;
      return item.is_string() && container.dict_data().find(item.str()) != nullptr;
    default: break;
  }
  return in.error(pos, "TypeError: argument of type '" + std::string(container.type_name()) + "' is not iterable");
}

Result<Value> get_attr(Interpreter& in, const Value& obj, std::string_view name, Pos pos) {
  if (obj.is_undefined()) return in.undefined_error(pos, obj);
  // Python attributes first (a dict's `items` is the method even with an 'items' key).
  if (has_method(obj, name)) {
    auto c = std::make_shared<Callable>();
    c->kind = CallableKind::method;
    c->name = std::string(name);
    c->self = obj;
    return Value::callable(std::move(c));
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_data().find(name)) return *v;
  }
  return Value::undefined(text::quote(obj.is_mapping() ? "dict object" : obj.type_name()) + " has no attribute " +
                          text::quote(name));
}

namespace {

// Python's normalization of an index into [0, n); nullopt when out of range.
bool normalize_index(int64_t& i, size_t n) {
  if (i < 0) i += static_cast<int64_t>(n);
  return i >= 0 && static_cast<uint64_t>(i) < n;
}

}  // namespace

Result<Value> get_item(Interpreter& in, const Value& obj, const Value& key, Pos pos) {
  if (obj.is_undefined()) return in.undefined_error(pos, obj);
  const bool int_key = key.is_int() || key.is_bool();
  if (obj.is_dict() && !obj.is_namespace() && key.is_string()) {
    if (const Value* v = obj.dict_data().find(key.str())) return *v;
  } else if (is_seq(obj) && int_key) {
    int64_t i = key.as_int();
    if (normalize_index(i, obj.items().size())) return obj.items()[static_cast<size_t>(i)];
  } else if (obj.is_string() && int_key) {
    const auto cps = text::code_points(obj.str());
    int64_t i = key.as_int();
    if (normalize_index(i, cps.size())) {
      std::string out;
      text::append_utf8(out, cps[static_cast<size_t>(i)]);
      return Value(std::move(out));
    }
  }
  // jinja2 falls back to the attribute of that name (a method), else undefined.
  if (key.is_string() && has_method(obj, key.str())) return get_attr(in, obj, key.str(), pos);
  std::string what = obj.is_none() ? "None" : text::quote(obj.is_mapping() ? "dict object" : obj.type_name());
  return Value::undefined(what + " has no element " + repr(key));
}

Result<Value> get_slice(Interpreter& in, const Value& obj, const Value& start, const Value& stop, const Value& step,
                        Pos pos) {
  if (obj.is_undefined()) return in.undefined_error(pos, obj);
  const bool str = obj.is_string();
  if (!str && !is_seq(obj)) return Value::undefined(text::quote(obj.type_name()) + " object is not subscriptable");
  auto part = [](const Value& v) { return v.is_int() || v.is_bool() || v.is_undefined() || v.is_none(); };
  if (!part(start) || !part(stop) || !part(step)) return Value::undefined("slice indices must be integers or None");
  const int64_t s = step.is_int() || step.is_bool() ? step.as_int() : 1;
  if (s == 0) return in.error(pos, "ValueError: slice step cannot be zero");
  std::vector<uint32_t> cps;
  if (str) cps = text::code_points(obj.str());
  const int64_t n = static_cast<int64_t>(str ? cps.size() : obj.items().size());
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](const Value& v, int64_t dflt) {
    if (!(v.is_int() || v.is_bool())) return dflt;
    int64_t i = v.as_int();
    if (i < 0) {
      i += n;
      if (i < 0) i = s < 0 ? -1 : 0;
    } else if (i >= n) {
      i = s < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t b = adjust(start, s < 0 ? n - 1 : 0);
  const int64_t e = adjust(stop, s < 0 ? -1 : n);
  std::string out_str;
  std::vector<Value> out_items;
  for (int64_t i = b; s > 0 ? i < e : i > e; i += s) {
    if (str) text::append_utf8(out_str, cps[static_cast<size_t>(i)]);
    else out_items.push_back(obj.items()[static_cast<size_t>(i)]);
  }
  LLMSVC_RETURN_IF_ERROR(in.charge(str ? out_str.size() : out_items.size(), pos));
  if (str) return Value(std::move(out_str));
  return Value::list(std::move(out_items), obj.list_kind());
}

Result<std::vector<Value>> iterate(Interpreter& in, const Value& v, Pos pos) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Kind::undefined: return out;
    case Kind::list: return v.items();
    case Kind::string:
      for (size_t i = 0; i < v.str().size();) {
        const size_t at = i;
        text::next_code_point(v.str(), i);
        out.emplace_back(v.str().substr(at, i - at));
      }
      return out;
    case Kind::dict:
      if (v.is_namespace()) break;
      out.reserve(v.dict_data().entries.size());
      for (const auto& entry : v.dict_data().entries) out.emplace_back(entry.first);
      return out;
    default: break;
  }
  return in.error(pos, "TypeError: '" + std::string(v.type_name()) + "' object is not iterable");
}

}  // namespace llmsvc::jinja
