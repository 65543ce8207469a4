// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/constrain/number_range.h"

#include <algorithm>
#include <string_view>
#include <vector>

namespace llmsvc::constrain {
namespace {

int digits(int64_t v) {
  int d = 1;
  while (v >= 10) {
    v /= 10;
    ++d;
  }
  return d;
}

int64_t pow10(int d) {
  int64_t p = 1;
  while (d-- > 0) p *= 10;
  return p;
}

std::string padded(int64_t v, int width) {
  std::string s = std::to_string(v);
  return std::string(static_cast<size_t>(width) - s.size(), '0') + s;
}

std::string join(const std::vector<std::string>& alts) {
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

bool all_of_char(const std::string& s, size_t from, char c) {
  return std::all_of(s.begin() + static_cast<ptrdiff_t>(from), s.end(), [c](char x) { return x == c; });
}

// Appends pieces to `out` (appends instead of operator+ chains, which GCC 12 misreads).
void put(std::string& out, std::initializer_list<std::string_view> parts) {
  for (auto p : parts) out.append(p.data(), p.size());
}

std::string quoted_digit(char d) {
  std::string s = "\"";
  s += d;
  s += "\" ";
  return s;
}

std::string any_digits(size_t n) {
  std::string s;
  if (n > 0) put(s, {" [0-9]{", std::to_string(n), "}"});
  return s;
}

// Digit strings of x.size() characters from x to y (x <= y, leading zeros allowed): the
// first digit splits the range into a low edge, a free middle and a high edge.
std::string same_length(const std::string& x, const std::string& y) {
  const size_t n = x.size();
  std::string out;
  if (x == y) {
    put(out, {"\"", x, "\""});
    return out;
  }
  if (x[0] == y[0]) {
    put(out, {quoted_digit(x[0]), same_length(x.substr(1), y.substr(1))});
    return out;
  }
  const bool low_full = all_of_char(x, 1, '0'), high_full = all_of_char(y, 1, '9');
  const char mid_lo = low_full ? x[0] : static_cast<char>(x[0] + 1);
  const char mid_hi = high_full ? y[0] : static_cast<char>(y[0] - 1);
  std::vector<std::string> alts;
  if (!low_full) {
    alts.emplace_back();
    put(alts.back(), {quoted_digit(x[0]), same_length(x.substr(1), std::string(n - 1, '9'))});
  }
  if (mid_lo <= mid_hi) {
    alts.emplace_back();
    put(alts.back(), {"[", std::string_view(&mid_lo, 1), "-", std::string_view(&mid_hi, 1), "]", any_digits(n - 1)});
  }
  if (!high_full) {
    alts.emplace_back();
    put(alts.back(), {quoted_digit(y[0]), same_length(std::string(n - 1, '0'), y.substr(1))});
  }
  return alts.size() == 1 ? alts[0] : join(alts);
}

constexpr int64_t kNoLow = INT64_MIN, kNoHigh = INT64_MAX;  // unbounded ends

// Alternatives for the decimal integers in [a, b] (a >= 0; b == kNoHigh: up to kMaxIntDigits digits).
std::vector<std::string> non_negative(int64_t a, int64_t b) {
  std::vector<std::string> alts;
  if (a > b) return alts;
  const int da = digits(a);
  const int db = b != kNoHigh ? digits(b) : da;
  for (int d = da; d <= db; ++d) {
    const int64_t lo = d == da ? a : pow10(d - 1);
    const int64_t hi = b != kNoHigh && d == db ? b : pow10(d) - 1;
    alts.push_back(same_length(padded(lo, d), padded(hi, d)));
  }
  if (b == kNoHigh && da < kMaxIntDigits) {
    alts.emplace_back();
    put(alts.back(), {"[1-9] [0-9]{", std::to_string(da), ",", std::to_string(kMaxIntDigits - 1), "}"});
  }
  return alts;
}

// Bounds as int64 with sentinels, clamped to what kMaxIntDigits digits can write; false
// when nothing is left.
bool clamp(std::optional<int64_t> lo_in, std::optional<int64_t> hi_in, int64_t& lo, int64_t& hi) {
  lo = lo_in.value_or(kNoLow);
  hi = hi_in.value_or(kNoHigh);
  if (lo < -kMaxIntMagnitude) lo = kNoLow;
  if (hi > kMaxIntMagnitude) hi = kNoHigh;
  if (lo != kNoLow && lo > kMaxIntMagnitude) return false;
  if (hi != kNoHigh && hi < -kMaxIntMagnitude) return false;
  return lo <= hi;
}

// Non-negative numbers in [a, b] with integer bounds (a >= 0).
std::string non_negative_number(int64_t a, int64_t b) {
  std::string frac, zero_frac;
  put(frac, {" (\".\" [0-9]{1,", std::to_string(kMaxIntDigits), "})?"});
  put(zero_frac, {" (\".\" \"0\"{1,", std::to_string(kMaxIntDigits), "})?"});
  std::vector<std::string> alts;
  if (b == kNoHigh) return join(non_negative(a, kNoHigh)) + frac;
  if (b - 1 >= a) alts.push_back(join(non_negative(a, b - 1)) + frac);
  alts.emplace_back();
  put(alts.back(), {"\"", std::to_string(b), "\"", zero_frac});
  return join(alts);
}

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo_in, std::optional<int64_t> hi_in) {
  int64_t lo = 0, hi = 0;
  if (!clamp(lo_in, hi_in, lo, hi)) return "";
  std::vector<std::string> alts;
  if (lo < 0) {  // negative values: "-" and a magnitude >= 1
    const int64_t mag_lo = hi < 0 ? -hi : 1;
    const int64_t mag_hi = lo == kNoLow ? kNoHigh : -lo;
    alts.push_back("\"-\" " + join(non_negative(mag_lo, mag_hi)));
  }
  if (hi >= 0) {
    for (auto& a : non_negative(std::max<int64_t>(lo, 0), hi)) alts.push_back(std::move(a));
  }
  return join(alts);
}

std::string number_range_gbnf(std::optional<int64_t> lo_in, std::optional<int64_t> hi_in) {
  int64_t lo = 0, hi = 0;
  if (!clamp(lo_in, hi_in, lo, hi)) return "";
  std::vector<std::string> alts;
  if (lo < 0) {  // value = -magnitude; "-0.5" is in range whenever lo <= -0.5 < hi
    const int64_t mag_lo = hi < 0 ? -hi : 0;
    const int64_t mag_hi = lo == kNoLow ? kNoHigh : -lo;
    alts.push_back("\"-\" " + non_negative_number(mag_lo, mag_hi));
  }
  if (hi >= 0) alts.push_back(non_negative_number(std::max<int64_t>(lo, 0), hi));
  return join(alts);
}

}  // namespace llmsvc::constrain
