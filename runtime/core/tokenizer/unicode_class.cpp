// SPDX-License-Identifier: Apache-2.0
// Code point class lookup (two-level table built once from the generated runs) and UTF-8 helpers.
#include "runtime/core/tokenizer/unicode_class.h"

#include <cstring>
#include <unordered_map>
#include <vector>

namespace llmsvc::unicode {
namespace {

constexpr uint32_t kMaxCpt = 0x110000;
constexpr uint32_t kBlock = 256;

// 4352 blocks of 256 code points share ~150 distinct contents: index + unique blocks
// is ~45 KB, and a lookup is two loads.
struct ClassTable {
  std::vector<uint16_t> index;   // block number -> unique block
  std::vector<uint8_t> blocks;   // unique blocks, kBlock bytes each

  ClassTable() {
    index.resize(kMaxCpt / kBlock);
    std::unordered_multimap<uint64_t, uint16_t> by_hash;  // content hash -> unique block
    uint8_t block[kBlock];
    size_t run = 0;
    for (uint32_t b = 0; b < kMaxCpt / kBlock; ++b) {
      uint64_t hash = 1469598103934665603ull;  // FNV-1a
      for (uint32_t i = 0; i < kBlock; ++i) {
        const uint32_t cpt = b * kBlock + i;
        while (run + 1 < detail::kClassRunCount && (detail::kClassRuns[run + 1] >> 4) <= cpt) ++run;
        block[i] = static_cast<uint8_t>(detail::kClassRuns[run] & 0xF);
        hash = (hash ^ block[i]) * 1099511628211ull;
      }
      int found = -1;
      for (auto [it, end] = by_hash.equal_range(hash); it != end && found < 0; ++it) {
        if (std::memcmp(&blocks[size_t{it->second} * kBlock], block, kBlock) == 0) found = it->second;
      }
      if (found < 0) {
        found = static_cast<int>(blocks.size() / kBlock);
        blocks.insert(blocks.end(), block, block + kBlock);
        by_hash.emplace(hash, static_cast<uint16_t>(found));
      }
      index[b] = static_cast<uint16_t>(found);
    }
  }
};

const ClassTable& table() {
  static const ClassTable t;
  return t;
}

}  // namespace

uint8_t cpt_class(uint32_t cpt) {
  if (cpt >= kMaxCpt) return kUndefined;
  const ClassTable& t = table();
  return t.blocks[size_t{t.index[cpt / kBlock]} * kBlock + cpt % kBlock];
}

uint32_t decode_lenient(std::string_view s, size_t& off) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const size_t n = s.size();
  const uint8_t c = b(off);
  const auto cont = [&](size_t i) { return i < n && (b(i) & 0xC0) == 0x80; };
  if (!(c & 0x80)) {
    off += 1;
    return c;
  }
  if ((c & 0x40) && !(c & 0x20)) {
    if (cont(off + 1)) {
      const uint32_t r = (uint32_t{c} & 0x1F) << 6 | (b(off + 1) & 0x3F);
      off += 2;
      return r;
    }
  } else if ((c & 0x40) && !(c & 0x10)) {
    if (cont(off + 1) && cont(off + 2)) {
      const uint32_t r = (uint32_t{c} & 0x0F) << 12 | (uint32_t{b(off + 1)} & 0x3F) << 6 | (b(off + 2) & 0x3F);
      off += 3;
      return r;
    }
  } else if ((c & 0x40) && !(c & 0x08)) {
    if (cont(off + 1) && cont(off + 2) && cont(off + 3)) {
      const uint32_t r = (uint32_t{c} & 0x07) << 18 | (uint32_t{b(off + 1)} & 0x3F) << 12 |
                         (uint32_t{b(off + 2)} & 0x3F) << 6 | (b(off + 3) & 0x3F);
      off += 4;
      return r;
    }
  }
  off += 1;
  return 0xFFFD;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt > 0x10FFFF) cpt = 0xFFFD;  // llama.cpp would throw here; never produced by valid input
  if (cpt <= 0x7F) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

}  // namespace llmsvc::unicode
