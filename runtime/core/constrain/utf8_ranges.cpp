// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/constrain/utf8_ranges.h"

#include <algorithm>

namespace llmsvc::constrain {
namespace {

constexpr uint32_t kMaxCp = 0x10FFFF;

// Largest code point encoded with n bytes.
constexpr uint32_t kLenMax[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

int utf8_len(uint32_t cp) { return cp <= 0x7F ? 1 : cp <= 0x7FF ? 2 : cp <= 0xFFFF ? 3 : 4; }

void encode(uint32_t cp, uint8_t* b, int n) {
  if (n == 1) { b[0] = static_cast<uint8_t>(cp); return; }
  for (int i = n - 1; i > 0; --i) {
    b[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  b[0] = static_cast<uint8_t>(kLead[n] | cp);
}

// [lo, hi] with both ends of the same encoded length: split until each piece is a cross
// product of byte ranges (the trailing bytes of lo all 0x80 and of hi all 0xBF at every
// level where their prefixes differ).
void split(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out) {
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a, n);
  encode(hi, b, n);
  ByteRangeSeq seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> ranges) {
  std::vector<CodeRange> cut;
  for (auto [lo, hi] : ranges) {
    if (lo > hi || lo > kMaxCp) continue;
    hi = std::min(hi, kMaxCp);
    // Surrogates have no UTF-8 encoding.
    if (lo < 0xD800 && hi >= 0xD800) {
      cut.emplace_back(lo, 0xD7FF);
      if (hi > 0xDFFF) cut.emplace_back(0xE000, hi);
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      if (hi > 0xDFFF) cut.emplace_back(0xE000, hi);
    } else {
      cut.emplace_back(lo, hi);
    }
  }
  std::sort(cut.begin(), cut.end());
  std::vector<CodeRange> merged;
  for (const auto& r : cut) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  return merged;
}

std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& ranges) {
  std::vector<CodeRange> out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : normalize_ranges(ranges)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCp) out.emplace_back(next, kMaxCp);
  return normalize_ranges(std::move(out));
}

std::vector<ByteRangeSeq> utf8_sequences(const std::vector<CodeRange>& ranges) {
  std::vector<ByteRangeSeq> out;
  for (auto [lo, hi] : normalize_ranges(ranges)) {
    // Pieces of one encoded length each.
    for (int n = 1; n <= 4 && lo <= hi; ++n) {
      if (lo > kLenMax[n]) continue;
      const uint32_t end = std::min(hi, kLenMax[n]);
      split(lo, end, out);
      lo = end + 1;
    }
  }
  return out;
}

void append_utf8(uint32_t cp, std::vector<uint8_t>& out) {
  uint8_t b[4];
  const int n = utf8_len(cp);
  encode(cp, b, n);
  out.insert(out.end(), b, b + n);
}

}  // namespace llmsvc::constrain
