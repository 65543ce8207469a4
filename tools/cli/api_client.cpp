// SPDX-License-Identifier: Apache-2.0
// The CLI's binding through llmsvc.h: target option, bind with a spinner, status, Ctrl-C.
#include "tools/cli/api_client.h"

#include <chrono>
#include <cstdio>

#include "runtime/api/options.h"
#include "tools/cli/progress.h"

namespace llmsvc::cli {

void add_target_option(CLI::App& cmd, ModelArgs& args) {
  cmd.add_option("--target", args.target,
                 "where the model runs: embedded, or unix:PATH for the llmsvcd daemon listening on PATH "
                 "(default: $LLMSVC_TARGET, else embedded)");
}

Result<ServicePtr> bind_service(const ModelArgs& args) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = args.target.empty() ? nullptr : args.target.c_str();
  o.model_path = args.model.empty() ? nullptr : args.model.c_str();
  o.n_threads = args.threads;
  o.n_ctx = args.n_ctx;
  o.state_dir = args.state_dir.empty() ? nullptr : args.state_dir.c_str();
  o.device = args.device.empty() ? nullptr : args.device.c_str();
  o.adapters = args.adapters.empty() ? nullptr : args.adapters.c_str();
  // The reader llmsvc_bind uses, run first only to know what it will bind to.
  auto config = api::read_bind_options(&o);
  if (!config.ok()) return config.status();
  std::unique_ptr<LoadProgress> progress;
  if (config->target == api::TargetKind::embedded) {
    progress = std::make_unique<LoadProgress>("loading " + config->engine.model_path);
  } else if (!args.model.empty() || args.threads != 0 || args.n_ctx != 0 || !args.state_dir.empty() ||
             !args.device.empty() || !args.adapters.empty()) {
    std::fprintf(stderr,
                 "llmsvc: note: --model, --threads, --ctx, --device, --lora and --state-dir are ignored: the daemon at "
                 "%s has its own\n",
                 config->socket_path.c_str());
  }
  llmsvc_service* svc = nullptr;
  const llmsvc_status st = llmsvc_bind(&o, &svc);
  if (st != LLMSVC_OK) return api_status(st);
  return ServicePtr(svc);
}

Status api_status(llmsvc_status st) {
  // llmsvc_status values equal Code values (base/status.h).
  return st == LLMSVC_OK ? Status::Ok() : Status(static_cast<Code>(st), llmsvc_last_error());
}

CancelOnInterrupt::CancelOnInterrupt(llmsvc_context* ctx) {
  thread_ = std::thread([this, ctx] {
    while (!stop_.load()) {
      // Repeated while the flag is up: llmsvc_call forgets a cancel that came before it
      // started, so one sent just before would be lost.
      if (g_interrupted.load()) (void)llmsvc_context_cancel(ctx);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
}

CancelOnInterrupt::~CancelOnInterrupt() {
  stop_.store(true);
  thread_.join();
}

}  // namespace llmsvc::cli
