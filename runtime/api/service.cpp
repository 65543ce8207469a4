// SPDX-License-Identifier: Apache-2.0
// Service: the transport plus open-handle bookkeeping.
#include "runtime/api/service.h"

namespace llmsvc::api {

Result<std::string> Service::create(const ContextOptions& options) {
  std::lock_guard lock(mu_);
  auto id = transport_->create_context(options);
  if (!id.ok()) return id;
  auto it = open_.try_emplace(*id, 0).first;  // may throw bad_alloc: the context exists, unopened
  ++it->second;
  ++n_open_;
  return id;
}

Result<std::string> Service::fork(std::string_view parent, std::string_view id) {
  std::lock_guard lock(mu_);
  auto made = transport_->fork_context(parent, id);
  if (!made.ok()) return made;
  auto it = open_.try_emplace(*made, 0).first;
  ++it->second;
  ++n_open_;
  return made;
}

Status Service::open(std::string_view id) {
  std::lock_guard lock(mu_);
  LLMSVC_RETURN_IF_ERROR(transport_->open_context(id));
  auto it = open_.find(id);
  if (it == open_.end()) it = open_.emplace(std::string(id), 0).first;
  ++it->second;
  ++n_open_;
  return Status::Ok();
}

void Service::close(std::string_view id) noexcept {
  std::lock_guard lock(mu_);
  auto it = open_.find(id);
  if (it == open_.end()) return;
  --n_open_;
  if (--it->second == 0) {
    open_.erase(it);
    transport_->close_context(id);
  }
}

Status Service::remove(std::string_view id) {
  std::lock_guard lock(mu_);
  if (open_.contains(id)) {
    return {Code::busy, "context '" + std::string(id) + "' has an open handle; close it before deleting"};
  }
  return transport_->delete_context(id);
}

int32_t Service::open_handles() const {
  std::lock_guard lock(mu_);
  return n_open_;
}

}  // namespace llmsvc::api
