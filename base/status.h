// SPDX-License-Identifier: Apache-2.0
// Status and Result<T>: how every layer below the C API reports failure (no exceptions).
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace llmsvc {

// Mirrors llmsvc_status values one to one so the C API maps them without a table.
enum class Code : int {
  ok = 0,
  invalid_argument = 1,
  invalid_utf8 = 2,
  model_not_found = 3,
  model_invalid = 4,
  unsupported = 5,
  out_of_memory = 6,
  context_overflow = 7,
  not_found = 8,
  exists = 9,
  cancelled = 10,
  busy = 11,
  io = 12,
  unavailable = 13,
  quota_exceeded = 14,
  internal = 15,
  model_mismatch = 16,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == Code::ok; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::ok;
  std::string message_;
};

// A value or the Status explaining why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}    // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  Status status() const { return ok() ? Status::Ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace llmsvc

// Propagate a failed Status from an expression returning Status.
#define LLMSVC_RETURN_IF_ERROR(expr)              \
  do {                                            \
    ::llmsvc::Status llmsvc_status_tmp_ = (expr); \
    if (!llmsvc_status_tmp_.ok()) return llmsvc_status_tmp_; \
  } while (0)
