// State root resolution and directory listing.
#include "runtime/core/persist/state_dir.h"

#include <dirent.h>

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

Result<std::vector<std::string>> StateDir::list() const {
  std::vector<std::string> ids;
  DIR* d = ::opendir(contexts_dir().c_str());
  if (!d) {
    if (errno == ENOENT) return ids;
    return Status(Code::io, "cannot list '" + contexts_dir() + "': " + fileio::errno_text(errno));
  }
  while (dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (valid_context_id(name) && fileio::exists(meta_path(name))) ids.emplace_back(name);
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool StateDir::has(std::string_view id) const { return valid_context_id(id) && fileio::exists(meta_path(id)); }

}  // namespace llmsvc::persist
