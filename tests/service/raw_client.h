// SPDX-License-Identifier: Apache-2.0
// Raw socket helpers for tests that talk to llmsvcd below the C API: hostile or silent
// clients, hand-made frames (docs/PROTOCOL.md sections 2 and 10).
#pragma once

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace llmsvc::test {

// A blocking connection to the Unix socket `path`; -1 when nothing accepts there.
inline int raw_connect(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends what it can (the peer may already have closed: no SIGPIPE, no error).
inline void raw_send(int fd, const std::string& bytes) {
  const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  (void)n;
}

// HELLO (PROTOCOL.md section 10): versions 1..1, 1 MiB, client "cli".
inline const std::string kRawHello("LLMS\x01\x00\x00\x00\x00\x00\x00\x00\x0f\x00\x00\x00"
                                   "\x01\x00\x01\x00\x00\x00\x10\x00\x03\x00\x00\x00"
                                   "cli",
                                   31);

// Message types used by raw clients (PROTOCOL.md section 5).
enum RawType : uint16_t { kRawHelloType = 1, kRawWelcome = 2, kRawPing = 3, kRawPong = 4, kRawError = 5, kRawCall = 0x20 };

inline void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A frame header announcing `length` payload bytes (which need not follow).
inline std::string raw_header(uint16_t type, uint32_t stream, uint32_t length) {
  std::string h = "LLMS";
  put_le(h, type, 2);
  put_le(h, 0, 2);
  put_le(h, stream, 4);
  put_le(h, length, 4);
  return h;
}

// PING on stream 0 with `nonce`.
inline std::string raw_ping(uint64_t nonce) {
  std::string f = raw_header(kRawPing, 0, 8);
  put_le(f, nonce, 8);
  return f;
}

// Receives until EOF or `timeout_s` without data; returns what came.
inline std::string read_to_eof(int fd, int timeout_s = 10) {
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// Receives exactly one frame (header and payload); "" on EOF, timeout or a bad magic.
inline std::string read_frame(int fd, int timeout_s = 10) {
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  auto read_n = [fd](std::string& into, size_t n) {
    while (n > 0) {
      char buf[4096];
      const ssize_t got = ::recv(fd, buf, n < sizeof(buf) ? n : sizeof(buf), 0);
      if (got <= 0) return false;
      into.append(buf, static_cast<size_t>(got));
      n -= static_cast<size_t>(got);
    }
    return true;
  };
  std::string f;
  if (!read_n(f, 16) || f.compare(0, 4, "LLMS") != 0) return "";
  uint32_t length = 0;
  std::memcpy(&length, f.data() + 12, 4);  // little-endian hosts only, like the tests' hosts
  if (length > (16u << 20) || !read_n(f, length)) return "";
  return f;
}

// The types of the whole frames in `bytes`, in order (a trailing partial frame is left out).
inline std::vector<uint16_t> frame_types(const std::string& bytes) {
  std::vector<uint16_t> types;
  size_t at = 0;
  while (bytes.size() - at >= 16 && bytes.compare(at, 4, "LLMS") == 0) {
    uint16_t type = 0;
    uint32_t length = 0;
    std::memcpy(&type, bytes.data() + at + 4, 2);
    std::memcpy(&length, bytes.data() + at + 12, 4);
    if (bytes.size() - at - 16 < length) break;
    types.push_back(type);
    at += 16 + length;
  }
  return types;
}

}  // namespace llmsvc::test
