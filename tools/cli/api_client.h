// SPDX-License-Identifier: Apache-2.0
// How run, chat and ctx reach the model: the public C API (llmsvc.h), the path every app
// takes, bound to the embedded engine or to llmsvcd (--target unix:PATH, $LLMSVC_TARGET).
// One code path for both: what the commands show is what the API gives an app.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "llmsvc/llmsvc.h"
#include "tools/cli/common.h"

namespace llmsvc::cli {

struct ServiceDeleter {
  void operator()(llmsvc_service* s) const { llmsvc_unbind(s); }
};
struct ContextDeleter {
  void operator()(llmsvc_context* c) const { llmsvc_context_close(c); }
};
using ServicePtr = std::unique_ptr<llmsvc_service, ServiceDeleter>;
using ContextPtr = std::unique_ptr<llmsvc_context, ContextDeleter>;

// --target TARGET ("embedded", "unix:PATH"; default $LLMSVC_TARGET, else embedded).
void add_target_option(CLI::App& cmd, ModelArgs& args);

// llmsvc_bind with the arguments (a spinner while an embedded engine loads its model). With a
// daemon target the model options do not apply (the daemon has its own): a note says so.
Result<ServicePtr> bind_service(const ModelArgs& args);

// The failure `st` of an llmsvc_ call, with llmsvc_last_error()'s detail.
Status api_status(llmsvc_status st);

// While alive, Ctrl-C (g_interrupted) cancels the running call on `ctx`: the signal handler
// may only set a flag, so a thread turns it into llmsvc_context_cancel (safe from any thread).
class CancelOnInterrupt {
 public:
  explicit CancelOnInterrupt(llmsvc_context* ctx);
  ~CancelOnInterrupt();
  CancelOnInterrupt(const CancelOnInterrupt&) = delete;
  CancelOnInterrupt& operator=(const CancelOnInterrupt&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace llmsvc::cli
