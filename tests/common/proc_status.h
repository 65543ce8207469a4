// A process's memory figures from /proc/<pid>/status, for tests and benchmarks.
#pragma once

#include <sys/types.h>

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

}  // namespace llmsvc::test
