// SPDX-License-Identifier: Apache-2.0
// Python string semantics over UTF-8 (see text.h).
#include "runtime/core/chat/jinja/text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace llmsvc::jinja::text {

uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  int n = b0 < 0x80 ? 0 : (b0 >> 5) == 0x6 ? 1 : (b0 >> 4) == 0xE ? 2 : (b0 >> 3) == 0x1E ? 3 : -1;
  if (n <= 0 || i + static_cast<size_t>(n) >= s.size()) {
    ++i;
    return b0;
  }
  uint32_t cp = b0 & (0x3F >> n);
  for (int k = 1; k <= n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  i += n + 1;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) next_code_point(s, i);
  return n;
}

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(next_code_point(s, i));
  return out;
}

namespace {

bool in_set(uint32_t cp, const std::string_view* chars) {
  if (!chars) return is_space(cp);
  for (size_t i = 0; i < chars->size();) {
    if (next_code_point(*chars, i) == cp) return true;
  }
  return false;
}

// Byte offset where the code point ending just before `end` starts.
size_t prev_start(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80 && end - i < 4) --i;
  size_t probe = i;
  next_code_point(s, probe);
  return probe == end ? i : end - 1;
}

}  // namespace

std::string_view strip(std::string_view s, const std::string_view* chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t i = b;
      if (!in_set(next_code_point(s, i), chars)) break;
      b = i;
    }
  }
  if (right) {
    while (e > b) {
      const size_t start = prev_start(s, e);
      size_t i = start;
      if (!in_set(next_code_point(s, i), chars)) break;
      e = start;
    }
  }
  return s.substr(b, e - b);
}

std::vector<std::string> split(std::string_view s, const std::string_view* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  size_t i = 0;
  while (true) {
    // Skip the whitespace run, then take a word (the rest once maxsplit words are out).
    size_t word = i;
    while (word < s.size()) {
      size_t j = word;
      if (!is_space(next_code_point(s, j))) break;
      word = j;
    }
    if (word >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      out.emplace_back(strip(s.substr(word), nullptr, false, true));
      break;
    }
    size_t end = word;
    while (end < s.size()) {
      size_t j = end;
      if (is_space(next_code_point(s, j))) break;
      end = j;
    }
    out.emplace_back(s.substr(word, end - word));
    i = end;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, std::string_view sep, int64_t maxsplit) {
  std::vector<std::string> rev;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
    if (end < sep.size()) break;
    const size_t at = s.rfind(sep, end - sep.size());
    if (at == std::string_view::npos) break;
    rev.emplace_back(s.substr(at + sep.size(), end - at - sep.size()));
    end = at;
  }
  rev.emplace_back(s.substr(0, end));
  return {rev.rbegin(), rev.rend()};
}

std::vector<std::string_view> splitlines(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    const size_t at = i;
    const uint32_t cp = next_code_point(s, i);
    const bool br = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
                    cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!br) continue;
    out.push_back(s.substr(start, at - start));
    if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
    start = i;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every code point and at the end.
    int64_t n = 0;
    size_t i = 0;
    while (i <= s.size()) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (i == s.size()) break;
      const size_t at = i;
      next_code_point(s, i);
      out += s.substr(at, i - at);
    }
    return out;
  }
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t at = s.find(from, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += to;
    start = at + from.size();
  }
  out += s.substr(start);
  return out;
}

namespace {
char up(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
char down(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
}  // namespace

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = up(c);
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = down(c);
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = up(out[0]);
  return out;
}

std::string py_title(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    c = prev_cased ? down(c) : up(c);
    // Non-ASCII bytes count as cased letters (most are), which keeps words whole.
    prev_cased = is_alpha(c) || (static_cast<unsigned char>(c) >= 0x80);
  }
  return out;
}

std::string jinja_title(std::string_view s) {
  std::string out(s);
  bool word_start = true;
  for (char& c : out) {
    const bool sep = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '-' ||
                     c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      word_start = true;
      continue;
    }
    c = word_start ? up(c) : down(c);
    word_start = false;
  }
  return out;
}

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's layout: fixed for exponents in [-4, 16).
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    const int point = exp + 1;  // digits before the decimal point
    if (point <= 0) {
      out += "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    } else if (static_cast<size_t>(point) >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(point) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, point) + "." + digits.substr(point);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + ebuf;
}

std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '\'';
  out += s;
  out += '\'';
  return out;
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const uint32_t cp = next_code_point(s, i);
    char buf[16];
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) {
      std::snprintf(buf, sizeof buf, "\\x%02x", cp);
      out += buf;
    } else if ((cp >= 0x200B && cp <= 0x200F) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202A && cp <= 0x202E) ||
               (cp >= 0x2060 && cp <= 0x2064) || cp == 0xFEFF || cp == 0x2000 || (cp > 0x2000 && cp <= 0x200A) ||
               cp == 0x3000 || cp == 0x1680 || cp == 0x202F || cp == 0x205F) {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      out += buf;
    } else {
      out += s.substr(at, i - at);
    }
  }
  out += quote;
  return out;
}

}  // namespace llmsvc::jinja::text
