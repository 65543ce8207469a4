// SPDX-License-Identifier: Apache-2.0
// The daemon's listening sockets: those systemd passes (socket activation), or one it binds.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
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

// listen_unix in two steps: llmsvcd binds while it is still privileged (the socket's directory
// may be root's) and listens only once it can serve, so a connection that succeeds is served
// soon (one tried in between is refused, as before the daemon started). Meanwhile another
// daemon's probe finds nothing accepting there and may take the path over: listen() then
// refuses. Destroyed before listen() (a start-up that failed), it removes its file if the
// path still names its socket.
class BoundUnixSocket {
 public:
  // The checks and the binding of listen_unix.
  static Result<BoundUnixSocket> bind(const std::string& path, mode_t mode);
  BoundUnixSocket(BoundUnixSocket&& o) noexcept;
  BoundUnixSocket& operator=(BoundUnixSocket&&) = delete;
  ~BoundUnixSocket();

  // Listens and hands the descriptor over; Code::exists when the path no longer names this
  // socket.
  Result<int> listen();

 private:
  BoundUnixSocket(int fd, std::string path, dev_t dev, ino_t ino)
      : fd_(fd), path_(std::move(path)), dev_(dev), ino_(ino) {}
  bool still_ours() const;

  int fd_ = -1;
  std::string path_;
  dev_t dev_ = 0;  // the socket file's identity, as bound
  ino_t ino_ = 0;
};

}  // namespace llmsvc::service
