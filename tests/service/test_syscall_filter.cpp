// SPDX-License-Identifier: Apache-2.0
// The daemon's seccomp allowlist, installed in a forked child (the test process stays
// unconfined): what the daemon needs still works — Unix sockets, files, threads, reads on a
// ring made before the filter — and what it must never do fails with EPERM: IPv4/IPv6
// sockets, execve, ptrace, mount, a new process (fork, vfork, clone without CLONE_THREAD;
// clone3 answers ENOSYS), a new io_uring.
#include <gtest/gtest.h>

#include <errno.h>
#include <seccomp.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "policy/swap/swap_io.h"
#include "runtime/service/syscall_filter.h"

namespace llmsvc::service {
namespace {

// Runs `body` in a child that installed the filter; the child's exit code is body's result
// (0: as expected), 100 when installing failed.
int in_filtered_child(int (*body)(), SyscallFilterOptions options = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    auto f = install_syscall_filter(options);
    _exit(f.ok() ? body() : 100);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

bool refused(long rc) { return rc == -1 && errno == EPERM; }

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

// ioctl: refused by default; with allow_ioctl (a GPU driver's need) allowed but for the two
// requests that push input into a terminal.
TEST(SyscallFilter, IoctlOnlyForAGpuDriverAndNeverIntoATerminal) {
  auto probe = [] {
    int fds[2];
    if (pipe(fds) != 0) return 10;
    int n = 0;
    const bool allowed = ioctl(fds[0], FIONREAD, &n) == 0;
    const int err = errno;
    char c = 'x';
    // Never allowed, even on a descriptor that is no terminal (EPERM from the filter, not ENOTTY).
    if (!refused(ioctl(fds[0], TIOCSTI, &c))) return 11;
    if (!refused(ioctl(fds[0], TIOCLINUX, &c))) return 12;
    return allowed ? 0 : (err == EPERM ? 1 : 13);
  };
  EXPECT_EQ(in_filtered_child(probe), 1);
  SyscallFilterOptions gpu;
  gpu.allow_ioctl = true;
  EXPECT_EQ(in_filtered_child(probe, gpu), 0);
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

// A process may not be made, in any of the ways there are; a thread may. Each call that the
// filter would wrongly let through is made so the child it made leaves at once.
TEST(SyscallFilter, OnlyThreadsAreCloned) {
  EXPECT_EQ(in_filtered_child([] {
              const pid_t f = fork();
              if (f == 0) _exit(0);
              if (!refused(f)) return 1;
              const pid_t v = vfork();
              if (v == 0) _exit(0);
              if (!refused(v)) return 2;
              // A raw clone without CLONE_THREAD (what fork does, without glibc's handlers).
              const long c = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
              if (c == 0) _exit(0);
              if (!refused(c)) return 3;
              // Sharing the memory, but still no thread (posix_spawn's way).
              const long cv = syscall(SYS_clone, CLONE_VM | CLONE_VFORK | SIGCHLD, 0, 0, 0, 0);
              if (cv == 0) _exit(0);
              if (!refused(cv)) return 4;
              // clone3, fork-like: ENOSYS, so glibc falls back to clone.
              clone_args args{};
              args.exit_signal = SIGCHLD;
              const long c3 = syscall(SYS_clone3, &args, sizeof(args));
              if (c3 == 0) _exit(0);
              if (!(c3 == -1 && errno == ENOSYS)) return 5;
              if (!refused(unshare(CLONE_NEWUSER))) return 6;
              // execveat of a path that does not exist: unfiltered it fails with ENOENT.
              char* const argv[] = {const_cast<char*>("none"), nullptr};
              if (!refused(syscall(SYS_execveat, AT_FDCWD, "/nonexistent/llmsvc-probe", argv, environ, 0))) return 7;
              // pthread_create still works: glibc's clone3 gets ENOSYS, then its clone is a thread's.
              pthread_t t{};
              int ran = 0;
              auto run = [](void* p) -> void* {
                *static_cast<int*>(p) = 1;
                return nullptr;
              };
              if (pthread_create(&t, nullptr, run, &ran) != 0) return 8;
              pthread_join(t, nullptr);
              return ran == 1 ? 0 : 9;
            }),
            0);
}

// No new ring (io_uring_setup) and no change to one (io_uring_register); io_uring_enter is
// allowed (here it fails on a descriptor that is no ring, not on the filter).
TEST(SyscallFilter, NoNewIoUring) {
  EXPECT_EQ(in_filtered_child([] {
              io_uring_params params{};
              const long fd = syscall(SYS_io_uring_setup, 4, &params);
              if (fd >= 0) return 1;
              if (errno != EPERM) return 2;
              if (!refused(syscall(SYS_io_uring_register, -1, IORING_REGISTER_PROBE, nullptr, 0))) return 3;
              const long e = syscall(SYS_io_uring_enter, -1, 0, 0, 0, nullptr, 0);
              if (!(e == -1 && errno == EBADF)) return 4;
              return 0;
            }),
            0);
}

// The daemon's way: the swap reader's ring is made before the filter, and reads under it.
TEST(SyscallFilter, ARingMadeBeforeTheFilterStillReads) {
  char path[] = "/tmp/llmsvc-filter-ring-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "read through the ring";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  const pid_t pid = fork();
  if (pid == 0) {
    auto io = policy::SwapIo::create({policy::ReaderKind::io_uring, 8, 1, {}});
    if (!io.ok()) _exit(101);
    if (!install_syscall_filter().ok()) _exit(100);
    std::vector<uint8_t> back(text.size());
    auto r = (*io)->read({{path, 0, back}});
    _exit(r[0].status.ok() && std::string(back.begin(), back.end()) == text ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  unlink(path);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  if (WEXITSTATUS(status) == 101) GTEST_SKIP() << "this kernel gives no restricted io_uring (before 5.10, or disabled)";
  EXPECT_EQ(WEXITSTATUS(status), 0);
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
