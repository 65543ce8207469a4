// SPDX-License-Identifier: Apache-2.0
// Peer credentials of a Unix socket (SO_PEERCRED), its unit (libsystemd) or executable.
#include "runtime/service/app_identity.h"

#include <sys/socket.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "base/file_io.h"

namespace llmsvc::service {

namespace {

// The unit the process runs in: a system unit, else a unit of a user's manager; empty when it
// has none (a process outside systemd's units, or one that already exited).
std::string unit_of(pid_t pid) {
  char* unit = nullptr;
  if (::sd_pid_get_unit(pid, &unit) < 0 || !unit) {
    if (::sd_pid_get_user_unit(pid, &unit) < 0) unit = nullptr;
  }
  std::string out = unit ? unit : "";
  std::free(unit);
  return out;
}

std::string exe_of(pid_t pid) {
  char buf[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

std::string AppIdentity::label() const {
  std::string out = "uid " + std::to_string(uid) + " pid " + std::to_string(pid);
  if (!unit.empty()) out += " unit " + unit;
  else if (!exe.empty()) out += " exe " + exe;
  return out;
}

Result<AppIdentity> peer_identity(int fd) {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return Status(Code::internal, "SO_PEERCRED: " + fileio::errno_text(errno));
  AppIdentity id;
  id.uid = cred.uid;
  id.gid = cred.gid;
  id.pid = cred.pid;
  if (id.pid > 0) {
    id.unit = unit_of(id.pid);
    if (id.unit.empty()) id.exe = exe_of(id.pid);
  }
  return id;
}

}  // namespace llmsvc::service
