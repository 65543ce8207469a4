// SPDX-License-Identifier: Apache-2.0
// Parser: tokens -> syntax tree, by recursive descent with jinja2's operator precedence
// (or < and < not < comparisons < + - < ~ < * / // % < ** < unary - < filters, tests,
// subscripts and calls). Nesting is capped so a hostile template cannot exhaust the stack.
#pragma once

#include <vector>

#include "base/status.h"
#include "runtime/core/chat/jinja/ast.h"
#include "runtime/core/chat/jinja/lexer.h"

namespace llmsvc::jinja {

// Errors name the construct and its line:column; an unsupported statement (include,
// extends, import...) is reported as Code::unsupported.
Result<Body> parse(const std::vector<Token>& tokens, uint32_t max_depth);

}  // namespace llmsvc::jinja
