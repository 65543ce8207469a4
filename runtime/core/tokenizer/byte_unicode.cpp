// SPDX-License-Identifier: Apache-2.0
// GPT-2 byte mapping: the 188 printable bytes keep their code point, the other 68 are
// numbered from U+0100 upward in byte order.
#include "runtime/core/tokenizer/byte_unicode.h"

#include <array>

#include "runtime/core/tokenizer/unicode_class.h"

namespace llmsvc::bytemap {
namespace {

struct Tables {
  std::array<uint32_t, 256> to_cpt{};
  std::array<int16_t, 512> from_cpt{};  // every mapped code point is < U+0144
  std::array<std::string, 256> utf8;

  Tables() {
    from_cpt.fill(-1);
    const auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      to_cpt[b] = printable(b) ? static_cast<uint32_t>(b) : next++;
      from_cpt[to_cpt[b]] = static_cast<int16_t>(b);
      unicode::append_utf8(utf8[b], to_cpt[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_cpt(uint8_t b) { return tables().to_cpt[b]; }

int cpt_to_byte(uint32_t cpt) { return cpt < 512 ? tables().from_cpt[cpt] : -1; }

std::string_view byte_to_utf8(uint8_t b) { return tables().utf8[b]; }

void encode(std::string_view raw, std::string& out) {
  const Tables& t = tables();
  for (char c : raw) out += t.utf8[static_cast<uint8_t>(c)];
}

}  // namespace llmsvc::bytemap
