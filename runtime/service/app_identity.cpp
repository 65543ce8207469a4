// Peer credentials of a Unix socket (SO_PEERCRED).
#include "runtime/service/app_identity.h"

#include <sys/socket.h>

#include <cerrno>

#include "base/file_io.h"

namespace llmsvc::service {

std::string AppIdentity::label() const {
  return "uid " + std::to_string(uid) + " pid " + std::to_string(pid);
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
  return id;
}

}  // namespace llmsvc::service
