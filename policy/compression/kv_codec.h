// SPDX-License-Identifier: Apache-2.0
// KV block codecs: one layer's keys or values of one chunk, between f16 and the integer
// formats of hal/kv_format.h (keys channel-wise, values token-wise per head, 8/4/3/2 bits).
//
// Encoding: asymmetric, round to nearest. For each group (a key channel over the block's
// tokens, or one token's head_dim values of one head) min = the group's smallest value and
// scale = (max - min) / (2^B - 1) rounded UP to f16, so the top code reaches max; codes are
// round((x - min) / scale) computed against these stored f16 values, so decoding is
// min + scale * code exactly as stored. Hence |x - decoded| <= scale / 2 (plus f32 rounding),
// and dequantize() adds f16's rounding of the decoded value. A constant group has scale 0 and
// all codes 0. -0 is stored as +0. Non-finite inputs never widen a group's range: +inf encodes
// as the top code (code 0 in a constant group), -inf and NaN as code 0; a group with no finite
// value decodes to 0.
//
// Preconditions (asserted in debug builds): shape.kv_dim() % 8 == 0, n_tokens >= 0, and
// buffers of kv_block_bytes(format, part, shape) bytes (src and dst must not overlap).
// Single-threaded; a block of 16 tokens x 192 channels takes about a microsecond.
#pragma once

#include <cstdint>

#include "hal/kv_format.h"

namespace llmsvc::policy {

// Encodes an f16 block (n_tokens rows of kv_dim halves, [token][channel]) into `to` (q8/q4/q3/q2).
void kv_quantize(hal::KvPart part, const hal::KvBlockShape& shape, const uint16_t* src, hal::KvFormat to, void* dst);

// Re-encodes a q block into another q format. Towards fewer bits (8 -> 4, 8 -> 2, 4 -> 2:
// what compression does) it runs fused, without an f16 copy of the block; towards more bits
// it goes through one. Either way the result is byte for byte kv_quantize(kv_dequantize(src));
// from == to copies.
void kv_requantize(hal::KvPart part, const hal::KvBlockShape& shape, hal::KvFormat from, const void* src,
                   hal::KvFormat to, void* dst);

// Decodes a block of any format into f16 rows: f16(min + scale * code), saturated to
// +-65504 (a top code may decode a little above max); f16 copies.
void kv_dequantize(hal::KvPart part, const hal::KvBlockShape& shape, hal::KvFormat from, const void* src,
                   uint16_t* dst);

}  // namespace llmsvc::policy
