// SPDX-License-Identifier: Apache-2.0
// Metadata value encoding: the inverse of the reader's read_value (gguf_file.cpp).
#include "runtime/core/gguf/gguf_encoder.h"

namespace llmsvc::gguf {

Encoder& Encoder::value(const Value& v) {
  switch (v.type) {
    case ValueType::string: return str(v.s);
    case ValueType::array: break;
    default:
      scalar(v.type, v.u, v.i, v.f);
      return *this;
  }
  type(v.elem_type);
  switch (v.elem_type) {
    case ValueType::string:
      u64(v.strs.size());
      for (const std::string& s : v.strs) str(s);
      break;
    case ValueType::array:
      u64(v.arr.size());
      for (const Value& a : v.arr) value(a);
      break;
    case ValueType::f32: case ValueType::f64:
      u64(v.floats.size());
      for (double x : v.floats) scalar(v.elem_type, 0, 0, x);
      break;
    case ValueType::i8: case ValueType::i16: case ValueType::i32: case ValueType::i64:
      u64(v.ints.size());
      for (int64_t x : v.ints) scalar(v.elem_type, 0, x, 0);
      break;
    default:  // unsigned ints and bool
      u64(v.uints.size());
      for (uint64_t x : v.uints) scalar(v.elem_type, x, 0, 0);
      break;
  }
  return *this;
}

void Encoder::scalar(ValueType t, uint64_t u, int64_t i, double f) {
  switch (t) {
    case ValueType::u8: case ValueType::boolean: u8(static_cast<uint8_t>(u)); break;
    case ValueType::i8: i8(static_cast<int8_t>(i)); break;
    case ValueType::u16: u16(static_cast<uint16_t>(u)); break;
    case ValueType::i16: i16(static_cast<int16_t>(i)); break;
    case ValueType::u32: u32(static_cast<uint32_t>(u)); break;
    case ValueType::i32: i32(static_cast<int32_t>(i)); break;
    case ValueType::u64: u64(u); break;
    case ValueType::i64: i64(i); break;
    case ValueType::f32: f32(static_cast<float>(f)); break;
    case ValueType::f64: f64(f); break;
    case ValueType::string: case ValueType::array: break;  // not scalars: value() handles them
  }
}

}  // namespace llmsvc::gguf
