// SPDX-License-Identifier: Apache-2.0
// Validation of strings crossing the C boundary: UTF-8 text and context ids.
#pragma once

#include <cstddef>
#include <string_view>

#include "base/status.h"

namespace llmsvc::api {

inline constexpr size_t kMaxIdBytes = 64;

// `text` of `len` bytes must be valid UTF-8; NULL only with len 0. `what` names the
// argument in the message ("prompt").
Status check_utf8(const char* text, size_t len, std::string_view what);
// Same for a NUL-terminated string; NULL is refused.
Status check_cstr(const char* text, std::string_view what);
// A context id: 1..64 bytes of [A-Za-z0-9._-], not "." or "..". invalid_utf8 when the
// bytes are not UTF-8 at all, invalid_argument otherwise.
Status check_id(const char* id);

}  // namespace llmsvc::api
