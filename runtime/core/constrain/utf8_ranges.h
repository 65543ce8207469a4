// SPDX-License-Identifier: Apache-2.0
// UTF-8 range compilation: a set of code point ranges as sequences of byte ranges, so a
// grammar over bytes can match a Unicode character class without decoding.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace llmsvc::constrain {

using CodeRange = std::pair<uint32_t, uint32_t>;  // inclusive
using ByteRangeSeq = std::vector<std::pair<uint8_t, uint8_t>>;

// Sorted, merged ranges with surrogates (U+D800..U+DFFF) removed and clipped to U+10FFFF.
std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> ranges);

// The complement of `ranges` among valid code points (for [^...]).
std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& ranges);

// Alternatives of byte-range sequences: the UTF-8 encoding of every code point in `ranges`
// matches exactly one sequence, and nothing else matches any.
std::vector<ByteRangeSeq> utf8_sequences(const std::vector<CodeRange>& ranges);

// Appends the UTF-8 encoding of `cp` (a valid scalar value) to `out`.
void append_utf8(uint32_t cp, std::vector<uint8_t>& out);

}  // namespace llmsvc::constrain
