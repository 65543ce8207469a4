// The daemon's seccomp allowlist, installed in a forked child (the test process stays
// unconfined): what the daemon needs still works — Unix sockets, files, threads — and what
// it must never do fails with EPERM: IPv4/IPv6 sockets, execve, ptrace, mount.
#include <gtest/gtest.h>

#include <errno.h>
#include <seccomp.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "runtime/service/syscall_filter.h"

namespace llmsvc::service {
namespace {

// Runs `body` in a child that installed the filter; the child's exit code is body's result
// (0: as expected), 100 when installing failed.
int in_filtered_child(int (*body)()) {
  const pid_t pid = fork();
  if (pid == 0) {
    auto f = install_syscall_filter();
    _exit(f.ok() ? body() : 100);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

bool refused(int rc) { return rc == -1 && errno == EPERM; }

TEST(SyscallFilter, ForbiddenCallsAreRefused) {
  EXPECT_EQ(in_filtered_child([] {
              if (!refused(socket(AF_INET, SOCK_STREAM, 0))) return 1;
              if (!refused(socket(AF_INET6, SOCK_DGRAM, 0))) return 2;
              if (!refused(socket(AF_NETLINK, SOCK_RAW, 0))) return 3;
              char* const argv[] = {const_cast<char*>("true"), nullptr};
              if (!refused(execve("/bin/true", argv, environ))) return 4;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
              // Sanitizer builds allow ptrace: LeakSanitizer stops the world with it at exit.
              if (!refused(static_cast<int>(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr)))) return 5;
#endif
              if (!refused(mount("none", "/mnt", "tmpfs", 0, nullptr))) return 6;
              return 0;
            }),
            0);
}

TEST(SyscallFilter, WhatTheDaemonDoesStillWorks) {
  EXPECT_EQ(in_filtered_child([] {
              const int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
              if (u < 0) return 1;
              close(u);
              int sv[2];
              if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
              if (write(sv[0], "x", 1) != 1) return 3;
              char c = 0;
              if (read(sv[1], &c, 1) != 1 || c != 'x') return 4;
              char path[] = "/tmp/llmsvc-filter-XXXXXX";
              const int fd = mkstemp(path);
              if (fd < 0 || write(fd, "data", 4) != 4 || fsync(fd) != 0) return 5;
              close(fd);
              if (unlink(path) != 0) return 6;
              int ran = 0;
              std::thread t([&ran] { ran = 1; });
              t.join();
              return ran == 1 ? 0 : 7;
            }),
            0);
}

// Whether a seccomp filter that does not opt out makes this kernel force the Speculative
// Store Bypass mitigation (checked in a forked child with an allow-everything filter): 1
// yes, 0 no, anything else the probe failed.
int plain_filter_forces_store_bypass_mitigation() {
  const pid_t pid = fork();
  if (pid == 0) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx || seccomp_load(ctx) != 0) _exit(2);
    const int after = prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, 0, 0, 0);
    _exit(after >= 0 && (after & PR_SPEC_FORCE_DISABLE) ? 1 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

// Installing a seccomp filter may force the Speculative Store Bypass mitigation on the
// process for good (x86 with spec_store_bypass_disable=seccomp, the default before 5.16;
// arm64 kernels that mitigate seccomp tasks), which slows compute; the daemon's filter opts
// out. Where a plain filter is not made to force it, there is nothing to opt out of.
TEST(SyscallFilter, DoesNotForceTheStoreBypassMitigation) {
  const int forces = plain_filter_forces_store_bypass_mitigation();
  ASSERT_TRUE(forces == 0 || forces == 1) << "the probe could not load a seccomp filter (" << forces << ")";
  if (forces == 0)
    GTEST_SKIP() << "this kernel does not force the Speculative Store Bypass mitigation on seccomp tasks "
                    "(prctl PR_GET_SPECULATION_CTRL: "
                 << prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, 0, 0, 0)
                 << "), so there is no forced mitigation for the daemon's filter to avoid";
  EXPECT_EQ(in_filtered_child([] {
              const int after = prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, 0, 0, 0);
              return after >= 0 && (after & PR_SPEC_FORCE_DISABLE) ? 1 : 0;
            }),
            0);
}

}  // namespace
}  // namespace llmsvc::service
