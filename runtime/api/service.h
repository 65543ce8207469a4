// SPDX-License-Identifier: Apache-2.0
// Service: one bound service (a transport) plus the bookkeeping of the handles open on
// it, so that deleting a context with an open handle is refused (busy).
//
// Shared by the service handle and every context handle opened from it, so a context
// handle stays usable even if the app unbinds first.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "runtime/transport/transport.h"

namespace llmsvc::api {

class Service {
 public:
  explicit Service(std::unique_ptr<Transport> transport) : transport_(std::move(transport)) {}

  Transport& transport() { return *transport_; }

  // Creates a context and counts one open handle on it.
  Result<std::string> create(const ContextOptions& options);
  // Forks `parent` into a new context (named `id`, "" for a fresh one) and counts one open
  // handle on it.
  Result<std::string> fork(std::string_view parent, std::string_view id);
  // Checks that `id` exists and counts one open handle on it.
  Status open(std::string_view id);
  // Uncounts one handle.
  void close(std::string_view id) noexcept;
  // Deletes `id`; busy while a handle to it is open on this service.
  Status remove(std::string_view id);
  int32_t open_handles() const;

 private:
  std::unique_ptr<Transport> transport_;
  // Held across the transport's create/check/delete so that an open and a delete of the
  // same id cannot interleave (a handle to a deleted context, or a deleted open one).
  mutable std::mutex mu_;
  std::map<std::string, int32_t, std::less<>> open_;
  int32_t n_open_ = 0;
};

}  // namespace llmsvc::api
