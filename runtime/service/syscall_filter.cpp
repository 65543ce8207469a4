// The allowlist, by name (resolved for the running architecture; names this kernel's
// headers lack are skipped), and the probes that check it.
#include "runtime/service/syscall_filter.h"

#include <errno.h>
#include <seccomp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>

namespace llmsvc::service {
namespace {

// Everything the daemon needs after start-up, grouped by what uses it.
constexpr const char* kAllowed[] = {
    // memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "membarrier",
    // threads, signals, time
    "clone", "clone3", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "futex", "futex_waitv",
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
    "openat", "open", "close", "close_range", "dup", "dup2", "dup3", "fcntl", "flock", "fstat", "newfstatat", "stat",
    "lstat", "statx", "fstatfs", "statfs", "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents", "getdents64",
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "ftruncate", "fallocate",
    "fsync", "fdatasync", "sync_file_range", "fchmod", "fchmodat", "umask", "getcwd", "fadvise64", "readahead",
    // swap I/O
    "io_uring_setup", "io_uring_enter", "io_uring_register",
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

}  // namespace

Result<std::string> install_syscall_filter() {
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
  for (int nr : {SCMP_SYS(socket), SCMP_SYS(socketpair)}) {
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, AF_UNIX)); rc != 0)
      return fail("socket", rc);
  }
  if (int rc = seccomp_load(ctx.get()); rc != 0) return fail("load", rc);

  // Prove it: both must be refused with EPERM.
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
  return seen;
}

}  // namespace llmsvc::service
