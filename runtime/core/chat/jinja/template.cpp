// SPDX-License-Identifier: Apache-2.0
// Template: lex, parse and check names once; render with a fresh interpreter per call.
#include "runtime/core/chat/jinja/template.h"

#include <exception>
#include <new>

#include "runtime/core/chat/jinja/builtins.h"
#include "runtime/core/chat/jinja/eval.h"
#include "runtime/core/chat/jinja/lexer.h"
#include "runtime/core/chat/jinja/parser.h"

namespace llmsvc::jinja {
namespace {

// jinja2 resolves filter and test names when it compiles; so does this, so a template with
// an unknown one fails up front, not only on the path that reaches it.
Status check_expr(const Expr* e) {
  if (!e) return Status::Ok();
  if (e->kind == ExprKind::filter && !is_filter_name(e->name)) {
    const std::string at = " at " + where(e->pos);
    if (is_jinja2_filter(e->name)) return Status(Code::unsupported, "jinja: unsupported filter '" + e->name + "'" + at);
    return Status(Code::invalid_argument, "jinja: no filter named '" + e->name + "'" + at);
  }
  if (e->kind == ExprKind::test && !is_test_name(e->name)) {
    return Status(Code::invalid_argument, "jinja: no test named '" + e->name + "' at " + where(e->pos));
  }
  for (const ExprPtr& a : e->args) LLMSVC_RETURN_IF_ERROR(check_expr(a.get()));
  for (const auto& kw : e->kwargs) LLMSVC_RETURN_IF_ERROR(check_expr(kw.second.get()));
  return Status::Ok();
}

Status check_body(const Body& body) {
  for (const StmtPtr& s : body) {
    LLMSVC_RETURN_IF_ERROR(check_expr(s->expr.get()));
    LLMSVC_RETURN_IF_ERROR(check_expr(s->filter.get()));
    for (const auto& [cond, branch] : s->branches) {
      LLMSVC_RETURN_IF_ERROR(check_expr(cond.get()));
      LLMSVC_RETURN_IF_ERROR(check_body(branch));
    }
    for (const Param& p : s->params) LLMSVC_RETURN_IF_ERROR(check_expr(p.default_value.get()));
    LLMSVC_RETURN_IF_ERROR(check_body(s->body));
    LLMSVC_RETURN_IF_ERROR(check_body(s->else_body));
  }
  return Status::Ok();
}

}  // namespace

Result<Template> Template::compile(std::string_view source, const Limits& limits) {
  try {
    if (source.size() > limits.max_template_bytes) {
      return Status(Code::invalid_argument, "jinja: template of " + std::to_string(source.size()) +
                                                " bytes exceeds the limit (" +
                                                std::to_string(limits.max_template_bytes) + ")");
    }
    auto tokens = lex(source);
    if (!tokens.ok()) return tokens.status();
    auto body = parse(*tokens, limits.max_nesting);
    if (!body.ok()) return body.status();
    LLMSVC_RETURN_IF_ERROR(check_body(*body));
    return Template(std::make_shared<const Body>(std::move(body).value()), limits);
  } catch (const std::bad_alloc&) {
    return Status(Code::out_of_memory, "jinja: out of memory compiling the template");
  } catch (const std::exception& e) {
    return Status(Code::internal, std::string("jinja: ") + e.what());
  }
}

Result<std::string> Template::render(const Value& context, const RenderOptions& options) const {
  try {
    Interpreter in(limits_, context, options.now);
    std::string out;
    LLMSVC_RETURN_IF_ERROR(in.render(*body_, out));
    return out;
  } catch (const std::bad_alloc&) {
    return Status(Code::out_of_memory, "jinja: out of memory rendering the template");
  } catch (const std::exception& e) {
    return Status(Code::internal, std::string("jinja: ") + e.what());
  }
}

}  // namespace llmsvc::jinja
