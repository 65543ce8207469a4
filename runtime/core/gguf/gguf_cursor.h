// SPDX-License-Identifier: Apache-2.0
// Cursor: a bounds-checked little-endian reader over a byte image (internal to the reader).
//
// Every read checks the remaining bytes first, so a truncated or lying file can only
// produce a failed read, never an out-of-bounds access.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace llmsvc::gguf {

class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  // Reads one little-endian scalar; false (and no advance) if fewer bytes remain.
  template <class T>
  bool read(T& out) {
    static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 1 || sizeof(T) == 2 ||
                                                      sizeof(T) == 4 || sizeof(T) == 8));
    if (remaining() < sizeof(T)) return false;
    std::memcpy(&out, base_ + pos_, sizeof(T));
    if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) out = byteswap(out);
    pos_ += sizeof(T);
    return true;
  }

  // A view of the next `n` bytes; false (and no advance) if fewer remain.
  bool read_bytes(uint64_t n, std::string_view& out) {
    if (remaining() < n) return false;
    out = std::string_view(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return true;
  }

 private:
  template <class T>
  static T byteswap(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    for (size_t i = 0; i < sizeof(T) / 2; ++i) std::swap(b[i], b[sizeof(T) - 1 - i]);
    std::memcpy(&v, b, sizeof(T));
    return v;
  }

  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

}  // namespace llmsvc::gguf
