// SPDX-License-Identifier: Apache-2.0
// Helpers of the swap tests: scratch directories on the build's disk (not tmpfs, so that
// page-cache behaviour is real), whole-file I/O, chunk metas, and running a check in a
// forked child (for namespaces and seccomp, which must not touch the test process).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "policy/swap/chunk_file.h"

namespace llmsvc::test {

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::current_path() / "swap_test_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Every entry name, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> pattern_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> b(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : b) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    v = static_cast<uint8_t>(x);
  }
  return b;
}

inline policy::ChunkMeta make_meta(uint32_t chunk, hal::KvFormat f = hal::KvFormat::q8, uint16_t n_layer = 4,
                                   uint16_t n_head_kv = 2, uint16_t head_dim = 16, uint16_t n_tokens = 16) {
  policy::ChunkMeta m;
  m.model_hash = 0x1234'5678'9abc'def0ull;
  m.tokens_hash = 0xfeed'0000'0000'0000ull + chunk;
  m.chunk_index = chunk;
  m.first_pos = static_cast<int32_t>(chunk) * 16;
  m.n_tokens = n_tokens;
  m.format = f;
  m.n_layer = n_layer;
  m.n_head_kv = n_head_kv;
  m.head_dim = head_dim;
  return m;
}

// Runs `check` in a forked child; its return value, empty for success, comes back through
// a pipe. Returns "" or the child's message (or how it died).
inline std::string run_in_child(const std::function<std::string()>& check) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::close(fds[0]);
    const std::string msg = check();
    const char* p = msg.data();
    size_t left = msg.size();
    while (left > 0) {
      const ssize_t n = ::write(fds[1], p, left);
      if (n <= 0) break;
      p += n, left -= static_cast<size_t>(n);
    }
    ::_exit(msg.empty() ? 0 : 1);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && msg.empty()) return "";
  if (msg.empty()) msg = WIFSIGNALED(st) ? "child killed by signal " + std::to_string(WTERMSIG(st)) : "child failed";
  return msg;
}

}  // namespace llmsvc::test
