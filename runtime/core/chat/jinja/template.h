// SPDX-License-Identifier: Apache-2.0
// The public entry of the Jinja interpreter: compile a template once, render it many times.
//
// The language is the subset of jinja2 that chat templates use, with jinja2's semantics as
// Hugging Face transformers configures them (trim_blocks, lstrip_blocks, loop controls,
// raise_exception, strftime_now, tojson as json.dumps). A template is untrusted (it comes
// from a model file): every failure is a Status naming the construct and its line:column,
// and Limits bound size, depth, time and memory. Nothing here throws.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/core/chat/jinja/limits.h"
#include "runtime/core/chat/jinja/value.h"

namespace llmsvc::jinja {

struct Stmt;

struct RenderOptions {
  // The time strftime_now formats; unset: the local clock (tests fix it).
  std::optional<std::tm> now;
};

class Template {
 public:
  // Errors: Code::invalid_argument for a syntax error, Code::unsupported for a construct
  // of jinja2 this interpreter does not implement (a filter, `include`...).
  static Result<Template> compile(std::string_view source, const Limits& limits = {});

  // `context` is a dict of the template's variables (messages, tools, bos_token...).
  // Errors: the template's raise_exception (its message included), runtime errors as
  // jinja2 would raise them (e.g. "'x' is undefined" when an undefined value is used),
  // and exceeded limits.
  Result<std::string> render(const Value& context, const RenderOptions& options = {}) const;

 private:
  Template(std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body, const Limits& limits)
      : body_(std::move(body)), limits_(limits) {}

  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
  Limits limits_;
};

}  // namespace llmsvc::jinja
