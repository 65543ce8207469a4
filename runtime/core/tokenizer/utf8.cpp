// SPDX-License-Identifier: Apache-2.0
// Strict UTF-8 validation and the streaming detokenizer's UTF-8 repair (Utf8Streamer).
//
// Ill-formed input becomes one U+FFFD per maximal subpart (the Unicode / WHATWG
// practice): a lead byte with the valid continuation bytes that follow it is one error.
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

enum class Step { valid, incomplete, invalid };

// Classifies the sequence at s[i]: `len` is its length when valid, or the length of the
// maximal subpart when invalid, or of the (so far valid) prefix when incomplete.
Step classify(std::string_view s, size_t i, size_t& len) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) {
    len = 1;
    return Step::valid;
  }
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;   // no overlongs
    if (c == 0xED) hi = 0x9F;   // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;   // no overlongs
    if (c == 0xF4) hi = 0x8F;   // <= U+10FFFF
  } else {
    len = 1;
    return Step::invalid;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) {
      len = k;
      return Step::incomplete;
    }
    const uint8_t x = b(i + k);
    const bool ok = k == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
    if (!ok) {
      len = k;
      return Step::invalid;
    }
  }
  len = need + 1;
  return Step::valid;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    if (classify(text, i, len) != Step::valid) return false;
    i += len;
  }
  return true;
}

std::string Utf8Streamer::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    size_t len = 0;
    const Step st = classify(pending_, i, len);
    if (st == Step::incomplete) break;  // may still complete with the next token
    if (st == Step::valid) {
      out.append(pending_, i, len);
    } else {
      out += kReplacement;
    }
    i += len;
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8Streamer::flush() {
  std::string out;
  if (!pending_.empty()) {
    out += kReplacement;  // an incomplete sequence at the end is one maximal subpart
    pending_.clear();
  }
  return out;
}

}  // namespace llmsvc
