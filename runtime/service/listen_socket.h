// The daemon's listening sockets: those systemd passes (socket activation), or one it binds.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace llmsvc::service {

// A socket systemd passed, with its name (the socket unit's FileDescriptorName=, or
// "unknown").
struct PassedSocket {
  int fd = -1;
  std::string name;
};

// The AF_UNIX stream sockets systemd passed (sd_listen_fds_with_names), made non-blocking;
// empty when not socket-activated. Passed fds of another kind are refused.
Result<std::vector<PassedSocket>> systemd_listen_fds();

// Binds and listens on `path` with permissions `mode`. A stale socket file left by a daemon
// that died is replaced; a live one (something accepts connections on it) is refused with
// Code::exists; a path that is not a socket is never removed (Code::exists).
Result<int> listen_unix(const std::string& path, mode_t mode);

}  // namespace llmsvc::service
