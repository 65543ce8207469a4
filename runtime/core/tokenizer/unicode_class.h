// SPDX-License-Identifier: Apache-2.0
// Code point classes (general category + whitespace) and lenient UTF-8 decoding, both
// exactly as llama.cpp's unicode.cpp has them, so pre-tokenization splits text the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmsvc::unicode {

enum Category : uint8_t {
  kUndefined = 0, kNumber = 1, kLetter = 2, kSeparator = 3,
  kMark = 4, kPunctuation = 5, kSymbol = 6, kControl = 7,
};

// (whitespace << 3) | category, from the generated table (llama.cpp's Unicode data).
uint8_t cpt_class(uint32_t cpt);

inline Category category_of(uint8_t cls) { return static_cast<Category>(cls & 7); }
inline bool is_whitespace(uint8_t cls) { return (cls & 8) != 0; }

// Decodes one code point at `off` and advances it. Like llama.cpp (not strict): only the
// lead/continuation bit patterns are checked; a bad sequence yields U+FFFD and advances
// one byte.
uint32_t decode_lenient(std::string_view s, size_t& off);

// Appends the UTF-8 encoding of `cpt` (values above U+10FFFF become U+FFFD).
void append_utf8(std::string& out, uint32_t cpt);

// Length of the UTF-8 sequence a lead byte announces (1 for continuation bytes), as
// llama.cpp's unicode_len_utf8.
inline size_t utf8_len_from_lead(char c) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(c) >> 4];
}

namespace detail {
extern const uint32_t kClassRuns[];  // generated: (first cpt << 4) | class
extern const size_t kClassRunCount;
}  // namespace detail

}  // namespace llmsvc::unicode
