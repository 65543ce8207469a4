// SPDX-License-Identifier: Apache-2.0
// The allowlist, by name (resolved for the running architecture; names this kernel's
// headers lack are skipped), and the probes that check it.
#include "runtime/service/syscall_filter.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

namespace llmsvc::service {
namespace {

// Everything the daemon needs after start-up, grouped by what uses it.
constexpr const char* kAllowed[] = {
    // memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "membarrier",
    // threads (clone: threads only, and clone3 answers ENOSYS; both below), signals, time
    "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "futex", "futex_waitv",
    "sched_yield", "sched_getaffinity", "exit", "exit_group", "gettid", "getpid", "getppid", "tgkill",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigtimedwait", "sigaltstack", "restart_syscall",
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "getrandom",
    "getuid", "geteuid", "getgid", "getegid", "getgroups", "getrlimit", "prlimit64", "getrusage", "uname", "sysinfo",
    "prctl",
    // event loop: epoll, signalfd, timerfd, eventfd, pipes
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "signalfd4",
    "timerfd_create", "timerfd_settime", "timerfd_gettime", "eventfd2", "pipe2",
    // sockets (socket() and socketpair() are allowed for AF_UNIX only, below)
    "accept4", "accept", "recvmsg", "sendmsg", "recvfrom", "sendto", "recvmmsg", "sendmmsg", "shutdown",
    "getsockopt", "setsockopt", "getsockname", "getpeername", "connect", "bind", "listen",
    // files: state directory, chunk files, history logs, the model
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "lseek",
    "openat", "openat2", "open", "close", "close_range", "dup", "dup2", "dup3", "fcntl", "flock", "fstat", "newfstatat", "stat",
    "lstat", "statx", "fstatfs", "statfs", "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents", "getdents64",
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "ftruncate", "fallocate",
    "fsync", "fdatasync", "sync_file_range", "fchmod", "fchmodat", "umask", "getcwd", "fadvise64", "readahead",
    // Swap reads: io_uring_enter only. The one ring (policy/swap/uring_reader.h) is made before
    // this filter, restricted before it was enabled to reading files the daemon opened itself
    // (IORING_OP_READ, no SQE flags, no register operation); with io_uring_setup and
    // io_uring_register refused, no other ring can be made and those rules cannot be undone,
    // so the ring's operations, which seccomp cannot see, are all reads.
    "io_uring_enter",
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // The sanitizers' runtimes: LeakSanitizer stops the world with a ptrace-ing thread at exit.
    "ptrace", "wait4", "waitid", "process_vm_readv", "sched_setaffinity", "personality",
#endif
};

struct CtxFree {
  void operator()(scmp_filter_ctx c) const { seccomp_release(c); }
};
using FilterPtr = std::unique_ptr<void, CtxFree>;

Status fail(const std::string& what, int rc) {
  return Status(Code::internal, "system-call filter: " + what + ": " + std::strerror(-rc));
}

// clone() for a thread of this process, as glibc's pthread_create calls it: every sharing
// flag below set, and nothing else but its TLS and thread-id bookkeeping (no exit signal, no
// namespace, no vfork, no ptrace flag). So no child process: no fork, vfork, posix_spawn.
// The flags are arg0 on x86_64 and arm64 (the kernel reads their low 32 bits).
constexpr uint64_t kThreadShares = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
constexpr uint64_t kThreadBookkeeping = CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID | CLONE_CHILD_SETTID;
constexpr uint64_t kCloneChecked = 0xffffffffu & ~kThreadBookkeeping;

Status add_clone_rules(scmp_filter_ctx ctx) {
  if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                                SCMP_A0(SCMP_CMP_MASKED_EQ, kCloneChecked, kThreadShares));
      rc != 0)
    return fail("clone", rc);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // LeakSanitizer stops the world from a task that shares the memory but is no thread: these
  // flags exactly (sanitizer_stoptheworld_linux_libcdep.cpp); still no fork, no vfork.
  constexpr uint64_t kStopTheWorld = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_UNTRACED;
  if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                                SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, kStopTheWorld));
      rc != 0)
    return fail("clone (sanitizer)", rc);
#endif
  // clone3 passes its flags in a struct seccomp cannot read: ENOSYS makes glibc (2.34+) fall
  // back to clone, whose flags it can (EPERM, the default, would fail pthread_create). By
  // number where libseccomp predates the name.
  int nr = seccomp_syscall_resolve_name("clone3");
#ifdef SYS_clone3
  if (nr == __NR_SCMP_ERROR) nr = SYS_clone3;
#endif
  if (nr != __NR_SCMP_ERROR)
    if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0); rc != 0) return fail("clone3", rc);
  return Status::Ok();
}

}  // namespace

Result<std::string> install_syscall_filter(const SyscallFilterOptions& options) {
  FilterPtr ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)));
  if (!ctx) return Status(Code::internal, "system-call filter: seccomp_init failed");
  // Every thread at once: the engine's workers and the swap writer run already.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_TSYNC, 1); rc != 0) return fail("TSYNC", rc);
  // A binary search over the allowed numbers instead of a linear chain: the compute threads'
  // futex calls (hundreds per decoded token) each run the filter.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2); rc != 0) return fail("OPTIMIZE", rc);
  // No forced Speculative Store Bypass mitigation: kernels that apply it to every seccomp
  // task (x86 with spec_store_bypass_disable=seccomp, the default before 5.16; arm64 ones
  // that mitigate seccomp tasks) would slow the model's compute threads for good, and it
  // guards against code running inside the process, which llmsvcd never loads (clients
  // send data, not code). Not fatal: a kernel without the flag (before 4.17) or a libseccomp
  // without the attribute predates the forced mitigation as well.
  (void)seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_SSB, 1);
  for (const char* name : kAllowed) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, nr, 0); rc != 0) return fail(name, rc);
  }
  LLMSVC_RETURN_IF_ERROR(add_clone_rules(ctx.get()));
  for (int nr : {SCMP_SYS(socket), SCMP_SYS(socketpair)}) {
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, AF_UNIX)); rc != 0)
      return fail("socket", rc);
  }
  if (options.allow_ioctl) {
    // Every request but TIOCSTI and TIOCLINUX, as rules of one comparison each (libseccomp
    // takes one comparison per argument in a rule): below the first, above the second, and
    // each one between them.
    static_assert(TIOCSTI < TIOCLINUX);
    std::vector<scmp_arg_cmp> allow = {SCMP_A1(SCMP_CMP_LT, TIOCSTI), SCMP_A1(SCMP_CMP_GT, TIOCLINUX)};
    for (unsigned long r = TIOCSTI + 1; r < TIOCLINUX; ++r) allow.push_back(SCMP_A1(SCMP_CMP_EQ, r));
    for (const scmp_arg_cmp& cmp : allow) {
      if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, cmp); rc != 0)
        return fail("ioctl", rc);
    }
  }
  if (int rc = seccomp_load(ctx.get()); rc != 0) return fail("load", rc);

  // Prove it: these must be refused with EPERM.
  std::string seen;
  const int inet = ::socket(AF_INET, SOCK_STREAM, 0);
  const int inet_errno = errno;
  if (inet >= 0) {
    ::close(inet);
    return Status(Code::internal, "system-call filter: an AF_INET socket was not refused");
  }
  if (inet_errno != EPERM) return Status(Code::internal, "system-call filter: AF_INET socket failed, but not by the filter");
  seen += std::string("socket(AF_INET): ") + std::strerror(inet_errno);
  // A path that does not exist: unfiltered, execve fails with ENOENT and nothing runs.
  char* const argv[] = {const_cast<char*>("llmsvc-probe"), nullptr};
  ::execve("/nonexistent/llmsvc-probe", argv, environ);
  const int exec_errno = errno;
  if (exec_errno != EPERM) return Status(Code::internal, "system-call filter: execve was not refused by the filter");
  seen += std::string(", execve: ") + std::strerror(exec_errno);
  // A fork: clone without CLONE_THREAD (a raw call: no atfork handlers). Were it let through,
  // the child would leave at once; the daemon then refuses to run.
  const long forked = ::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
  const int fork_errno = errno;
  if (forked == 0) ::_exit(0);
  if (forked > 0)
    return Status(Code::internal, "system-call filter: a fork (clone without CLONE_THREAD) was not refused");
  if (fork_errno != EPERM) return Status(Code::internal, "system-call filter: a fork failed, but not by the filter");
  seen += std::string(", fork: ") + std::strerror(fork_errno);
#ifdef SYS_clone3
  // No arguments: unfiltered, the kernel refuses it (EINVAL) before making anything.
  ::syscall(SYS_clone3, nullptr, 0);
  const int clone3_errno = errno;
  if (clone3_errno != ENOSYS) return Status(Code::internal, "system-call filter: clone3 was not answered ENOSYS");
  seen += std::string(", clone3: ") + std::strerror(clone3_errno);
#endif
  return seen;
}

}  // namespace llmsvc::service
