// SPDX-License-Identifier: Apache-2.0
// The opaque C handle types: what llmsvc_service* and llmsvc_context* point to.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "llmsvc/llmsvc.h"
#include "runtime/api/service.h"

struct llmsvc_service {
  std::shared_ptr<llmsvc::api::Service> service;
};

struct llmsvc_context {
  std::shared_ptr<llmsvc::api::Service> service;
  std::string id;
  // The running call's cancel flag (CallParams::cancel): set by llmsvc_context_cancel or
  // from any thread, cleared when a call starts.
  std::atomic<bool> cancel{false};
};
