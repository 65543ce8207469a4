// SPDX-License-Identifier: Apache-2.0
// GgufBuilder: a tiny GGUF byte-image writer for tests, able to write malformed files too.
//
// Valid images come from kv()/tensor(); malformed ones from overriding the header fields,
// writing raw entries (kv_raw/tensor_raw) or explicit tensor offsets. Bytes are encoded with
// the runtime's Encoder (gguf_encoder.h, what GgufWriter writes with), which checks nothing;
// tensor sizes come from the builder's own table, not the reader's, so a mistake in that
// table cannot hide.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "runtime/core/gguf/gguf_encoder.h"
#include "runtime/core/gguf/gguf_types.h"

namespace llmsvc::gguf::testing {

// The extremes of the 64-bit values, which the format must carry exactly.
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

// Little-endian byte sink: the runtime writer's encoder, so files are laid out by one code.
using Bytes = Encoder;

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
  uint32_t magic = kGgufMagic;
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
    e.tensor_info(name, ne, type, offset);
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
    out.header(magic, version, tensor_count.value_or(tensors_.size()), kv_count.value_or(kvs_.size()));
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
