// SPDX-License-Identifier: Apache-2.0
// The state root's owner and mode, and those of its ancestors.
#include "runtime/core/persist/state_root.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "base/file_io.h"

namespace llmsvc::persist {
namespace {

std::string octal(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", static_cast<unsigned>(m & 07777));
  return b;
}

std::string writers(mode_t m) {
  if ((m & 020) && (m & 002)) return "its group and others";
  return (m & 020) ? "its group" : "others";
}

// Every ancestor of the root's real path must leave the root's entry to root and to us.
Status check_ancestors(const std::string& root) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(root.c_str(), nullptr), &std::free);
  if (!real) return fileio::io_status(errno, "state directory '" + root + "': resolve its path");
  std::string path = real.get();
  const uid_t me = ::geteuid();
  while (path.size() > 1) {
    const size_t slash = path.rfind('/');
    path = slash == 0 ? std::string("/") : path.substr(0, slash);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return fileio::io_status(errno, "state directory '" + root + "': stat " + path);
    const bool owner_ok = st.st_uid == 0 || st.st_uid == me;
    // Sticky: only an entry's owner may rename or remove it (/tmp).
    const bool others_can_replace = (st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0;
    if (!owner_ok || others_can_replace)
      return Status(Code::io, "state directory '" + root + "' is inside '" + path + "' (owner uid " +
                                  std::to_string(st.st_uid) + ", mode " + octal(st.st_mode) +
                                  "), where another user could replace it; keep the state directory under "
                                  "directories that only root or uid " + std::to_string(me) + " can change");
  }
  return Status::Ok();
}

}  // namespace

Result<OpenedStateRoot> open_state_root(const std::string& root, bool fix_permissions) {
  if (root.empty()) return Status(Code::invalid_argument, "state directory: empty path");
  OpenedStateRoot out;
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) {
    if (errno != ENOENT) return fileio::io_status(errno, "state directory '" + root + "'");
    LLMSVC_RETURN_IF_ERROR(fileio::make_dirs(root));  // 0700
    out.created = true;
    if (::stat(root.c_str(), &st) != 0) return fileio::io_status(errno, "state directory '" + root + "'");
  }
  if (!S_ISDIR(st.st_mode)) return Status(Code::io, "state directory '" + root + "' is not a directory");
  // Owner first, by the path: another user's 0700 directory cannot even be opened by a
  // process without capabilities, and the reason to give is whose it is.
  const uid_t me = ::geteuid();
  if (st.st_uid != me)
    return Status(Code::io, "state directory '" + root + "' belongs to uid " + std::to_string(st.st_uid) +
                                ", not to this process's uid " + std::to_string(me) +
                                ": state is never kept in another user's directory (give it to uid " +
                                std::to_string(me) + ", or choose another state directory)");
  const mode_t mode = st.st_mode & 07777;
  if ((mode & 022) != 0 && !fix_permissions)
    return Status(Code::io, "state directory '" + root + "' can be written by " + writers(mode) + " (mode " +
                                octal(mode) + "): whoever can write there could plant links or replace contexts; "
                                "make it 0700 (chmod 700 '" + root + "'; llmsvcd: --fix-state-permissions)");
  LLMSVC_RETURN_IF_ERROR(check_ancestors(root));  // before any fix: a refused start changes nothing
  // Messages about files below it name them relative to it: never its own path.
  auto dir = fileio::SafeDir::open(root);
  if (!dir.ok()) return dir.status();
  struct stat held {};
  if (::fstat((*dir)->fd(), &held) != 0) return fileio::io_status(errno, "state directory '" + root + "': stat");
  if (held.st_dev != st.st_dev || held.st_ino != st.st_ino)
    return Status(Code::io, "state directory '" + root + "' was replaced while it was checked");
  if (fix_permissions && mode != 0700) {
    if (::fchmod((*dir)->fd(), 0700) != 0)
      return fileio::io_status(errno, "state directory '" + root + "': chmod 0700 (mode " + octal(mode) + ")");
    out.fixed = "state directory '" + root + "': mode " + octal(mode) + " -> 0700";
  }
  out.dir = std::move(dir).value();
  return out;
}

}  // namespace llmsvc::persist
