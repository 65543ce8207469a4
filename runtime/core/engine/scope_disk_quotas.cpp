// SPDX-License-Identifier: Apache-2.0
// ScopeDiskQuotas: a scope's quota made when it is first used, with its stored contexts measured then.
#include "runtime/core/engine/scope_disk_quotas.h"

namespace llmsvc {

ScopeDiskQuotas::ScopeDiskQuotas(uint64_t limit, std::map<std::string, uint64_t, std::less<>> by_scope, Measure measure,
                                 ListScope list_scope)
    : limit_(limit), by_scope_(std::move(by_scope)), measure_(std::move(measure)), list_scope_(std::move(list_scope)) {}

ScopeDiskQuotas::Scope* ScopeDiskQuotas::scope_of(const std::string& id, bool measure_others) {
  const size_t slash = id.find('/');
  if (slash == std::string::npos) return nullptr;
  const std::string_view name = std::string_view(id).substr(0, slash);
  if (auto it = scopes_.find(name); it != scopes_.end()) return it->second.quota ? &it->second : nullptr;
  auto own = by_scope_.find(name);
  const uint64_t limit = own != by_scope_.end() ? own->second : limit_;
  Scope& s = scopes_[std::string(name)];
  if (limit == 0) return nullptr;
  s.quota = std::make_shared<policy::DiskQuota>(limit);
  if (measure_others) {
    for (const std::string& other : list_scope_(name)) {
      if (other == id) continue;  // its store counts it
      const uint64_t bytes = measure_(other);
      s.dormant[other] = bytes;
      s.quota->charge(bytes);
    }
  }
  return &s;
}

std::shared_ptr<policy::DiskQuota> ScopeDiskQuotas::attach(const std::string& id) {
  Scope* s = scope_of(id, true);
  if (!s) return nullptr;
  if (auto it = s->dormant.find(id); it != s->dormant.end()) {
    s->quota->release(it->second);
    s->dormant.erase(it);
  }
  return s->quota;
}

void ScopeDiskQuotas::detach(const std::string& id, uint64_t bytes) {
  Scope* s = scope_of(id, true);
  if (!s) return;
  s->dormant[id] = bytes;
  s->quota->charge(bytes);
}

void ScopeDiskQuotas::forget(const std::string& id) {
  Scope* s = scope_of(id, false);
  if (!s) return;
  if (auto it = s->dormant.find(id); it != s->dormant.end()) {
    s->quota->release(it->second);
    s->dormant.erase(it);
  }
}

}  // namespace llmsvc
