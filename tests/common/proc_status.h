// SPDX-License-Identifier: Apache-2.0
// A process's memory figures from /proc/<pid>/status and CPU time from /proc/<pid>/stat,
// for tests and benchmarks.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace llmsvc::test {

// A kB field of /proc/<pid>/status ("VmHWM", "VmRSS", "RssAnon") in bytes; 0 when unreadable.
inline uint64_t proc_status_bytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10) * 1024;
  return 0;
}

// User + system CPU seconds the process has used (all its threads); 0 when unreadable.
inline double proc_cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return 0;
  // After ") ": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15)
  const char* p = stat.c_str() + close + 1;
  char* end = nullptr;
  for (int field = 3; field < 14; ++field) {
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
  }
  const unsigned long long utime = std::strtoull(p, &end, 10);
  const unsigned long long stime = std::strtoull(end, nullptr, 10);
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace llmsvc::test
