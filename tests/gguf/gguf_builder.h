// SPDX-License-Identifier: Apache-2.0
// GgufBuilder: a tiny GGUF byte-image writer for tests, able to write malformed files too.
//
// Valid images come from kv()/tensor(); malformed ones from overriding the header fields,
// writing raw entries (kv_raw/tensor_raw) or explicit tensor offsets. It deliberately
// does not use the reader's own tables, so a shared mistake cannot hide.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/gguf/gguf_types.h"

namespace llmsvc::gguf::testing {

// Little-endian byte sink.
class Bytes {
 public:
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& i8(int8_t v) { return put(v); }
  Bytes& u16(uint16_t v) { return put(v); }
  Bytes& i16(int16_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& i32(int32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& i64(int64_t v) { return put(v); }
  Bytes& f32(float v) { return put(v); }
  Bytes& f64(double v) { return put(v); }
  Bytes& type(ValueType t) { return u32(static_cast<uint32_t>(t)); }
  // A GGUF string: u64 length, then the bytes.
  Bytes& str(std::string_view s) {
    u64(s.size());
    return raw(s);
  }
  Bytes& raw(std::string_view s) {
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const Bytes& o) {
    b_.insert(b_.end(), o.b_.begin(), o.b_.end());
    return *this;
  }
  Bytes& zeros(size_t n) {
    b_.resize(b_.size() + n, 0);
    return *this;
  }
  const std::vector<uint8_t>& data() const { return b_; }
  size_t size() const { return b_.size(); }

 private:
  template <class T>
  Bytes& put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));  // tests run on little-endian hosts only
    b_.insert(b_.end(), tmp, tmp + sizeof(T));
    return *this;
  }
  std::vector<uint8_t> b_;
};

// Bytes of a tensor of `type` and `ne` for the few types tests use; 0 when not listed.
inline uint64_t test_tensor_bytes(uint32_t type, const std::vector<uint64_t>& ne) {
  uint64_t blk = 0, bytes = 0;
  switch (type) {
    case 0: blk = 1; bytes = 4; break;      // F32
    case 1: blk = 1; bytes = 2; break;      // F16
    case 3: blk = 32; bytes = 20; break;    // Q4_1
    case 8: blk = 32; bytes = 34; break;    // Q8_0
    case 12: blk = 256; bytes = 144; break; // Q4_K
    default: return 0;
  }
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  return n / blk * bytes;
}

// The data section byte at `pos`: a pattern tests can check tensor pointers against.
inline uint8_t test_data_byte(uint64_t pos) { return static_cast<uint8_t>(pos * 7 + 1); }

class GgufBuilder {
 public:
  uint32_t magic = 0x46554747;  // "GGUF"
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count;  // set to lie about the counts
  std::optional<uint64_t> kv_count;
  uint32_t alignment = 32;               // padding before the data section and between tensors
  std::optional<uint64_t> data_size;     // set to force the data section length

  // One key/value: the key, the type, then `payload` as given.
  GgufBuilder& kv(std::string_view key, ValueType t, const Bytes& payload) {
    Bytes e;
    e.str(key).type(t).raw(payload);
    return kv_raw(e);
  }
  GgufBuilder& kv_u32(std::string_view key, uint32_t v) { return kv(key, ValueType::u32, Bytes().u32(v)); }
  GgufBuilder& kv_string(std::string_view key, std::string_view v) { return kv(key, ValueType::string, Bytes().str(v)); }
  GgufBuilder& kv_raw(const Bytes& entry) {
    kvs_.push_back(entry);
    return *this;
  }

  // A tensor placed after the previous ones at the next aligned offset.
  GgufBuilder& tensor(std::string_view name, uint32_t type, const std::vector<uint64_t>& ne) {
    const uint64_t off = (data_end_ + alignment - 1) / alignment * alignment;
    return tensor_at(name, type, ne, off);
  }
  // A tensor at an explicit offset; the data section grows to cover it when its size is known.
  GgufBuilder& tensor_at(std::string_view name, uint32_t type, const std::vector<uint64_t>& ne, uint64_t offset) {
    Bytes e;
    e.str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) e.u64(d);
    e.u32(type).u64(offset);
    const uint64_t end = offset + test_tensor_bytes(type, ne);
    if (end > data_end_ && end < (uint64_t{1} << 24)) data_end_ = end;
    return tensor_raw(e);
  }
  GgufBuilder& tensor_raw(const Bytes& entry) {
    tensors_.push_back(entry);
    return *this;
  }

  std::vector<uint8_t> build() const {
    Bytes out;
    out.u32(magic).u32(version);
    out.u64(tensor_count.value_or(tensors_.size()));
    out.u64(kv_count.value_or(kvs_.size()));
    for (const Bytes& e : kvs_) out.raw(e);
    for (const Bytes& e : tensors_) out.raw(e);
    if (tensors_.empty() && !data_size) return out.data();
    while (out.size() % alignment != 0) out.u8(0);
    const uint64_t n = data_size.value_or(data_end_);
    for (uint64_t k = 0; k < n; ++k) out.u8(test_data_byte(k));
    return out.data();
  }

 private:
  std::vector<Bytes> kvs_;
  std::vector<Bytes> tensors_;
  uint64_t data_end_ = 0;
};

}  // namespace llmsvc::gguf::testing
