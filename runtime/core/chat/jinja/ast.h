// SPDX-License-Identifier: Apache-2.0
// The syntax tree the parser builds and the interpreter walks: expressions and statements,
// each with the line:column it starts at (for error messages). Nodes own their children.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/chat/jinja/value.h"

namespace llmsvc::jinja {

struct Pos {
  uint32_t line = 1;
  uint32_t col = 1;
};

enum class ExprKind : uint8_t {
  literal,    // value
  name,       // name
  list,       // args
  tuple,      // args
  dict,       // kwargs (key expression in args[i], value in args[i+1]: pairs)
  attr,       // args[0].name
  index,      // args[0][args[1]]
  slice,      // args[0][args[1]:args[2]:args[3]] (null parts are absent)
  call,       // args[0](args[1..], kwargs)
  filter,     // args[0] | name(args[1..], kwargs)
  test,       // args[0] is [not] name(args[1..], kwargs)
  unary,      // op args[0]
  binary,     // args[0] op args[1]
  logic_and,  // args[0] and args[1]
  logic_or,   // args[0] or args[1]
  logic_not,  // not args[0]
  compare,    // args[0] ops[0] args[1] ops[1] args[2] ... (chained like Python)
  cond,       // args[1] if args[0] else args[2] (args[2] null: undefined)
};

enum class Op : uint8_t {
  add, sub, mul, div, floordiv, mod, pow, concat,  // binary
  neg, pos,                                        // unary
  eq, ne, lt, le, gt, ge, in, not_in,              // compare
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::literal;
  Op op = Op::add;
  bool negated = false;  // test: `is not`
  Pos pos;
  Value value;       // literal
  std::string name;  // name, attr, filter and test names
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // call / filter / test keyword arguments
  std::vector<Op> ops;                                  // compare
};

enum class StmtKind : uint8_t {
  text,         // text
  output,       // {{ expr }}
  if_,          // branches (cond, body); a null cond is the else branch
  for_,         // for targets in expr [if filter]: body [else: else_body]
  set,          // set targets = expr / set ns.attr = expr / set name %}body{% endset
  macro,        // macro name(params) body
  call_block,   // call(params) expr: body (the body is the macro's `caller`)
  filter_block, // filter expr: body (expr's innermost target is the body's text)
  break_,
  continue_,
  generation,   // HF's {% generation %} marker block: renders its body
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  StmtKind kind = StmtKind::text;
  Pos pos;
  std::string text;                  // text; set: the attribute of a namespace target
  std::vector<std::string> targets;  // for / set names (set ns.attr: {ns})
  ExprPtr expr;                      // output / for iterable / set value / call expression
  ExprPtr filter;                    // for: the `if` filter; set block / filter block: filter chain
  std::vector<std::pair<ExprPtr, Body>> branches;  // if
  Body body;
  Body else_body;
  std::string name;           // macro name
  std::vector<Param> params;  // macro / call block parameters
  bool uses_varargs = false;  // macro body reads `varargs` / `kwargs` / `caller`
  bool uses_kwargs = false;
  bool uses_caller = false;
};

}  // namespace llmsvc::jinja
