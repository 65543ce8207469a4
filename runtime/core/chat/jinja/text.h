// SPDX-License-Identifier: Apache-2.0
// Python's string semantics over UTF-8 text: whitespace (str.isspace), strip / split /
// splitlines, code-point length and slicing, ASCII case mapping, and the str() / repr()
// of floats and strings. Invalid UTF-8 bytes count as one code point each.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmsvc::jinja::text {

// Decodes the code point at s[i] and advances i (an invalid byte decodes as itself).
uint32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, uint32_t cp);

bool is_space(uint32_t cp);  // Python str.isspace / re's \s
size_t length(std::string_view s);  // in code points

// Python's strip family: whitespace when chars is null, else any code point of *chars.
std::string_view strip(std::string_view s, const std::string_view* chars, bool left, bool right);
// str.split(sep, maxsplit): sep null splits on whitespace runs.
std::vector<std::string> split(std::string_view s, const std::string_view* sep, int64_t maxsplit);
// str.rsplit with a separator (from the right).
std::vector<std::string> rsplit(std::string_view s, std::string_view sep, int64_t maxsplit);
// str.splitlines(keepends=False).
std::vector<std::string_view> splitlines(std::string_view s);
// str.replace(old, new, count) (count < 0: all).
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);  // first upper, rest lower
std::string py_title(std::string_view s);     // str.title()
std::string jinja_title(std::string_view s);  // jinja2's |title (words split at spaces - ( { [ <)

// The code points [start, stop) by step (Python slice indices, already clamped).
std::vector<uint32_t> code_points(std::string_view s);

// Python float repr (shortest round-trip: 1.0, 1e-05, 1e+16, inf, nan).
std::string format_float(double v);
// 's' (for messages; also sidesteps a GCC 12 -Wrestrict false positive on "'" + string).
std::string quote(std::string_view s);
// Python repr() of a str: quotes chosen as Python does, escapes for controls.
std::string repr(std::string_view s);

}  // namespace llmsvc::jinja::text
