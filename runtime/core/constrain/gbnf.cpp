// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/constrain/gbnf.h"

#include <optional>
#include <string>

#include "runtime/core/constrain/utf8_ranges.h"

namespace llmsvc::constrain {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

using Seq = GrammarBuilder::Seq;

class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : s_(text), b_(limits) {}

  Result<Grammar> run() {
    skip_space();
    if (at_end()) { fail("empty grammar"); return error_; }
    while (!at_end()) {
      const std::string name = parse_name();
      if (name.empty()) { fail("expected a rule name"); return error_; }
      skip_space();
      if (s_.substr(i_, 3) != "::=") { fail("expected '::=' after rule name '" + name + "'"); return error_; }
      i_ += 3;
      const uint32_t r = b_.rule(name);
      auto alts = parse_alternatives(0);
      if (!error_.ok()) return error_;
      if (!b_.define(r, std::move(alts))) { fail("rule '" + name + "' is defined twice"); return error_; }
      skip_space();
    }
    return b_.finish("root");
  }

 private:
  bool at_end() const { return i_ >= s_.size(); }
  char peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }

  // Records the first error (with line and column); parsing unwinds with empty results.
  void fail(const std::string& msg) {
    if (error_.ok()) {
      size_t line = 1, col = 1;
      for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
        if (s_[k] == '\n') { ++line; col = 1; } else { ++col; }
      }
      error_ = Status(Code::invalid_argument,
                      "grammar: line " + std::to_string(line) + " column " + std::to_string(col) + ": " + msg);
    }
  }

  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = i_;
    while (!at_end() && is_name_char(peek())) ++i_;
    return std::string(s_.substr(start, i_ - start));
  }

  // Whether a rule definition `name ::=` starts here (which ends the current rule).
  bool at_rule_start() const {
    size_t k = i_;
    while (k < s_.size() && is_name_char(s_[k])) ++k;
    if (k == i_) return false;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t' || s_[k] == '\n' || s_[k] == '\r')) ++k;
    return s_.substr(k, 3) == "::=";
  }

  std::vector<Seq> parse_alternatives(int depth) {
    std::vector<Seq> alts;
    alts.push_back(parse_sequence(depth));
    while (error_.ok()) {
      skip_space();
      if (peek() != '|') break;
      ++i_;
      alts.push_back(parse_sequence(depth));
    }
    return alts;
  }

  static void append(Seq& seq, const Seq& item) {
    const uint32_t shift = static_cast<uint32_t>(seq.sets.size());
    for (Element e : item.items) {
      if (e.kind == Element::kBytes) e.arg += shift;
      seq.items.push_back(e);
    }
    seq.sets.insert(seq.sets.end(), item.sets.begin(), item.sets.end());
  }

  Seq parse_sequence(int depth) {
    Seq seq;
    while (error_.ok()) {
      skip_space();
      if (at_end() || peek() == '|' || peek() == ')' || at_rule_start()) break;
      Seq item = parse_item(depth);
      if (!error_.ok()) break;
      item = parse_quantifier(std::move(item));
      append(seq, item);
    }
    return seq;
  }

  // One code point of a literal or class (UTF-8 in the text, or an escape); nullopt on error.
  std::optional<uint32_t> parse_char() {
    if (at_end()) { fail("unterminated literal or class"); return std::nullopt; }
    unsigned char c = static_cast<unsigned char>(s_[i_]);
    if (c == '\\') {
      ++i_;
      const char e = peek();
      ++i_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': case '/': return static_cast<uint32_t>(e);
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: fail("unknown escape '\\" + std::string(1, e) + "'"); return std::nullopt;
      }
    }
    // Decode one UTF-8 scalar value of the grammar text itself.
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i_ + n > s_.size()) { fail("invalid UTF-8 in grammar"); return std::nullopt; }
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s_[i_ + k]);
      if ((d & 0xC0) != 0x80) { fail("invalid UTF-8 in grammar"); return std::nullopt; }
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { fail("invalid UTF-8 in grammar"); return std::nullopt; }
    i_ += n;
    return cp;
  }

  std::optional<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const int h = hex_value(peek());
      if (h < 0) { fail("expected " + std::to_string(digits) + " hex digits"); return std::nullopt; }
      v = v * 16 + static_cast<uint32_t>(h);
      ++i_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { fail("escape is not a Unicode scalar value"); return std::nullopt; }
    return v;
  }

  Seq parse_item(int depth) {
    Seq item;
    const char c = peek();
    if (c == '"') {
      ++i_;
      std::vector<uint8_t> bytes;
      while (error_.ok() && peek() != '"') {
        auto cp = parse_char();
        if (!cp) return item;
        append_utf8(*cp, bytes);
      }
      ++i_;
      GrammarBuilder::add_literal(item, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    } else if (c == '[') {
      ++i_;
      const bool negate = peek() == '^';
      if (negate) ++i_;
      std::vector<CodeRange> ranges;
      while (error_.ok() && peek() != ']') {
        auto lo = parse_char();
        if (!lo) return item;
        uint32_t hi = *lo;
        if (peek() == '-' && peek(1) != ']') {
          ++i_;
          auto h = parse_char();
          if (!h) return item;
          if (*h < *lo) { fail("character range out of order"); return item; }
          hi = *h;
        }
        ranges.emplace_back(*lo, hi);
      }
      ++i_;
      if (negate) ranges = complement_ranges(ranges);
      if (normalize_ranges(ranges).empty()) { fail("character class matches nothing"); return item; }
      item = b_.char_class(ranges, "class");
    } else if (c == '.') {
      ++i_;
      item = b_.char_class({{0, 0x10FFFF}}, "any");
    } else if (c == '(') {
      if (depth >= kMaxGroupDepth) { fail("groups nested too deeply"); return item; }
      ++i_;
      auto alts = parse_alternatives(depth + 1);
      if (!error_.ok()) return item;
      skip_space();
      if (peek() != ')') { fail("expected ')'"); return item; }
      ++i_;
      const uint32_t r = b_.fresh_rule("group");
      b_.define(r, std::move(alts));
      GrammarBuilder::add_ref(item, r);
    } else if (is_name_char(c)) {
      GrammarBuilder::add_ref(item, b_.rule(parse_name()));
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return item;
  }

  std::optional<uint32_t> parse_count() {
    uint64_t v = 0;
    const size_t start = i_;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > 1000000) { fail("repetition count too large"); return std::nullopt; }
      ++i_;
    }
    if (i_ == start) return std::nullopt;
    return static_cast<uint32_t>(v);
  }

  Seq parse_quantifier(Seq item) {
    // No space before a quantifier (as in GBNF): "x *" would be a sequence error anyway.
    const char c = peek();
    uint32_t min = 0;
    int64_t max = -1;
    if (c == '*') {
      ++i_;
    } else if (c == '+') {
      ++i_;
      min = 1;
    } else if (c == '?') {
      ++i_;
      max = 1;
    } else if (c == '{') {
      ++i_;
      skip_space();
      auto m = parse_count();
      if (!m) { fail("expected a count in { }"); return item; }
      min = *m;
      max = *m;
      skip_space();
      if (peek() == ',') {
        ++i_;
        skip_space();
        auto n = parse_count();
        max = n ? int64_t{*n} : -1;
        skip_space();
      }
      if (!error_.ok()) return item;
      if (peek() != '}') { fail("expected '}'"); return item; }
      ++i_;
    } else {
      return item;
    }
    if (item.items.size() != 1) {  // a multi-byte literal repeats as a unit
      const uint32_t r = b_.fresh_rule("lit");
      b_.define(r, {item});
      item = Seq{};
      GrammarBuilder::add_ref(item, r);
    }
    auto rep = b_.repeat(item, min, max, "rep");
    Seq out;
    if (!rep.ok()) { if (error_.ok()) fail(rep.status().message()); return out; }
    GrammarBuilder::add_ref(out, *rep);
    return out;
  }

  std::string_view s_;
  size_t i_ = 0;
  GrammarBuilder b_;
  Status error_;
};

}  // namespace

Result<Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits) {
  if (text.size() > kMaxGrammarText)
    return Status(Code::invalid_argument, "grammar: text larger than " + std::to_string(kMaxGrammarText) + " bytes");
  return Parser(text, limits).run();
}

}  // namespace llmsvc::constrain
