// SPDX-License-Identifier: Apache-2.0
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
  // What the process is, for logs: its systemd unit (system or user manager's), else its
  // executable; empty when neither can be read (another uid's /proc/PID/exe needs privilege).
  std::string unit;
  std::string exe;

  // The app's namespace in the engine: "uid-<uid>" (one directory per app under the state
  // root's contexts/). An app is a uid, as on Android; the unit and executable name a
  // process, which a uid may run many of, and are not part of it.
  std::string scope() const { return scope_of(uid); }
  static std::string scope_of(uid_t uid) { return "uid-" + std::to_string(uid); }
  // For logs: "uid 1000 pid 4242 unit app-foo.service", "uid 1000 pid 4242 exe /usr/bin/foo".
  std::string label() const;
};

// The credentials of the peer of a connected AF_UNIX socket (SO_PEERCRED), with its unit or
// executable looked up from its pid.
Result<AppIdentity> peer_identity(int fd);

}  // namespace llmsvc::service
