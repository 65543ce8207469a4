// SPDX-License-Identifier: Apache-2.0
// ScopeDiskQuotas: each scope's (app's) policy::DiskQuota over its contexts' chunk swap files.
// A loaded context's SwapStore counts its own files; the files of a context stored but not
// loaded count as "dormant" bytes, measured when its scope is first used (or when its store
// closes) and uncounted when it loads again or is deleted. Not thread-safe: the engine's
// lock guards it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "policy/swap/disk_quota.h"

namespace llmsvc {

class ScopeDiskQuotas {
 public:
  // Bytes of one stored context's swap files.
  using Measure = std::function<uint64_t(const std::string& id)>;
  // Scoped ids ("<scope>/<name>") of the contexts stored in a scope.
  using ListScope = std::function<std::vector<std::string>(std::string_view scope)>;

  // limit: every scope's (0: none); by_scope: in its place for these scopes (0: none for it).
  ScopeDiskQuotas(uint64_t limit, std::map<std::string, uint64_t, std::less<>> by_scope, Measure measure,
                  ListScope list_scope);

  // The quota a store of context `id` charges (null: none), its dormant bytes uncounted
  // (its store counts its files from now on). The scope's other stored contexts are
  // measured the first time the scope is seen.
  std::shared_ptr<policy::DiskQuota> attach(const std::string& id);
  // Context `id`'s store has closed, leaving `bytes` of files on storage.
  void detach(const std::string& id, uint64_t bytes);
  // Context `id` is deleted: its dormant bytes, if any, are uncounted.
  void forget(const std::string& id);

 private:
  struct Scope {
    std::shared_ptr<policy::DiskQuota> quota;
    std::map<std::string, uint64_t, std::less<>> dormant;  // by context id
  };
  // The scope of `id` (null when it has none or no limit), made on first use.
  Scope* scope_of(const std::string& id, bool measure_others);

  uint64_t limit_;
  std::map<std::string, uint64_t, std::less<>> by_scope_;
  Measure measure_;
  ListScope list_scope_;
  std::map<std::string, Scope, std::less<>> scopes_;
};

}  // namespace llmsvc
