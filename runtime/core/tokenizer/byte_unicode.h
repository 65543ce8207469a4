// SPDX-License-Identifier: Apache-2.0
// GPT-2's byte <-> printable code point mapping that byte-level BPE vocabularies are written in
// (a space is "Ġ" U+0120, a newline "Ċ" U+010A; printable Latin-1 bytes map to themselves).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace llmsvc::bytemap {

// The code point byte `b` is written as.
uint32_t byte_to_cpt(uint8_t b);
// The byte a code point stands for, or -1 when it is not one of the 256 mapped ones.
int cpt_to_byte(uint32_t cpt);
// UTF-8 of byte_to_cpt(b) (1 or 2 bytes).
std::string_view byte_to_utf8(uint8_t b);

// Maps every byte of `raw` into `out` (appending).
void encode(std::string_view raw, std::string& out);

}  // namespace llmsvc::bytemap
