// SPDX-License-Identifier: Apache-2.0
// Interpreter (see eval.h): statements, expressions, scopes, macro calls and the bounds.
#include "runtime/core/chat/jinja/eval.h"

#include "runtime/core/chat/jinja/builtins.h"
#include "runtime/core/chat/jinja/format.h"
#include "runtime/core/chat/jinja/lexer.h"
#include "runtime/core/chat/jinja/operators.h"

namespace llmsvc::jinja {

Interpreter::Interpreter(const Limits& limits, const Value& context, std::optional<std::tm> now)
    : limits_(limits), context_(context), now_(now), scope_(std::make_shared<Scope>()) {}

Interpreter::~Interpreter() {
  for (Value& ns : namespaces_) ns.namespace_data().entries.clear();
}

Status Interpreter::error(Pos pos, std::string_view msg, Code code) const {
  return Status(code, "jinja: error at " + where(pos) + ": " + std::string(msg));
}

Status Interpreter::undefined_error(Pos pos, const Value& undefined) const {
  const std::string& hint = undefined.undefined_hint();
  return error(pos, "UndefinedError: " + (hint.empty() ? std::string("value is undefined") : hint));
}

Status Interpreter::charge(uint64_t work, Pos pos) {
  work_ += work;
  if (work_ > limits_.max_work) {
    return error(pos, "template exceeds the work limit (" + std::to_string(limits_.max_work) + " units)");
  }
  return Status::Ok();
}

Status Interpreter::check_string(size_t size, Pos pos) {
  if (size > limits_.max_output_bytes) {
    return error(pos, "string of " + std::to_string(size) + " bytes exceeds the output limit (" +
                          std::to_string(limits_.max_output_bytes) + ")");
  }
  return charge(size, pos);
}

Status Interpreter::check_list(size_t n, Pos pos) {
  if (n > limits_.max_list_items) {
    return error(pos, "list of " + std::to_string(n) + " items exceeds the limit (" +
                          std::to_string(limits_.max_list_items) + ")");
  }
  return charge(n, pos);
}

Value Interpreter::make_namespace() {
  Value ns = Value::make_namespace();
  namespaces_.push_back(ns);
  return ns;
}

Status Interpreter::render(const Body& body, std::string& out) {
  out_ = &out;
  auto r = exec(body);
  out_ = nullptr;
  return r.status();
}

Status Interpreter::emit(std::string_view text, Pos pos) {
  if (out_->size() + text.size() > limits_.max_output_bytes) {
    return error(pos, "output exceeds the limit of " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
  LLMSVC_RETURN_IF_ERROR(charge(text.size(), pos));
  out_->append(text);
  return Status::Ok();
}

Result<std::string> Interpreter::capture(const Body& body) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  auto r = exec(body);
  out_ = saved;
  if (!r.ok()) return r.status();
  return buffer;
}

// ---- statements ----

Result<Interpreter::Flow> Interpreter::exec(const Body& body) {
  for (const StmtPtr& s : body) {
    auto r = exec(*s);
    if (!r.ok() || *r != Flow::normal) return r;
  }
  return Flow::normal;
}

Result<Interpreter::Flow> Interpreter::exec(const Stmt& s) {
  switch (s.kind) {
    case StmtKind::text: LLMSVC_RETURN_IF_ERROR(emit(s.text, s.pos)); break;
    case StmtKind::output: {
      auto v = eval(*s.expr);
      if (!v.ok()) return v.status();
      if (v->is_string()) {
        LLMSVC_RETURN_IF_ERROR(emit(v->str(), s.pos));
      } else {
        LLMSVC_RETURN_IF_ERROR(emit(to_str(*v), s.pos));
      }
      break;
    }
    case StmtKind::if_:
      for (const auto& [cond, body] : s.branches) {
        if (cond) {
          auto c = eval(*cond);
          if (!c.ok()) return c.status();
          if (!c->truthy()) continue;
        }
        return exec(body);
      }
      break;
    case StmtKind::for_: return exec_for(s);
    case StmtKind::set: LLMSVC_RETURN_IF_ERROR(exec_set(s)); break;
    case StmtKind::macro: {
      auto c = std::make_shared<Callable>();
      c->kind = CallableKind::macro;
      c->name = s.name;
      c->def = &s;
      c->closure = scope_;
      scope_->set(s.name, Value::callable(std::move(c)));
      break;
    }
    case StmtKind::call_block: LLMSVC_RETURN_IF_ERROR(exec_call_block(s)); break;
    case StmtKind::filter_block: {
      auto text = capture(s.body);
      if (!text.ok()) return text.status();
      const Value input(std::move(text).value());
      const Value* saved = filter_input_;
      filter_input_ = &input;
      auto v = eval(*s.filter);
      filter_input_ = saved;
      if (!v.ok()) return v.status();
      LLMSVC_RETURN_IF_ERROR(emit(to_str(*v), s.pos));
      break;
    }
    case StmtKind::break_: return Flow::break_;
    case StmtKind::continue_: return Flow::continue_;
    case StmtKind::generation: return exec(s.body);
  }
  return Flow::normal;
}

namespace {

// Assigns value to targets in scope, unpacking a sequence over several names.
Status assign(Interpreter& in, Scope& scope, const std::vector<std::string>& targets, const Value& value, Pos pos) {
  if (targets.size() == 1) {
    scope.set(targets[0], value);
    return Status::Ok();
  }
  auto items = iterate(in, value, pos);
  if (!items.ok()) return items.status();
  if (items->size() != targets.size()) {
    return in.error(pos, std::string("ValueError: ") +
                             (items->size() > targets.size() ? "too many values to unpack" : "not enough values to unpack") +
                             " (expected " + std::to_string(targets.size()) + ", got " +
                             std::to_string(items->size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], (*items)[i]);
  return Status::Ok();
}

// jinja2's `loop` object for iteration i of n.
Value loop_object(const std::vector<Value>& items, size_t i) {
  const size_t n = items.size();
  std::vector<std::pair<std::string, Value>> e;
  e.reserve(10);
  e.emplace_back("index", Value(static_cast<int64_t>(i + 1)));
  e.emplace_back("index0", Value(static_cast<int64_t>(i)));
  e.emplace_back("revindex", Value(static_cast<int64_t>(n - i)));
  e.emplace_back("revindex0", Value(static_cast<int64_t>(n - i - 1)));
  e.emplace_back("first", Value(i == 0));
  e.emplace_back("last", Value(i + 1 == n));
  e.emplace_back("length", Value(static_cast<int64_t>(n)));
  e.emplace_back("depth", Value(1));
  e.emplace_back("depth0", Value(0));
  e.emplace_back("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
  e.emplace_back("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
  return Value::dict(std::move(e));
}

// Replaces the current scope for the lifetime of the guard.
class ScopeGuard {
 public:
  ScopeGuard(std::shared_ptr<Scope>& slot, std::shared_ptr<Scope> next) : slot_(slot), saved_(std::move(slot)) {
    slot_ = std::move(next);
  }
  ~ScopeGuard() { slot_ = std::move(saved_); }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  std::shared_ptr<Scope>& slot_;
  std::shared_ptr<Scope> saved_;
};

// Counts one level of macro calls for the lifetime of the guard.
class CallDepth {
 public:
  explicit CallDepth(uint32_t& depth) : depth_(depth) { ++depth_; }
  ~CallDepth() { --depth_; }
  CallDepth(const CallDepth&) = delete;
  CallDepth& operator=(const CallDepth&) = delete;

 private:
  uint32_t& depth_;
};

}  // namespace

Result<Interpreter::Flow> Interpreter::exec_for(const Stmt& s) {
  auto iterable = eval(*s.expr);
  if (!iterable.ok()) return iterable.status();
  auto all = iterate(*this, *iterable, s.expr->pos);
  if (!all.ok()) return all.status();
  std::vector<Value> items;
  if (s.filter) {
    // The `if` filter sees the loop variables (not `loop`), one item at a time.
    for (const Value& item : *all) {
      ScopeGuard guard(scope_, std::make_shared<Scope>(Scope{scope_, {}}));
      LLMSVC_RETURN_IF_ERROR(assign(*this, *scope_, s.targets, item, s.pos));
      auto keep = eval(*s.filter);
      if (!keep.ok()) return keep.status();
      if (keep->truthy()) items.push_back(item);
    }
  } else {
    items = std::move(all).value();
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (++iterations_ > limits_.max_loop_iterations) {
      return error(s.pos, "loop iterations exceed the limit (" + std::to_string(limits_.max_loop_iterations) + ")");
    }
    LLMSVC_RETURN_IF_ERROR(charge(1, s.pos));
    ScopeGuard guard(scope_, std::make_shared<Scope>(Scope{scope_, {}}));
    LLMSVC_RETURN_IF_ERROR(assign(*this, *scope_, s.targets, items[i], s.pos));
    scope_->set("loop", loop_object(items, i));
    auto flow = exec(s.body);
    if (!flow.ok()) return flow;
    if (*flow == Flow::break_) break;
  }
  if (items.empty() && !s.else_body.empty()) return exec(s.else_body);
  return Flow::normal;
}

Status Interpreter::exec_set(const Stmt& s) {
  Value value;
  if (s.expr) {
    auto v = eval(*s.expr);
    if (!v.ok()) return v.status();
    value = std::move(v).value();
  } else {
    auto text = capture(s.body);
    if (!text.ok()) return text.status();
    value = Value(std::move(text).value());
    if (s.filter) {
      const Value* saved = filter_input_;
      filter_input_ = &value;
      auto v = eval(*s.filter);
      filter_input_ = saved;
      if (!v.ok()) return v.status();
      value = std::move(v).value();
    }
  }
  if (!s.text.empty()) {  // {% set ns.attr = value %}
    const Value ns = lookup(s.targets[0]);
    if (!ns.is_namespace()) return error(s.pos, "cannot assign attribute on non-namespace object");
    ns.namespace_data().set(s.text, std::move(value));
    return Status::Ok();
  }
  return assign(*this, *scope_, s.targets, value, s.pos);
}

Status Interpreter::exec_call_block(const Stmt& s) {
  auto caller = std::make_shared<Callable>();
  caller->kind = CallableKind::macro;
  caller->name = "caller";
  caller->def = &s;
  caller->closure = scope_;
  const Expr& call = *s.expr;
  auto callee = eval(*call.args[0]);
  if (!callee.ok()) return callee.status();
  CallArgs args;
  LLMSVC_RETURN_IF_ERROR(eval_args(call, 1, args));
  args.named.emplace_back("caller", Value::callable(std::move(caller)));
  auto r = this->call(*callee, args, call.pos);
  if (!r.ok()) return r.status();
  return emit(to_str(*r), s.pos);
}

// ---- calls ----

Result<Value> Interpreter::call(const Value& callee, const CallArgs& args, Pos pos) {
  if (callee.is_undefined()) return undefined_error(pos, callee);
  if (!callee.is_callable()) {
    return error(pos, "TypeError: '" + std::string(callee.type_name()) + "' object is not callable");
  }
  const Callable& c = callee.callable_ref();
  switch (c.kind) {
    case CallableKind::macro: return call_macro(c, args, pos);
    case CallableKind::method: return call_method(*this, c.self, c.name, args, pos);
    case CallableKind::global: return call_global(*this, c.name, args, pos);
  }
  return error(pos, "internal: unknown callable", Code::internal);
}

Result<Value> Interpreter::call_macro(const Callable& macro, const CallArgs& args, Pos pos) {
  const Stmt& def = *macro.def;
  auto closure = macro.closure.lock();
  if (!closure) return error(pos, "macro '" + macro.name + "' called after its scope ended");
  if (call_depth_ >= limits_.max_call_depth) {
    return error(pos, "macro calls nested deeper than " + std::to_string(limits_.max_call_depth));
  }
  auto frame = std::make_shared<Scope>(Scope{closure, {}});
  std::vector<Value> varargs;
  std::vector<std::pair<std::string, Value>> kwargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < def.params.size()) {
      frame->set(def.params[i].name, args.positional[i]);
    } else if (def.uses_varargs) {
      varargs.push_back(args.positional[i]);
    } else {
      return error(pos, "TypeError: macro '" + macro.name + "' takes not more than " +
                            std::to_string(def.params.size()) + " argument(s)");
    }
  }
  for (const auto& [name, value] : args.named) {
    bool is_param = false;
    for (const Param& p : def.params) is_param |= p.name == name;
    if (is_param) {
      if (frame->find_local(name)) {
        return error(pos, "TypeError: macro '" + macro.name + "' got multiple values for argument '" + name + "'");
      }
      frame->set(name, value);
    } else if (name == "caller" && def.uses_caller) {
      frame->set("caller", value);
    } else if (def.uses_kwargs) {
      kwargs.emplace_back(name, value);
    } else {
      return error(pos, "TypeError: macro '" + macro.name + "' takes no keyword argument '" + name + "'");
    }
  }
  CallDepth depth(call_depth_);
  ScopeGuard guard(scope_, frame);
  // Defaults are evaluated in the macro's frame, so they can see earlier parameters.
  for (const Param& p : def.params) {
    if (frame->find_local(p.name)) continue;
    if (p.default_value) {
      auto d = eval(*p.default_value);
      if (!d.ok()) return d;
      frame->set(p.name, std::move(d).value());
    } else {
      frame->set(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
    }
  }
  if (def.uses_varargs) frame->set("varargs", Value::list(std::move(varargs), ListKind::tuple));
  if (def.uses_kwargs) frame->set("kwargs", Value::dict(std::move(kwargs)));
  auto text = capture(def.body);
  if (!text.ok()) return text.status();
  return Value(std::move(text).value());
}

// ---- expressions ----

Value Interpreter::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
    if (const Value* v = s->find_local(name)) return *v;
  }
  if (context_.is_dict()) {
    if (const Value* v = context_.dict_data().find(name)) return *v;
  }
  Value g = find_global(name);
  if (!g.is_undefined()) return g;
  return Value::undefined("'" + name + "' is undefined");
}

Status Interpreter::eval_args(const Expr& e, size_t first, CallArgs& out) {
  out.positional.reserve(e.args.size() - first);
  for (size_t i = first; i < e.args.size(); ++i) {
    auto v = eval(*e.args[i]);
    if (!v.ok()) return v.status();
    out.positional.push_back(std::move(v).value());
  }
  for (const auto& [name, expr] : e.kwargs) {
    auto v = eval(*expr);
    if (!v.ok()) return v.status();
    out.named.emplace_back(name, std::move(v).value());
  }
  return Status::Ok();
}

Result<Value> Interpreter::eval_call(const Expr& e) {
  const Expr& callee = *e.args[0];
  CallArgs args;
  if (callee.kind == ExprKind::attr) {
    // obj.method(...) calls the method directly, without a bound-method value.
    auto obj = eval(*callee.args[0]);
    if (!obj.ok()) return obj;
    if (!obj->is_undefined() && has_method(*obj, callee.name)) {
      LLMSVC_RETURN_IF_ERROR(eval_args(e, 1, args));
      return call_method(*this, *obj, callee.name, args, e.pos);
    }
    auto fn = get_attr(*this, *obj, callee.name, callee.pos);
    if (!fn.ok()) return fn;
    LLMSVC_RETURN_IF_ERROR(eval_args(e, 1, args));
    return call(*fn, args, e.pos);
  }
  auto fn = eval(callee);
  if (!fn.ok()) return fn;
  LLMSVC_RETURN_IF_ERROR(eval_args(e, 1, args));
  return call(*fn, args, e.pos);
}

Result<Value> Interpreter::eval_filter(const Expr& e) {
  Value target;
  if (e.args[0]) {
    auto t = eval(*e.args[0]);
    if (!t.ok()) return t;
    target = std::move(t).value();
  } else if (filter_input_) {
    target = *filter_input_;
  }
  CallArgs args;
  LLMSVC_RETURN_IF_ERROR(eval_args(e, 1, args));
  return apply_filter(*this, e.name, target, args, e.pos);
}

Result<Value> Interpreter::eval_compare(const Expr& e) {
  auto left = eval(*e.args[0]);
  if (!left.ok()) return left;
  Value l = std::move(left).value();
  for (size_t i = 0; i < e.ops.size(); ++i) {
    auto right = eval(*e.args[i + 1]);
    if (!right.ok()) return right;
    auto r = compare_op(*this, e.ops[i], l, *right, e.pos);
    if (!r.ok()) return r.status();
    if (!*r) return Value(false);
    l = std::move(right).value();
  }
  return Value(true);
}

Result<Value> Interpreter::eval_collection(const Expr& e) {
  Value v;
  if (e.kind == ExprKind::dict) {
    std::vector<std::pair<std::string, Value>> entries;
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      auto k = eval(*e.args[i]);
      if (!k.ok()) return k;
      if (!k->is_string()) return error(e.args[i]->pos, "unsupported: dict keys other than strings", Code::unsupported);
      auto val = eval(*e.args[i + 1]);
      if (!val.ok()) return val;
      bool replaced = false;
      for (auto& entry : entries) {
        if (entry.first == k->str()) {
          entry.second = std::move(val).value();
          replaced = true;
        }
      }
      if (!replaced) entries.emplace_back(k->str(), std::move(val).value());
    }
    v = Value::dict(std::move(entries));
  } else {
    std::vector<Value> items;
    items.reserve(e.args.size());
    for (const ExprPtr& a : e.args) {
      auto item = eval(*a);
      if (!item.ok()) return item;
      items.push_back(std::move(item).value());
    }
    v = Value::list(std::move(items), e.kind == ExprKind::tuple ? ListKind::tuple : ListKind::list);
  }
  if (v.depth() > limits_.max_value_depth) {
    return error(e.pos, "value nested deeper than " + std::to_string(limits_.max_value_depth));
  }
  return v;
}

Result<Value> Interpreter::eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::literal: return e.value;
    case ExprKind::name: return lookup(e.name);
    case ExprKind::list:
    case ExprKind::tuple:
    case ExprKind::dict: return eval_collection(e);
    case ExprKind::attr: {
      auto obj = eval(*e.args[0]);
      if (!obj.ok()) return obj;
      return get_attr(*this, *obj, e.name, e.pos);
    }
    case ExprKind::index: {
      auto obj = eval(*e.args[0]);
      if (!obj.ok()) return obj;
      auto key = eval(*e.args[1]);
      if (!key.ok()) return key;
      return get_item(*this, *obj, *key, e.pos);
    }
    case ExprKind::slice: {
      auto obj = eval(*e.args[0]);
      if (!obj.ok()) return obj;
      Value parts[3];
      for (int k = 0; k < 3; ++k) {
        if (!e.args[k + 1]) continue;
        auto p = eval(*e.args[k + 1]);
        if (!p.ok()) return p;
        parts[k] = std::move(p).value();
      }
      return get_slice(*this, *obj, parts[0], parts[1], parts[2], e.pos);
    }
    case ExprKind::call: return eval_call(e);
    case ExprKind::filter: return eval_filter(e);
    case ExprKind::test: {
      auto v = eval(*e.args[0]);
      if (!v.ok()) return v;
      CallArgs args;
      LLMSVC_RETURN_IF_ERROR(eval_args(e, 1, args));
      auto r = apply_test(*this, e.name, *v, args, e.pos);
      if (!r.ok()) return r.status();
      return Value(*r != e.negated);
    }
    case ExprKind::unary: {
      auto v = eval(*e.args[0]);
      if (!v.ok()) return v;
      return unary_op(*this, e.op, *v, e.pos);
    }
    case ExprKind::binary: {
      auto a = eval(*e.args[0]);
      if (!a.ok()) return a;
      auto b = eval(*e.args[1]);
      if (!b.ok()) return b;
      return binary_op(*this, e.op, *a, *b, e.pos);
    }
    case ExprKind::logic_and:
    case ExprKind::logic_or: {
      auto a = eval(*e.args[0]);
      if (!a.ok()) return a;
      if (a->truthy() == (e.kind == ExprKind::logic_or)) return a;
      return eval(*e.args[1]);
    }
    case ExprKind::logic_not: {
      auto a = eval(*e.args[0]);
      if (!a.ok()) return a;
      return Value(!a->truthy());
    }
    case ExprKind::compare: return eval_compare(e);
    case ExprKind::cond: {
      auto c = eval(*e.args[0]);
      if (!c.ok()) return c;
      if (c->truthy()) return eval(*e.args[1]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the condition was false and there is no else");
    }
  }
  return error(e.pos, "internal: unknown expression", Code::internal);
}

}  // namespace llmsvc::jinja
