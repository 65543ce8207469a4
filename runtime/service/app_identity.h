// AppIdentity: who is at the other end of a connection, from the kernel (SO_PEERCRED),
// never from anything the client sends. Its scope names the app's context namespace.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"

namespace llmsvc::service {

struct AppIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;

  // The app's namespace in the engine: "uid-<uid>" (one directory per app under the state
  // root's contexts/). Later: the client's systemd unit where it has one.
  std::string scope() const { return "uid-" + std::to_string(uid); }
  std::string label() const;  // for logs: "uid 1000 pid 4242"
};

// The credentials of the peer of a connected AF_UNIX socket.
Result<AppIdentity> peer_identity(int fd);

}  // namespace llmsvc::service
