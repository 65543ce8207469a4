// SPDX-License-Identifier: Apache-2.0
// The daemon's system-call allowlist (libseccomp): installed once start-up is done (model
// mapped, listeners open, engine threads running), on every thread of the process at once.
// What the daemon does from then on — Unix sockets, files under its state directory,
// memory, threads, reads on its read-only io_uring, clocks — is allowed; anything else fails
// with EPERM: no IPv4 or IPv6 socket, no execve, no new process (clone only for threads;
// clone3 answers ENOSYS, so glibc uses clone), no new io_uring, no ptrace, no mount, no
// module loading.
#pragma once

#include <string>

#include "base/status.h"

namespace llmsvc::service {

struct SyscallFilterOptions {
  // Allow ioctl, for a GPU driver that needs it on its device files (hal::Capabilities::
  // driver_ioctl); seccomp cannot tell those files from others, so any ioctl but TIOCSTI and
  // TIOCLINUX (which push input into a terminal the daemon may have inherited).
  bool allow_ioctl = false;
};

// Installs the filter on every thread (TSYNC; sets no_new_privs), then proves it bites:
// an AF_INET socket, an execve and a fork must be refused, and clone3 answered ENOSYS.
// Returns what the probes saw, for the log; Code::internal when the filter cannot be
// installed or a probe was not refused (the daemon then refuses to run unconfined).
Result<std::string> install_syscall_filter(const SyscallFilterOptions& options = {});

}  // namespace llmsvc::service
