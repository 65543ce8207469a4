// SPDX-License-Identifier: Apache-2.0
// Starts a program (argv exactly as given) in a child process with its stdout and stderr
// appended to a log file, for tests of a daemon's start-up and refusals.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace llmsvc::test {

// The child's pid (-1 when fork fails); the child exits 127 when argv[0] cannot be run.
inline pid_t spawn_logged(std::vector<std::string> argv, const std::string& log, bool truncate = false) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | (truncate ? O_TRUNC : O_APPEND), 0644);
    if (fd >= 0) {
      ::dup2(fd, STDERR_FILENO);
      ::dup2(fd, STDOUT_FILENO);
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace llmsvc::test
