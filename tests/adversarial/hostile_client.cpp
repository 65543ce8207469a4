// SPDX-License-Identifier: Apache-2.0
// The hostile client: raw frames over a Unix socket, as any uid.
#include "tests/adversarial/hostile_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/protocol/connection.h"
#include "runtime/protocol/frame.h"

namespace llmsvc::test {

namespace p = protocol;

bool become_uid(uid_t uid) {
  // Raw system calls change this thread's credentials only (glibc's wrappers would change
  // every thread's); gid first, while the thread may still.
  return ::syscall(SYS_setresgid, uid, uid, uid) == 0 && ::syscall(SYS_setresuid, uid, uid, uid) == 0;
}

bool as_uid(uid_t uid, const std::function<void()>& fn) {
  if (::geteuid() != 0) return false;
  bool switched = false;
  std::thread t([&] {
    if (!become_uid(uid)) return;
    switched = true;
    fn();
  });
  t.join();
  return switched;
}

const char* seen_name(Seen s) {
  switch (s) {
    case Seen::open: return "open";
    case Seen::refused: return "refused";
    case Seen::throttled: return "throttled";
    case Seen::disconnected: return "disconnected";
  }
  return "?";
}

HostileClient::~HostileClient() {
  if (fd_ >= 0) ::close(fd_);
}

bool HostileClient::connect(const std::string& socket_path) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  return true;
}

std::string HostileClient::frame(const p::Message& m) {
  std::vector<uint8_t> out;
  const uint32_t stream = p::type_of(m) == p::MsgType::hello ? 0 : next_stream_++;
  if (!p::append_frame(out, p::Role::client, stream, m, p::kMaxMaxPayload, version_).ok()) return {};
  return std::string(out.begin(), out.end());
}

namespace {

// Blocking send of all of `bytes` within `timeout_ms`; false on close or timeout.
bool send_all(int fd, const std::string& bytes, int timeout_ms = 10000) {
  size_t at = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (at < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      at += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    if (std::chrono::steady_clock::now() > deadline) return false;
    pollfd pfd{fd, POLLOUT, 0};
    ::poll(&pfd, 1, 50);
  }
  return true;
}

}  // namespace

bool HostileClient::handshake(uint32_t max_frame_payload) {
  p::Hello hello;
  hello.max_frame_payload = max_frame_payload;
  hello.client_name = "hostile";
  std::vector<uint8_t> out;
  if (!p::append_frame(out, p::Role::client, 0, hello, p::kHandshakeMaxPayload, p::kMinVersion).ok()) return false;
  if (!send_all(fd_, std::string(out.begin(), out.end()))) return false;
  p::FrameReader reader(p::Role::client, p::kMaxMaxPayload);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto f = reader.next()) {
      if (f->type != p::MsgType::welcome) return false;
      auto w = p::decode_frame(*f, p::kMinVersion);
      if (!w.ok()) return false;
      version_ = std::get<p::Welcome>(*w).version;
      return true;
    }
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    uint8_t buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) continue;
    if (!reader.feed({buf, static_cast<size_t>(n)}).ok()) return false;
  }
  return false;
}

bool HostileClient::request(const p::Message& m, uint32_t* stream) {
  const uint32_t s = next_stream_;
  const std::string bytes = frame(m);
  if (bytes.empty()) return false;
  if (stream) *stream = s;
  return send_all(fd_, bytes);
}

Status HostileClient::answer(uint32_t stream, p::Message* out, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  p::FrameReader reader(p::Role::client, p::kMaxMaxPayload);
  if (!pending_.empty()) {
    (void)reader.feed({reinterpret_cast<const uint8_t*>(pending_.data()), pending_.size()});
    pending_.clear();
  }
  for (;;) {
    while (auto f = reader.next()) {
      auto m = p::decode_frame(*f, version_);
      if (!m.ok()) return m.status();
      if (f->stream != stream) continue;  // another request's answer: this client does not track it
      if (const auto* e = std::get_if<p::Error>(&*m)) return e->to_status();
      if (!p::is_final_answer(*m)) continue;
      if (out) *out = std::move(*m);
      return Status::Ok();
    }
    if (std::chrono::steady_clock::now() > deadline) return Status(Code::unavailable, "no answer within " + std::to_string(timeout_s) + " s");
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    uint8_t buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return Status(Code::unavailable, "closed by the daemon");
    if (n < 0) continue;
    if (!reader.feed({buf, static_cast<size_t>(n)}).ok()) return reader.error();
  }
}

ssize_t HostileClient::send_some(const std::string& bytes) {
  const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0) return n;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  return -1;
}

ssize_t HostileClient::read_some(size_t max) {
  std::vector<char> buf(max);
  const ssize_t n = ::recv(fd_, buf.data(), max, MSG_DONTWAIT);
  if (n > 0) return n;
  if (n == 0) return -1;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  return -1;
}

bool HostileClient::closed_by_peer() {
  pollfd pfd{fd_, POLLRDHUP, 0};
  return ::poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

}  // namespace llmsvc::test
