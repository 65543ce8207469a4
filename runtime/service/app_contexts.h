// SPDX-License-Identifier: Apache-2.0
// AppContexts: the shared Engine as each app sees it. Every id an app names is resolved in
// that app's scope ("uid-<uid>/<id>", see AppIdentity::scope), so an app can list, open,
// describe, call and delete only its own contexts; their files live in the app's own 0700
// directory (<state>/contexts/uid-<uid>/). Also counts, across every connection, which
// contexts an app holds open (a delete of one is busy) and the app's call figures (STATS).
//
// Quotas (AppQuotas): the contexts an app holds and the tokens one of them holds are checked
// here; its calls in flight by the Server, which queues them.
//
// Thread-safe. Messages from the engine are given back without the scope prefix.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/core/engine/engine.h"
#include "runtime/service/app_identity.h"
#include "runtime/service/app_quotas.h"

namespace llmsvc::service {

class AppContexts {
 public:
  explicit AppContexts(Engine& engine, QuotaTable quotas = {}) : engine_(engine), quotas_(std::move(quotas)) {}

  Engine& engine() { return engine_; }

  // New context (options.id empty: a generated one); counts one open handle. Returns the id.
  Result<std::string> create(const AppIdentity& app, ContextOptions options);
  // Forks the app's context `parent` into a new one (`id` empty: a generated one), counted
  // against the contexts quota as a new one; counts one open handle. Returns the id.
  Result<std::string> fork(const AppIdentity& app, std::string_view parent, std::string_view id);
  // Opens an existing context; counts one open handle.
  Status open(const AppIdentity& app, std::string_view id);
  // Uncounts one open handle; true when it was the app's last on that context.
  bool close(const AppIdentity& app, std::string_view id);
  // busy while any connection of the app holds it open.
  Status remove(const AppIdentity& app, std::string_view id);
  Result<std::vector<std::string>> list(const AppIdentity& app) const;
  Result<ContextInfo> info(const AppIdentity& app, std::string_view id) const;
  Status call(const AppIdentity& app, std::string_view id, std::string_view prompt, const CallParams& params,
              const PieceFn& on_piece, CallStats* stats);
  // A context's conversation (Engine::append_messages...), the app's context_tokens quota
  // applied to what an append adds.
  Status append_messages(const AppIdentity& app, std::string_view id, std::span<const ChatMessage> messages);
  Status truncate_messages(const AppIdentity& app, std::string_view id, size_t n);
  Result<std::vector<ChatMessage>> messages(const AppIdentity& app, std::string_view id, size_t first, size_t max) const;
  // The app's figures: its contexts, calls, tokens and switch-ins, its resident KV. The
  // device's: the model's weights, and the KV memory every app shares (peak, evictions,
  // swap-out): one budget and one swap writer serve all apps, and the engine counts them
  // only as a whole.
  Result<EngineStats> stats(const AppIdentity& app) const;

 private:
  Result<std::string> key(const AppIdentity& app, std::string_view id) const;
  // quota_exceeded when the app holds its quota of contexts (mu_ held).
  Status check_contexts_quota_locked(const AppIdentity& app) const;
  // The engine's message as the app may see it: no scope prefix, no server path.
  Status unscoped(const AppIdentity& app, Status s) const;

  Engine& engine_;
  const QuotaTable quotas_;
  mutable std::mutex mu_;  // open_, figures_; held across open/delete so they cannot interleave
  std::map<std::string, int, std::less<>> open_;  // key -> handles open on any connection
  std::map<uid_t, EngineStats> figures_;  // per app: its calls and their figures (source `call`) only
};

}  // namespace llmsvc::service
