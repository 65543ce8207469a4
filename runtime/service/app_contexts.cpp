// SPDX-License-Identifier: Apache-2.0
// AppContexts: per-app scopes over the shared engine.
#include "runtime/service/app_contexts.h"

#include <algorithm>
#include <climits>

#include "runtime/core/persist/state_dir.h"

namespace llmsvc::service {

Result<std::string> AppContexts::key(const AppIdentity& app, std::string_view id) const {
  if (!persist::valid_context_id(id))
    return Status(Code::invalid_argument, "context id must be 1..64 characters of [A-Za-z0-9._-], not '.' or '..'");
  return app.scope() + "/" + std::string(id);
}

namespace {

void erase_all(std::string& m, const std::string& what, const std::string& with = {}) {
  if (what.empty()) return;
  for (size_t pos = 0; (pos = m.find(what, pos)) != std::string::npos; pos += with.size()) m.replace(pos, what.size(), with);
}

}  // namespace

Status AppContexts::unscoped(const AppIdentity& app, Status s) const {
  if (s.ok()) return s;
  // An app sees its own ids and files by their names inside its namespace, and never where
  // the daemon keeps them: the state root's path goes first (with the app's scope after it,
  // "<root>/contexts/uid-N/ID/history.log" reads "ID/history.log", as does the name relative
  // to the root that the state files' own errors use), then the scope alone.
  const std::string& root = engine_.state_root();
  const std::string scoped = "contexts/" + app.scope() + "/";
  std::string m = s.message();
  if (!root.empty()) erase_all(m, root + "/" + scoped);
  erase_all(m, scoped);
  if (!root.empty()) erase_all(m, root, "<state>");
  erase_all(m, app.scope() + "/");
  return Status(s.code(), std::move(m));
}

Status AppContexts::check_contexts_quota_locked(const AppIdentity& app) const {
  const uint32_t quota = quotas_.of(app.uid).contexts;
  if (quota == 0) return Status::Ok();
  auto held = engine_.list_scope(app.scope());
  if (!held.ok()) return held.status();
  if (held->size() >= quota)
    return Status(Code::quota_exceeded, "this app holds " + std::to_string(held->size()) +
                                            " contexts, its quota; delete one before creating another");
  return Status::Ok();
}

Result<std::string> AppContexts::create(const AppIdentity& app, ContextOptions options) {
  if (options.id.empty()) {
    options.id = app.scope() + "/";  // the engine generates an id in the scope
  } else {
    auto k = key(app, options.id);
    if (!k.ok()) return k.status();
    options.id = *k;
  }
  std::lock_guard lock(mu_);  // a second create cannot pass the quota between the count and the make
  LLMSVC_RETURN_IF_ERROR(check_contexts_quota_locked(app));
  auto made = engine_.create_context(options);
  if (!made.ok()) return unscoped(app, made.status());
  ++open_[*made];
  return made->substr(app.scope().size() + 1);
}

Result<std::string> AppContexts::fork(const AppIdentity& app, std::string_view parent, std::string_view id) {
  auto from = key(app, parent);
  if (!from.ok()) return from.status();
  std::string to = app.scope() + "/";  // the engine generates an id in the scope
  if (!id.empty()) {
    auto k = key(app, id);
    if (!k.ok()) return k.status();
    to = *k;
  }
  std::lock_guard lock(mu_);  // as create: the quota's count and the make together
  LLMSVC_RETURN_IF_ERROR(check_contexts_quota_locked(app));
  auto made = engine_.fork_context(*from, to);
  if (!made.ok()) return unscoped(app, made.status());
  ++open_[*made];
  return made->substr(app.scope().size() + 1);
}

Status AppContexts::open(const AppIdentity& app, std::string_view id) {
  auto k = key(app, id);
  if (!k.ok()) return k.status();
  std::lock_guard lock(mu_);
  LLMSVC_RETURN_IF_ERROR(unscoped(app, engine_.open_context(*k)));
  ++open_[*k];
  return Status::Ok();
}

bool AppContexts::close(const AppIdentity& app, std::string_view id) {
  auto k = key(app, id);
  if (!k.ok()) return false;
  std::lock_guard lock(mu_);
  auto it = open_.find(*k);
  if (it == open_.end() || --it->second > 0) return false;
  open_.erase(it);
  return true;
}

Status AppContexts::remove(const AppIdentity& app, std::string_view id) {
  auto k = key(app, id);
  if (!k.ok()) return k.status();  // as open and info answer it (and the id is not echoed)
  std::lock_guard lock(mu_);
  if (open_.count(*k))
    return Status(Code::busy, "context '" + std::string(id) + "' has an open handle; close it before deleting");
  return unscoped(app, engine_.delete_context(*k));
}

Result<std::vector<std::string>> AppContexts::list(const AppIdentity& app) const {
  return engine_.list_scope(app.scope());
}

Result<ContextInfo> AppContexts::info(const AppIdentity& app, std::string_view id) const {
  auto k = key(app, id);
  if (!k.ok()) return k.status();
  auto info = engine_.context_info(*k);
  if (!info.ok()) return unscoped(app, info.status());
  info->id = std::string(id);
  return info;
}

Status AppContexts::call(const AppIdentity& app, std::string_view id, std::string_view prompt,
                         const CallParams& params, const PieceFn& on_piece, CallStats* stats) {
  auto k = key(app, id);
  if (!k.ok()) return k.status();
  CallParams p = params;
  const uint32_t quota = quotas_.of(app.uid).context_tokens;
  if (quota > 0 && (p.max_context_tokens <= 0 || static_cast<uint32_t>(p.max_context_tokens) > quota))
    p.max_context_tokens = static_cast<int32_t>(quota);
  Status s = unscoped(app, engine_.call(*k, prompt, p, on_piece, stats));
  std::lock_guard lock(mu_);
  EngineStats& f = figures_[app.uid];
  f.calls++;
  add_call_figures(f, *stats);
  return s;
}

Status AppContexts::append_messages(const AppIdentity& app, std::string_view id, std::span<const ChatMessage> messages) {
  auto k = key(app, id);
  if (!k.ok()) return k.status();
  const uint32_t quota = quotas_.of(app.uid).context_tokens;
  return unscoped(app, engine_.append_messages(*k, messages, static_cast<int32_t>(std::min<uint32_t>(quota, INT32_MAX))));
}

Status AppContexts::truncate_messages(const AppIdentity& app, std::string_view id, size_t n) {
  auto k = key(app, id);
  if (!k.ok()) return k.status();
  return unscoped(app, engine_.truncate_messages(*k, n));
}

Result<std::vector<ChatMessage>> AppContexts::messages(const AppIdentity& app, std::string_view id, size_t first,
                                                       size_t max) const {
  auto k = key(app, id);
  if (!k.ok()) return k.status();
  auto m = engine_.messages(*k, first, max);
  if (!m.ok()) return unscoped(app, m.status());
  return m;
}

Result<EngineStats> AppContexts::stats(const AppIdentity& app) const {
  auto ids = list(app);
  if (!ids.ok()) return ids.status();
  const EngineStats device = engine_.stats();
  EngineStats s;
  {
    std::lock_guard lock(mu_);
    if (auto it = figures_.find(app.uid); it != figures_.end()) s = it->second;
  }
  s.known_contexts = static_cast<int32_t>(ids->size());
  s.kv_bytes = engine_.kv_resident_bytes_in(app.scope());
  // The device's figures (stats_fields.h), the same for every app.
#define LLMSVC_DEVICE_FIGURE(type, name, since, c, source) \
  if constexpr (StatSource::source == StatSource::device) s.name = device.name;
  LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_DEVICE_FIGURE)
#undef LLMSVC_DEVICE_FIGURE
  return s;
}

}  // namespace llmsvc::service
