// SPDX-License-Identifier: Apache-2.0
// fp16 / bf16 <-> fp32 conversion: exact scalar helpers (header-only) and SIMD row converters.
//
// Scalar conversions are bit-exact IEEE: fp32 -> fp16 rounds to nearest even, overflows to
// inf and keeps NaN a (quiet) NaN; fp32 -> bf16 rounds to nearest even like ggml. The row
// converters give the same results as the scalar ones, element for element.
#pragma once

#include <cstdint>
#include <cstring>

namespace llmsvc::hal {

namespace fp16_detail {
inline uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace fp16_detail

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return fp16_detail::from_bits(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24, exact in fp32.
    const float v = static_cast<float>(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return fp16_detail::from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t fp32_to_fp16(float f) {
  uint32_t x = fp16_detail::bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((x >> 13) & 0x3ffu);  // NaN stays NaN
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (x >= 0x38800000u) {                        // normal fp16 (>= 2^-14): rebias, round to nearest even
    const uint32_t r = x - 0x38000000u;
    return sign | static_cast<uint16_t>((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
  }
  if (x <= 0x33000000u) return sign;  // <= 2^-25 rounds to zero (the tie goes to even zero)
  // Subnormal fp16: value / 2^-24 rounded to nearest even.
  const uint32_t e = x >> 23;
  const uint32_t m = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  const uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  return sign | static_cast<uint16_t>(q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u));
}

inline float bf16_to_fp32(uint16_t h) { return fp16_detail::from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = fp16_detail::bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Row converters (SIMD, dispatched at run time). n may be any count; buffers may be unaligned.
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);
void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n);

}  // namespace llmsvc::hal
