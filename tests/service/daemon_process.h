// SPDX-License-Identifier: Apache-2.0
// DaemonProcess: a real llmsvcd started as a child process for a test, on a socket in a
// fresh directory, stopped (SIGKILL if need be) when the test is done.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/test_paths.h"

namespace llmsvc::test {

class DaemonProcess {
 public:
  // `dir`: where the socket (s.sock), the state (state/) and the log (llmsvcd.log) go.
  explicit DaemonProcess(std::string dir, std::vector<std::string> extra_args = {})
      : dir_(std::move(dir)), extra_(std::move(extra_args)) {}

  // Started by systemd-socket-activate (which listens, passes the socket with LISTEN_FDS
  // and execs llmsvcd on the first connection) instead of --listen.
  void socket_activated() { activated_ = true; }
  // NAME=VALUE for the daemon's environment.
  void add_env(std::string assignment) { env_.push_back(std::move(assignment)); }
  // Runs in the child just before it execs llmsvcd (its output already in the log): system
  // calls only (it runs between fork and exec). A failing hook should _exit.
  void before_exec(std::function<void()> fn) { before_exec_ = std::move(fn); }
  // The model and engine threads it is started with (defaults: the default model, 2).
  void set_model(std::string path) { model_ = std::move(path); }
  // Another llmsvcd binary (e.g. an older build, for a before/after comparison); `as_root_flag`
  // false for one that predates --allow-root.
  void set_binary(std::string path, bool as_root_flag = true) {
    binary_ = std::move(path);
    allow_root_flag_ = as_root_flag;
  }
  void set_threads(int threads) { threads_ = threads; }
  ~DaemonProcess() { kill_and_wait(SIGKILL); }

  std::string socket_path() const { return dir_ + "/s.sock"; }
  std::string target() const { return "unix:" + socket_path(); }
  std::string state_dir() const { return dir_ + "/state"; }
  std::string log_path() const { return dir_ + "/llmsvcd.log"; }
  pid_t pid() const { return pid_; }

  // Starts it and waits until its socket accepts connections (false on failure or timeout).
  bool start(int timeout_ms = 120000) {
    std::vector<std::string> args = {binary_, "--listen", socket_path()};
    if (activated_) {  // it passes on only the environment it is told to
      args = {"/usr/bin/systemd-socket-activate", "--listen=" + socket_path()};
      for (const std::string& e : env_) args.push_back("--setenv=" + e);
      args.push_back(binary_);
    }
    for (const std::string& a :
         std::vector<std::string>{"--state-dir", state_dir(), "--model", model_, "--threads", std::to_string(threads_)})
      args.push_back(a);
    // As root (CI), llmsvcd refuses to run without a user to switch to unless allowed.
    if (::geteuid() == 0 && allow_root_flag_) args.push_back("--allow-root");
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      const int log = ::open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (log >= 0) {
        ::dup2(log, STDERR_FILENO);
        ::dup2(log, STDOUT_FILENO);
      }
      for (auto& e : env_) ::putenv(e.data());
      if (before_exec_) before_exec_();
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      if (accepts()) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // True when something accepts connections on the socket.
  bool accepts() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path().c_str(), sizeof(addr.sun_path) - 1);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    return ok;
  }

  // Waits for it to exit by itself: the wait status, or -1 while it still runs after timeout_ms.
  int wait_exit(int timeout_ms) {
    if (pid_ <= 0) return -1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    return status;
  }

  // Sends `sig` and waits for the exit; returns the wait status (-1 if not running or not
  // gone within timeout_ms, after which it is SIGKILLed).
  int kill_and_wait(int sig, int timeout_ms = 30000) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int status = 0;
    for (;;) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        status = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    return status;
  }

 private:
  std::string dir_;
  std::vector<std::string> extra_;
  std::vector<std::string> env_;
  std::function<void()> before_exec_;
  std::string model_ = default_model_path();
  std::string binary_ = LLMSVCD_PATH;
  bool allow_root_flag_ = true;
  int threads_ = 2;
  bool activated_ = false;
  pid_t pid_ = -1;
};

}  // namespace llmsvc::test
