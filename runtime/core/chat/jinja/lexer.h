// SPDX-License-Identifier: Apache-2.0
// Lexer: template source -> tokens, with jinja2's whitespace handling as Hugging Face
// configures it (trim_blocks, lstrip_blocks, `-`/`+` markers, newlines normalized to \n and
// one trailing newline dropped). Comments vanish here; `{% raw %}` bodies become text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/core/chat/jinja/ast.h"

namespace llmsvc::jinja {

enum class Tok : uint8_t {
  text,         // template text between tags (value: the text)
  block_begin,  // {%
  block_end,    // %}
  var_begin,    // {{
  var_end,      // }}
  name,         // identifier or keyword
  string,       // string literal (value: decoded)
  integer,
  floating,
  op,           // operator or punctuation (text: the operator)
  eof,
};

struct Token {
  Tok kind = Tok::eof;
  Pos pos;
  std::string text;  // text / name / op / decoded string
  Value number;      // integer / floating
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Errors name the line:column (unterminated tag or string, unexpected character...).
Result<std::vector<Token>> lex(std::string_view source, const LexOptions& options = {});

// "line L:C", the form every error message uses for a position.
std::string where(Pos pos);

}  // namespace llmsvc::jinja
