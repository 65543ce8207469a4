// SPDX-License-Identifier: Apache-2.0
// State root resolution and listing the contexts on storage.
#include "runtime/core/persist/state_dir.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "base/file_io.h"

namespace llmsvc::persist {

Result<std::string> resolve_state_root(std::string_view explicit_dir) {
  if (!explicit_dir.empty()) return std::string(explicit_dir);
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
  };
  if (std::string d = env("LLMSVC_STATE_DIR"); !d.empty()) return d;
  if (std::string d = env("XDG_STATE_HOME"); !d.empty() && d[0] == '/') return d + "/llmsvc";
  if (std::string d = env("HOME"); !d.empty()) return d + "/.local/state/llmsvc";
  return Status(Code::invalid_argument, "no state directory: set LLMSVC_STATE_DIR, XDG_STATE_HOME or HOME");
}

bool valid_context_id(std::string_view id) {
  if (id.empty() || id.size() > 64 || id == "." || id == "..") return false;
  return std::all_of(id.begin(), id.end(), is_context_id_char);
}

bool valid_context_key(std::string_view key) {
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos) return valid_context_id(key);
  return valid_context_id(key.substr(0, slash)) && valid_context_id(key.substr(slash + 1));
}

Result<fileio::SafeDirRef> StateDir::root_dir() const {
  if (dir_) return dir_;
  return fileio::SafeDir::open(root_, root_);
}

Result<std::vector<std::string>> StateDir::list(std::string_view scope) const {
  std::vector<std::string> ids;
  if (!scope.empty() && !valid_context_id(scope)) return Status(Code::invalid_argument, "bad context scope");
  auto root = root_dir();
  if (!root.ok()) {
    if (root.status().code() == Code::not_found) return ids;
    return root.status();
  }
  std::string prefix, dir(layout::kContexts);  // appended piecewise: GCC 12 -Wrestrict false positive
  if (!scope.empty()) {
    prefix.append(scope).push_back('/');
    dir.push_back('/');
    dir.append(scope);
  }
  auto names = (*root)->list(dir);
  if (!names.ok()) {
    if (names.status().code() == Code::not_found) return ids;
    return Status(Code::io, "cannot list contexts: " + names.status().message());
  }
  for (const std::string& name : *names) {
    if (!valid_context_id(name)) continue;
    auto st = (*root)->stat(layout::meta(prefix + name));
    if (st.ok() && S_ISREG(st->st_mode)) ids.push_back(name);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool StateDir::has(std::string_view key) const {
  if (!valid_context_key(key)) return false;
  auto root = root_dir();
  if (!root.ok()) return false;
  auto st = (*root)->stat(layout::meta(key));
  return st.ok() && S_ISREG(st->st_mode);
}

}  // namespace llmsvc::persist
