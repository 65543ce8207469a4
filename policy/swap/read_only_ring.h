// SPDX-License-Identifier: Apache-2.0
// A read-only io_uring: made disabled, restricted to plain reads, then enabled. The
// restrictions (IORING_REGISTER_RESTRICTIONS) hold for the ring's life and cannot be
// changed: only IORING_OP_READ, no SQE flag (no fixed files, no links, no async forcing), no
// register operation. Any other SQE completes with -EACCES. So a process that may then only
// call io_uring_enter (llmsvcd's syscall filter) can do nothing through the ring but read
// from descriptors it already holds into its own memory.
#pragma once

#include <liburing.h>

#include "base/status.h"

namespace llmsvc::policy {

// Sets up `ring` with `entries` SQEs. Code::unavailable where the kernel refuses: io_uring
// off (io_uring_disabled, a seccomp filter, no CONFIG_IO_URING), no restrictions (before
// Linux 5.10), no IORING_OP_READ (before 5.6); `ring` is then not set up. Otherwise the
// caller frees it with io_uring_queue_exit.
Status init_read_only_ring(io_uring& ring, unsigned entries);

}  // namespace llmsvc::policy
