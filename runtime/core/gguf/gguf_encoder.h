// SPDX-License-Identifier: Apache-2.0
// Encoder: appends GGUF's little-endian encodings to a byte vector (the writer's side of Cursor).
//
// Scalars, length-prefixed strings, metadata values, the header and tensor infos. It encodes
// what it is given, checking nothing: GgufWriter validates before encoding, and the tests'
// GgufBuilder uses the same primitives to lay out deliberately malformed files.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/gguf/gguf_types.h"

namespace llmsvc::gguf {

class Encoder {
 public:
  Encoder& u8(uint8_t v) { return put(v); }
  Encoder& i8(int8_t v) { return put(static_cast<uint8_t>(v)); }
  Encoder& u16(uint16_t v) { return put(v); }
  Encoder& i16(int16_t v) { return put(static_cast<uint16_t>(v)); }
  Encoder& u32(uint32_t v) { return put(v); }
  Encoder& i32(int32_t v) { return put(static_cast<uint32_t>(v)); }
  Encoder& u64(uint64_t v) { return put(v); }
  Encoder& i64(int64_t v) { return put(static_cast<uint64_t>(v)); }
  Encoder& f32(float v) { return put(std::bit_cast<uint32_t>(v)); }
  Encoder& f64(double v) { return put(std::bit_cast<uint64_t>(v)); }
  Encoder& type(ValueType t) { return u32(static_cast<uint32_t>(t)); }
  // A GGUF string: u64 length, then the bytes.
  Encoder& str(std::string_view s) { return u64(s.size()).raw(s); }
  Encoder& raw(std::string_view s) {
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Encoder& raw(std::span<const uint8_t> s) {
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Encoder& raw(const Encoder& o) { return raw(std::span<const uint8_t>(o.b_)); }
  Encoder& zeros(size_t n) {
    b_.resize(b_.size() + n, 0);
    return *this;
  }

  // Magic, version and the two counts.
  Encoder& header(uint32_t magic, uint32_t version, uint64_t tensor_count, uint64_t kv_count) {
    return u32(magic).u32(version).u64(tensor_count).u64(kv_count);
  }
  // What follows a value's type tag: the scalar or string, or an array's element type,
  // count and elements (taken from the vector the element type selects: see Value).
  Encoder& value(const Value& v);
  // A key/value pair: the key, the type tag, the value.
  Encoder& kv(std::string_view key, const Value& v) { return str(key).type(v.type).value(v); }
  // A tensor info: name, n_dims, the dimensions, the type number and the data offset.
  Encoder& tensor_info(std::string_view name, std::span<const uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) u64(d);
    return u32(type).u64(offset);
  }

  const std::vector<uint8_t>& data() const { return b_; }
  size_t size() const { return b_.size(); }

 private:
  // Little-endian whatever the host's order.
  template <class T>
  Encoder& put(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) b_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  void scalar(ValueType t, uint64_t u, int64_t i, double f);

  std::vector<uint8_t> b_;
};

}  // namespace llmsvc::gguf
