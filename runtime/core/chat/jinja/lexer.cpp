// SPDX-License-Identifier: Apache-2.0
// Lexer (see lexer.h). The whitespace rules follow jinja2's lexer: `-` strips all whitespace
// on its side of the tag; lstrip_blocks removes spaces and tabs between a line's start and a
// block or comment tag (not `{{`), `+` keeps them; trim_blocks drops the one newline right
// after a block or comment tag. A tag's end is only recognised outside brackets.
#include "runtime/core/chat/jinja/lexer.h"

#include <algorithm>
#include <limits>

#include "runtime/core/chat/jinja/text.h"

namespace llmsvc::jinja {

std::string where(Pos pos) { return "line " + std::to_string(pos.line) + ":" + std::to_string(pos.col); }

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// jinja2's source preparation: \r\n and \r become \n; one trailing newline is dropped.
std::string normalize(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      out += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      out += in[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexOptions& options) : src_(normalize(source)), opt_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> run() {
    bool line_starting = true;  // the previous tag's end left us at a line start
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit_text(src_.substr(pos_), pos_);
        break;
      }
      const char type = src_[tag + 1];
      const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      std::string_view body = std::string_view(src_).substr(pos_, tag - pos_);
      if (sign == '-') {
        body = text::strip(body, nullptr, false, true);
      } else if (sign != '+' && opt_.lstrip_blocks && type != '{') {
        const size_t nl = body.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < body.size() &&
            text::strip(body.substr(l_pos), nullptr, true, false).empty()) {
          body = body.substr(0, l_pos);
        }
      }
      emit_text(std::string(body), pos_);
      size_t after = tag + 2 + (sign ? 1 : 0);
      Status st;
      if (type == '#') {
        st = comment(tag, after);
      } else if (type == '%' && is_raw(after)) {
        st = raw(tag, after);
      } else {
        st = tag_tokens(tag, after, type == '%');
      }
      if (!st.ok()) return st;
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n' && last_end_consumed_newline_;
    }
    tokens_.push_back(Token{Tok::eof, pos_at(src_.size()), {}, {}});
    return std::move(tokens_);
  }

 private:
  Pos pos_at(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    return Pos{static_cast<uint32_t>(it - line_starts_.begin() + 1), static_cast<uint32_t>(offset - *it + 1)};
  }

  Status error(size_t offset, const std::string& msg) const {
    return Status(Code::invalid_argument, "jinja: syntax error at " + where(pos_at(offset)) + ": " + msg);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos && i + 1 < src_.size(); i = src_.find('{', i + 1)) {
      const char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
    }
    return std::string::npos;
  }

  void emit_text(std::string s, size_t offset) {
    if (!s.empty()) tokens_.push_back(Token{Tok::text, pos_at(offset), std::move(s), {}});
  }

  // After a tag's closing delimiter at `end`: `-` eats all whitespace, `+` nothing, and a
  // block or comment (trim_blocks) one newline.
  void finish_tag(size_t end, char sign, bool block) {
    pos_ = end;
    const size_t before = pos_;
    if (sign == '-') {
      const std::string_view rest = text::strip(std::string_view(src_).substr(pos_), nullptr, true, false);
      pos_ = src_.size() - rest.size();
    } else if (sign != '+' && block && opt_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    last_end_consumed_newline_ = pos_ > before;
  }

  Status comment(size_t tag, size_t start) {
    const size_t end = src_.find("#}", start);
    if (end == std::string::npos) return error(tag, "missing end of comment tag");
    const char sign = end > start && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    finish_tag(end + 2, sign, true);
    return Status::Ok();
  }

  // `{% raw %}` (its tag ends without trim_blocks, as jinja2 does).
  bool is_raw(size_t at) const {
    size_t i = skip_ws(at);
    if (src_.compare(i, 3, "raw") != 0) return false;
    i = skip_ws(i + 3);
    return src_.compare(i, 2, "%}") == 0 || src_.compare(i, 3, "-%}") == 0;
  }

  size_t skip_ws(size_t i) const {
    while (i < src_.size()) {
      size_t j = i;
      if (!text::is_space(text::next_code_point(src_, j))) break;
      i = j;
    }
    return i;
  }

  Status raw(size_t tag, size_t at) {
    size_t i = skip_ws(skip_ws(at) + 3);
    const bool strip_after = src_[i] == '-';
    i += strip_after ? 3 : 2;
    if (strip_after) i = skip_ws(i);
    for (size_t t = src_.find("{%", i); t != std::string::npos; t = src_.find("{%", t + 2)) {
      const char sign = t + 2 < src_.size() && (src_[t + 2] == '-' || src_[t + 2] == '+') ? src_[t + 2] : 0;
      size_t j = skip_ws(t + 2 + (sign ? 1 : 0));
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j = skip_ws(j + 6);
      char end_sign = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) end_sign = src_[j++];
      if (src_.compare(j, 2, "%}") != 0) continue;
      std::string_view body = std::string_view(src_).substr(i, t - i);
      if (sign == '-') body = text::strip(body, nullptr, false, true);
      emit_text(std::string(body), i);
      finish_tag(j + 2, end_sign, true);
      return Status::Ok();
    }
    return error(tag, "missing end of raw block");
  }

  Status tag_tokens(size_t tag, size_t i, bool block) {
    tokens_.push_back(Token{block ? Tok::block_begin : Tok::var_begin, pos_at(tag), {}, {}});
    std::vector<char> brackets;
    while (true) {
      i = skip_ws(i);
      if (i >= src_.size()) return error(tag, block ? "unclosed '{%' (no '%}')" : "unclosed '{{' (no '}}')");
      if (brackets.empty()) {
        const char* close = block ? "%}" : "}}";
        char sign = 0;
        size_t at = i;
        if ((src_[i] == '-' || (block && src_[i] == '+')) && src_.compare(i + 1, 2, close) == 0) sign = src_[at++];
        if (src_.compare(at, 2, close) == 0) {
          tokens_.push_back(Token{block ? Tok::block_end : Tok::var_end, pos_at(i), {}, {}});
          finish_tag(at + 2, sign, block);
          return Status::Ok();
        }
      }
      auto st = token(i, brackets);
      if (!st.ok()) return st;
    }
  }

  Status token(size_t& i, std::vector<char>& brackets) {
    const size_t start = i;
    const char c = src_[i];
    if (is_digit(c)) return number(i);
    if (is_name_start(c)) {
      while (i < src_.size() && is_name_char(src_[i])) ++i;
      tokens_.push_back(Token{Tok::name, pos_at(start), src_.substr(start, i - start), {}});
      return Status::Ok();
    }
    if (c == '\'' || c == '"') return string(i);
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwo) {
      if (src_.compare(i, 2, op) == 0) {
        tokens_.push_back(Token{Tok::op, pos_at(start), std::string(op), {}});
        i += 2;
        return Status::Ok();
      }
    }
    if (std::string_view("+-/*%~[](){}<>=.:|,;").find(c) == std::string_view::npos) {
      return error(i, std::string("unexpected character '") + c + "'");
    }
    if (c == '(' || c == '[' || c == '{') brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) return error(i, std::string("unexpected '") + c + "'");
      if (brackets.back() != c) return error(i, std::string("unexpected '") + c + "', expected '" + brackets.back() + "'");
      brackets.pop_back();
    }
    tokens_.push_back(Token{Tok::op, pos_at(start), std::string(1, c), {}});
    ++i;
    return Status::Ok();
  }

  // Digits with `_` separators.
  std::string digits(size_t& i) const {
    std::string out;
    while (i < src_.size() && (is_digit(src_[i]) || (src_[i] == '_' && i + 1 < src_.size() && is_digit(src_[i + 1])))) {
      if (src_[i] != '_') out += src_[i];
      ++i;
    }
    return out;
  }

  Status number(size_t& i) {
    const size_t start = i;
    std::string repr = digits(i);
    bool is_float = false;
    // jinja2 lexes no float right after a '.', so `a.0.1` is two subscripts.
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    if (!after_dot && i + 1 < src_.size() && src_[i] == '.' && is_digit(src_[i + 1])) {
      ++i;
      repr += '.';
      repr += digits(i);
      is_float = true;
    }
    if (!after_dot && i < src_.size() && (src_[i] == 'e' || src_[i] == 'E')) {
      size_t j = i + 1;
      std::string exp = "e";
      if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) exp += src_[j++];
      if (j < src_.size() && is_digit(src_[j])) {
        exp += digits(j);
        repr += exp;
        i = j;
        is_float = true;
      }
    }
    Token t{is_float ? Tok::floating : Tok::integer, pos_at(start), repr, {}};
    if (is_float) {
      t.number = Value(std::strtod(repr.c_str(), nullptr));
    } else {
      int64_t v = 0;
      for (char d : repr) {
        if (v > (std::numeric_limits<int64_t>::max() - (d - '0')) / 10) return error(start, "integer literal too large");
        v = v * 10 + (d - '0');
      }
      t.number = Value(v);
    }
    tokens_.push_back(std::move(t));
    return Status::Ok();
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // A string literal, decoded as Python's unicode-escape codec does (unknown escapes stay).
  Status string(size_t& i) {
    const size_t start = i;
    const char quote = src_[i++];
    std::string out;
    while (true) {
      if (i >= src_.size()) return error(start, "unterminated string literal");
      const char c = src_[i++];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= src_.size()) return error(start, "unterminated string literal");
      const char e = src_[i++];
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            const int h = i < src_.size() ? hex_value(src_[i]) : -1;
            if (h < 0) return error(i, std::string("truncated \\") + e + " escape");
            cp = cp * 16 + static_cast<uint32_t>(h);
            ++i;
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return error(i, "escape is not a valid code point");
          text::append_utf8(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k) cp = cp * 8 + (src_[i++] - '0');
            text::append_utf8(out, cp);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back(Token{Tok::string, pos_at(start), std::move(out), {}});
    return Status::Ok();
  }

  std::string src_;
  LexOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool last_end_consumed_newline_ = false;
};

}  // namespace

Result<std::vector<Token>> lex(std::string_view source, const LexOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace llmsvc::jinja
