// SPDX-License-Identifier: Apache-2.0
// GGUF / GGML block layouts of the quantized weight types, byte for byte as stored in the file:
// a fact of the file format, so the HAL's (every backend reads or repacks these blocks).
//
// Scales are IEEE fp16 bit patterns (hal/host/fp16.h converts them on the CPU). Every struct has 2-byte alignment and no
// padding, so a row of blocks can be read in place from a GGUF tensor (whose data is aligned).
#pragma once

#include <cstdint>

namespace llmsvc::hal {

constexpr int kQK = 32;          // elements per block of the legacy types (Q4_0 ... Q8_0)
constexpr int kQK_K = 256;       // elements per K-quant superblock
constexpr int kKScaleSize = 12;  // packed 6-bit scales + mins of Q4_K / Q5_K

// x = d * (q - 8); qs[j] holds element j (low nibble) and element j + 16 (high nibble).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// x = d * q + m.
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[kQK / 2];
};
// x = d * (q - 16); bit j of qh (little-endian u32) is bit 4 of element j.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = d * q + m, q 5-bit as in Q5_0.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = d * q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// 8 sub-blocks of 32: x = d * sc[j] * q - dmin * mn[j], with 6-bit sc/mn packed in scales.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
// As Q4_K with a fifth bit per element in qh.
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q 6-bit (4 low bits in ql, 2 high in qh).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K superblock.
inline void k_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *mn = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace llmsvc::hal
