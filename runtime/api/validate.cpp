// SPDX-License-Identifier: Apache-2.0
// Validation of strings crossing the C boundary.
#include "runtime/api/validate.h"

#include <cstring>
#include <string>

#include "runtime/core/persist/state_dir.h"
#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc::api {

Status check_utf8(const char* text, size_t len, std::string_view what) {
  if (text == nullptr) {
    if (len == 0) return Status::Ok();
    return {Code::invalid_argument, std::string(what) + " is NULL but its length is " + std::to_string(len)};
  }
  if (!is_valid_utf8(std::string_view(text, len)))
    return {Code::invalid_utf8, std::string(what) + " is not valid UTF-8"};
  return Status::Ok();
}

Status check_cstr(const char* text, std::string_view what) {
  if (text == nullptr) return {Code::invalid_argument, std::string(what) + " is NULL"};
  return check_utf8(text, std::strlen(text), what);
}

Status check_id(const char* id) {
  if (id == nullptr) return {Code::invalid_argument, "context id is NULL"};
  // Bounded scan: an id never needs more than kMaxIdBytes + 1 bytes to be judged.
  size_t len = strnlen(id, kMaxIdBytes + 1);
  std::string_view v(id, len);
  if (len == 0) return {Code::invalid_argument, "context id is empty"};
  if (len > kMaxIdBytes) return {Code::invalid_argument, "context id is longer than 64 bytes"};
  if (!is_valid_utf8(v)) return {Code::invalid_utf8, "context id is not valid UTF-8"};
  for (char c : v) {
    if (!persist::is_context_id_char(c))
      return {Code::invalid_argument, "context id '" + std::string(v) + "' has a character outside [A-Za-z0-9._-]"};
  }
  // Ids name files in the service's state directory; these two would name directories.
  if (v == "." || v == "..") return {Code::invalid_argument, "context id may not be '.' or '..'"};
  return Status::Ok();
}

}  // namespace llmsvc::api
