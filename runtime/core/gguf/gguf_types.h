// SPDX-License-Identifier: Apache-2.0
// GGUF value types and GGML tensor types, with per-type block geometry and tensor sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"

namespace llmsvc::gguf {

inline constexpr uint32_t kGgufMagic = 0x46554747;     // "GGUF" read as a little-endian u32
inline constexpr uint32_t kGgufDefaultAlignment = 32;  // when general.alignment is absent

// Metadata value types as stored in the file.
enum class ValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

// A valid value type number, and the classes of value types (bool is no integer here).
constexpr bool is_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::f64); }
constexpr bool is_unsigned_int(ValueType t) {
  return t == ValueType::u8 || t == ValueType::u16 || t == ValueType::u32 || t == ValueType::u64;
}
constexpr bool is_signed_int(ValueType t) {
  return t == ValueType::i8 || t == ValueType::i16 || t == ValueType::i32 || t == ValueType::i64;
}
constexpr bool is_float(ValueType t) { return t == ValueType::f32 || t == ValueType::f64; }

// GGML tensor element types (numbering from ggml.h). Only those named are known.
enum class TensorType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  // Known to the file format (so files using them parse and are refused by name later).
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct TypeTraits {
  std::string_view name;
  uint32_t block_elems;  // elements per block (1 for plain floats)
  uint32_t block_bytes;  // bytes per block
};

// Geometry of a tensor type; nullptr for a type number we do not know.
const TypeTraits* type_traits(uint32_t type);

struct TensorSize {
  uint64_t elems{};  // elements in all
  uint64_t bytes{};  // bytes of the data
};
// The size of a tensor of `type` with dimensions `ne` (ne[0] the row, 1..4 of them): the one
// rule the reader checks files by and the writer checks tensors by. Code::invalid_argument
// naming the first problem: the number of dimensions, a zero dimension, an element count or
// byte size over 64 bits, an unknown type, or ne[0] not a whole number of the type's blocks.
Result<TensorSize> tensor_size(uint32_t type, std::span<const uint64_t> ne);

// Name of a value type ("u32", "string", ...) or "unknown".
std::string_view value_type_name(uint32_t type);

}  // namespace llmsvc::gguf
