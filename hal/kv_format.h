// SPDX-License-Identifier: Apache-2.0
// KV chunk block formats: the byte layouts of one layer's keys or values for one chunk,
// shared by the policy's codecs (which write them) and the HAL's attention (which reads
// them in place, dequantizing in registers).
//
// A block holds n_tokens consecutive positions of one layer, for n_head_kv heads of
// head_dim channels (kv_dim = n_head_kv * head_dim channels per token, kv_dim % 8 == 0).
//
//   f16        codes only: u16 halves [token][channel].
//   q8/q4/q3/q2  asymmetric integer codes of B = 8/4/3/2 bits, x = min + scale * code:
//     keys     channel-wise (KIVI): one (min, scale) per channel over the block's tokens.
//              params: f16 min[kv_dim], then f16 scale[kv_dim]; then codes.
//     values   token-wise per head: one (min, scale) per (token, head).
//              params: f16 min[n_tokens][n_head_kv], then f16 scale[n_tokens][n_head_kv]; then codes.
//     codes    [token][channel], B bits each, a little-endian bit stream per row: channel j is
//              bits [j * B, +B) of the row, bit k being bit k % 8 of byte k / 8 (for B = 8/4/2:
//              bits [(j % (8/B)) * B, +B) of byte j / (8/B); for B = 3 each 8 channels fill 3
//              bytes). A row is kv_dim * B / 8 bytes.
//
// Params come first so that they are read once per block; every block starts 2-byte aligned
// (all its sizes are even).
#pragma once

#include <cstddef>
#include <cstdint>

namespace llmsvc::hal {

enum class KvFormat : uint8_t { f16 = 16, q8 = 8, q4 = 4, q3 = 3, q2 = 2 };

// Bits per code.
constexpr int kv_format_bits(KvFormat f) { return static_cast<int>(f); }

// Whether a byte read from storage names a format (its bits per code).
constexpr bool kv_format_valid(uint8_t f) { return f == 16 || f == 8 || f == 4 || f == 3 || f == 2; }

enum class KvPart : uint8_t { key = 0, value = 1 };

struct KvBlockShape {
  int n_tokens = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  constexpr int kv_dim() const { return n_head_kv * head_dim; }
};

// Bytes of the parameter section (0 for f16).
constexpr size_t kv_block_param_bytes(KvFormat f, KvPart part, const KvBlockShape& s) {
  if (f == KvFormat::f16) return 0;
  const size_t pairs = part == KvPart::key ? size_t(s.kv_dim()) : size_t(s.n_tokens) * s.n_head_kv;
  return pairs * 2 * sizeof(uint16_t);
}

// Bytes of one code row (one token).
constexpr size_t kv_block_row_bytes(KvFormat f, const KvBlockShape& s) {
  return size_t(s.kv_dim()) * kv_format_bits(f) / 8;
}

// Bytes of a whole block.
constexpr size_t kv_block_bytes(KvFormat f, KvPart part, const KvBlockShape& s) {
  return kv_block_param_bytes(f, part, s) + size_t(s.n_tokens) * kv_block_row_bytes(f, s);
}

}  // namespace llmsvc::hal
