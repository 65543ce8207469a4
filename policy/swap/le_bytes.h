// SPDX-License-Identifier: Apache-2.0
// Little-endian fixed-width integers in byte buffers: the on-disk byte order of chunk files,
// whatever the host's. Callers check bounds; these only move bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llmsvc::policy::le {

template <class T>
inline T load(const uint8_t* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v = static_cast<T>(v | static_cast<T>(T{p[i]} << (8 * i)));
  return v;
}

template <class T>
inline void store(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace llmsvc::policy::le
