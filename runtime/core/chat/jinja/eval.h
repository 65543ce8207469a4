// SPDX-License-Identifier: Apache-2.0
// Interpreter: renders a parsed template against a context, with jinja2's scoping (a for
// loop's iterations and a macro's calls are scopes of their own; `if` is not), Undefined
// semantics (printing one is empty, using one in an operation is an error) and the bounds
// of Limits. Filters, tests, methods and globals are in their own files; they call back into
// the interpreter for errors, work accounting and calls.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/core/chat/jinja/ast.h"
#include "runtime/core/chat/jinja/callable.h"
#include "runtime/core/chat/jinja/limits.h"
#include "runtime/core/chat/jinja/value.h"

namespace llmsvc::jinja {

class Interpreter {
 public:
  // `context` must outlive the interpreter; `now` is strftime_now's time (null: the clock).
  Interpreter(const Limits& limits, const Value& context, std::optional<std::tm> now);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  Status render(const Body& body, std::string& out);

  // ---- for filters, tests, methods and globals ----
  // "jinja: error at line L:C: msg".
  Status error(Pos pos, std::string_view msg, Code code = Code::invalid_argument) const;
  // The error of using an undefined value (its hint says what was undefined).
  Status undefined_error(Pos pos, const Value& undefined) const;
  // Accounts work (bytes or items produced); fails past Limits::max_work.
  Status charge(uint64_t work, Pos pos);
  // A string of `size` bytes or a list of `n` items is about to be built: bounds, charges.
  Status check_string(size_t size, Pos pos);
  Status check_list(size_t n, Pos pos);
  Result<Value> call(const Value& callee, const CallArgs& args, Pos pos);
  Value make_namespace();
  const Limits& limits() const { return limits_; }
  const std::optional<std::tm>& now() const { return now_; }

 private:
  enum class Flow { normal, break_, continue_ };

  Result<Flow> exec(const Body& body);
  Result<Flow> exec(const Stmt& s);
  Result<Flow> exec_for(const Stmt& s);
  Status exec_set(const Stmt& s);
  Status exec_call_block(const Stmt& s);
  // Renders body into a string (for block set, filter blocks and macro calls).
  Result<std::string> capture(const Body& body);
  Status emit(std::string_view text, Pos pos);

  Result<Value> eval(const Expr& e);
  Result<Value> eval_call(const Expr& e);
  Result<Value> eval_filter(const Expr& e);
  Result<Value> eval_compare(const Expr& e);
  Result<Value> eval_collection(const Expr& e);
  Status eval_args(const Expr& e, size_t first, CallArgs& out);
  Value lookup(const std::string& name) const;
  Result<Value> call_macro(const Callable& macro, const CallArgs& args, Pos pos);

  const Limits limits_;
  const Value& context_;
  std::optional<std::tm> now_;
  std::shared_ptr<Scope> scope_;
  std::string* out_ = nullptr;
  const Value* filter_input_ = nullptr;  // the body text a filter block's chain applies to
  uint32_t call_depth_ = 0;
  uint64_t iterations_ = 0;
  uint64_t work_ = 0;
  // Namespaces made in this render: emptied at the end, which breaks any cycle a template
  // made by storing a namespace inside itself.
  std::vector<Value> namespaces_;
};

}  // namespace llmsvc::jinja
