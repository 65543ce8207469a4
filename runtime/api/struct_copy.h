// SPDX-License-Identifier: Apache-2.0
// Copying versioned C structs (those starting with struct_size) across the boundary, so that
// an older or a newer caller's struct is read and written only within its own struct_size.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>

#include "base/status.h"
#include "runtime/api/options.h"

namespace llmsvc::api {

// Copies the caller's struct over our defaults (init): a newer caller's unknown tail is cut
// off, and an older caller keeps our defaults for the fields it lacks. NULL: the defaults.
template <class T>
Result<T> copy_in(const T* in, size_t v1_size, const char* what) {
  T local;
  init(&local);
  if (in == nullptr) return local;
  if (in->struct_size < v1_size) {
    return Status(Code::invalid_argument, std::string(what) + ".struct_size is " + std::to_string(in->struct_size) +
                                              ", at least " + std::to_string(v1_size) + " expected (call " + what +
                                              "_init)");
  }
  std::memcpy(&local, in, std::min(in->struct_size, sizeof(T)));
  return local;
}

// Results go out through a full local copy trimmed to the caller's size, so a newer
// library never writes past an older caller's struct.
template <class T>
void copy_out(const T& local, T* out) {
  const size_t n = std::min(out->struct_size, sizeof(T));
  const size_t skip = sizeof(out->struct_size);  // the caller's own size stays as it is
  std::memcpy(reinterpret_cast<char*>(out) + skip, reinterpret_cast<const char*>(&local) + skip, n - skip);
}

}  // namespace llmsvc::api
