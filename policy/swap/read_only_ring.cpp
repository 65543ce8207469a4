// SPDX-License-Identifier: Apache-2.0
// The read-only ring's set-up: disabled, probed, restricted, enabled.
#include "policy/swap/read_only_ring.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

namespace llmsvc::policy {
namespace {

struct ProbeFree {
  void operator()(io_uring_probe* p) const { io_uring_free_probe(p); }
};

// io_uring_register(2) itself: liburing 2.3 (Debian 12) declares io_uring_register_restrictions
// and io_uring_enable_rings but its shared library does not export them.
int ring_register(io_uring& ring, unsigned op, const void* arg, unsigned nr) {
  return ::syscall(SYS_io_uring_register, ring.ring_fd, op, arg, nr) < 0 ? -errno : 0;
}

Status unavailable(const std::string& what, int err) {
  return Status(Code::unavailable,
                "io_uring unavailable: " + what + (err ? std::string(": ") + std::strerror(err) : ""));
}

}  // namespace

Status init_read_only_ring(io_uring& ring, unsigned entries) {
  // Disabled until enabled below: restrictions can only be registered on a ring made so
  // (5.10+; an older kernel refuses the flag with EINVAL), and nothing runs on it meanwhile.
  if (const int err = io_uring_queue_init(entries, &ring, IORING_SETUP_R_DISABLED); err < 0)
    return unavailable("setup", -err);
  struct Exit {  // frees the ring unless it is handed over
    io_uring* ring;
    ~Exit() {
      if (ring) io_uring_queue_exit(ring);
    }
  } guard{&ring};
  // The probe is a register operation: asked before the restrictions forbid every one.
  std::unique_ptr<io_uring_probe, ProbeFree> probe(io_uring_get_probe_ring(&ring));
  if (!probe || !io_uring_opcode_supported(probe.get(), IORING_OP_READ)) return unavailable("no IORING_OP_READ", 0);
  io_uring_restriction allowed[2]{};
  allowed[0].opcode = IORING_RESTRICTION_SQE_OP;
  allowed[0].sqe_op = IORING_OP_READ;
  allowed[1].opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED;
  allowed[1].sqe_flags = 0;
  // No IORING_RESTRICTION_REGISTER_OP entry: no register operation is allowed from here on.
  if (const int err = ring_register(ring, IORING_REGISTER_RESTRICTIONS, allowed, 2); err < 0)
    return unavailable("restrictions", -err);
  if (const int err = ring_register(ring, IORING_REGISTER_ENABLE_RINGS, nullptr, 0); err < 0)
    return unavailable("enable", -err);
  guard.ring = nullptr;
  return Status::Ok();
}

}  // namespace llmsvc::policy
