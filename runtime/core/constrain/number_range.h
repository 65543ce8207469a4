// SPDX-License-Identifier: Apache-2.0
// Number ranges as grammar: GBNF expressions for the decimal JSON integers (and numbers) that
// lie within inclusive bounds, so `minimum` / `maximum` hold by construction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace llmsvc::constrain {

// Integers are written with at most this many digits (|value| < 10^16), bounded or not.
inline constexpr int kMaxIntDigits = 16;
inline constexpr int64_t kMaxIntMagnitude = 9999999999999999;  // 10^16 - 1

// A parenthesized GBNF expression matching exactly the JSON integers in [lo, hi] (absent:
// unbounded, up to kMaxIntDigits digits), without leading zeros or "-0". Empty when the
// range holds no integer.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

// A parenthesized GBNF expression for JSON numbers x with lo <= x <= hi where lo and hi are
// integers: an integer part in range, an optional fraction (of zeros only at the upper end),
// no exponent. Empty when the range is empty.
std::string number_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace llmsvc::constrain
