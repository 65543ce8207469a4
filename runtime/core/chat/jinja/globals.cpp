// SPDX-License-Identifier: Apache-2.0
// Global functions (range, namespace, dict, raise_exception, strftime_now) and the argument
// binding every builtin shares.
#include <chrono>
#include <ctime>

#include "runtime/core/chat/jinja/builtins.h"
#include "runtime/core/chat/jinja/format.h"
#include "runtime/core/chat/jinja/lexer.h"

namespace llmsvc::jinja {

Result<std::vector<Value>> bind_args(Interpreter& in, std::string_view fn, const CallArgs& args,
                                     std::initializer_list<ParamSpec> params, Pos pos) {
  if (args.positional.size() > params.size()) {
    return in.error(pos, "TypeError: " + std::string(fn) + "() takes at most " + std::to_string(params.size()) +
                             " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  }
  std::vector<Value> out(params.size());
  std::vector<bool> given(params.size(), false);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    out[i] = args.positional[i];
    given[i] = true;
  }
  for (const auto& [name, value] : args.named) {
    size_t i = 0;
    for (const ParamSpec& p : params) {
      if (p.name == name) break;
      ++i;
    }
    if (i == params.size()) {
      return in.error(pos, "TypeError: " + std::string(fn) + "() got an unexpected keyword argument '" + name + "'");
    }
    if (given[i]) {
      return in.error(pos, "TypeError: " + std::string(fn) + "() got multiple values for argument '" + name + "'");
    }
    out[i] = value;
    given[i] = true;
  }
  size_t i = 0;
  for (const ParamSpec& p : params) {
    if (!given[i]) {
      if (p.default_value.is_undefined() && p.default_value.undefined_hint().empty()) {
        return in.error(pos, "TypeError: " + std::string(fn) + "() missing required argument '" +
                                 std::string(p.name) + "'");
      }
      out[i] = p.default_value;
    }
    ++i;
  }
  return out;
}

Result<int64_t> int_arg(Interpreter& in, std::string_view fn, const Value& v, Pos pos) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_undefined()) return in.undefined_error(pos, v);
  return in.error(pos, "TypeError: " + std::string(fn) + "(): '" + std::string(v.type_name()) +
                           "' object cannot be interpreted as an integer");
}

Result<std::string_view> str_arg(Interpreter& in, std::string_view fn, const Value& v, Pos pos) {
  if (v.is_string()) return std::string_view(v.str());
  if (v.is_undefined()) return in.undefined_error(pos, v);
  return in.error(pos, "TypeError: " + std::string(fn) + "() argument must be str, not " + std::string(v.type_name()));
}

namespace {

constexpr std::string_view kGlobals[] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

Result<Value> range(Interpreter& in, const CallArgs& args, Pos pos) {
  if (!args.named.empty() || args.positional.empty() || args.positional.size() > 3) {
    return in.error(pos, "TypeError: range() takes 1 to 3 positional arguments");
  }
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < args.positional.size(); ++i) {
    auto n = int_arg(in, "range", args.positional[i], pos);
    if (!n.ok()) return n.status();
    v[args.positional.size() == 1 ? 1 : i] = *n;
  }
  const int64_t start = v[0], stop = v[1], step = v[2];
  if (step == 0) return in.error(pos, "ValueError: range() arg 3 must not be zero");
  // Count first (in 128 bits: the bounds may be anywhere in int64), then bound.
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 mag = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + mag - 1) / mag;
  if (count > static_cast<__int128>(in.limits().max_list_items)) {
    return in.error(pos, "range of " + std::to_string(static_cast<long long>(count > INT64_MAX ? INT64_MAX : count)) +
                             " items exceeds the list size limit");
  }
  LLMSVC_RETURN_IF_ERROR(in.check_list(static_cast<size_t>(count), pos));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (__int128 i = 0; i < count; ++i) items.emplace_back(static_cast<int64_t>(start + i * step));
  return Value::list(std::move(items));
}

// namespace(mapping?, **kwargs) and dict(mapping?, **kwargs): the entries, in order.
Result<std::vector<std::pair<std::string, Value>>> entries_of(Interpreter& in, std::string_view fn,
                                                              const CallArgs& args, Pos pos) {
  std::vector<std::pair<std::string, Value>> out;
  if (args.positional.size() > 1) return in.error(pos, "TypeError: " + std::string(fn) + "() takes at most 1 positional argument");
  DictData d;
  if (args.positional.size() == 1) {
    const Value& m = args.positional[0];
    if (!m.is_dict()) return in.error(pos, "TypeError: " + std::string(fn) + "() argument must be a mapping");
    d.entries = m.dict_data().entries;
  }
  for (const auto& [k, v] : args.named) d.set(k, v);
  return std::move(d.entries);
}

std::tm local_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

}  // namespace

Value find_global(std::string_view name) {
  for (std::string_view g : kGlobals) {
    if (g == name) {
      auto c = std::make_shared<Callable>();
      c->kind = CallableKind::global;
      c->name = std::string(name);
      return Value::callable(std::move(c));
    }
  }
  return Value();
}

Result<Value> call_global(Interpreter& in, std::string_view name, const CallArgs& args, Pos pos) {
  if (name == "range") return range(in, args, pos);
  if (name == "namespace" || name == "dict") {
    auto entries = entries_of(in, name, args, pos);
    if (!entries.ok()) return entries.status();
    if (name == "dict") return Value::dict(std::move(entries).value());
    Value ns = in.make_namespace();
    ns.namespace_data().entries = std::move(entries).value();
    return ns;
  }
  if (name == "raise_exception") {
    auto a = bind_args(in, name, args, {{"message", Value()}}, pos);
    if (!a.ok()) return a.status();
    return Status(Code::invalid_argument, "jinja: raise_exception at " + where(pos) + ": " + to_str((*a)[0]));
  }
  if (name == "strftime_now") {
    auto a = bind_args(in, name, args, {{"format", Value()}}, pos);
    if (!a.ok()) return a.status();
    auto fmt = str_arg(in, name, (*a)[0], pos);
    if (!fmt.ok()) return fmt.status();
    const std::tm tm = in.now() ? *in.now() : local_now();
    std::string f(*fmt);
    if (f.empty()) return Value(std::string());
    std::string out(256 + f.size() * 16, '\0');
    const size_t n = std::strftime(out.data(), out.size(), f.c_str(), &tm);
    if (n == 0) return in.error(pos, "strftime_now: format produces no text or is too long");
    out.resize(n);
    return Value(std::move(out));
  }
  return in.error(pos, "internal: unknown global '" + std::string(name) + "'", Code::internal);
}

}  // namespace llmsvc::jinja
