// SPDX-License-Identifier: Apache-2.0
// ClientConnection: socket, handshake, the read turn (callers, else the keeper), per-stream delivery.
#include "runtime/client/client_connection.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/file_io.h"
#include "base/unique_fd.h"
#include "runtime/protocol/handshake.h"

namespace llmsvc::client {
namespace {

namespace p = protocol;
using Clock = std::chrono::steady_clock;

Status unavailable(const std::string& why) { return Status(Code::unavailable, why); }

Status write_all(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return unavailable("llmsvcd connection: write: " + fileio::errno_text(errno));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<ClientConnection>> ClientConnection::connect(const std::string& path, int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return Status(Code::invalid_argument, "socket path '" + path + "' is empty or too long");
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return unavailable("socket: " + fileio::errno_text(errno));
  fileio::UniqueFd owned(fd);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0)
    return unavailable("cannot reach llmsvcd at '" + path + "': " + fileio::errno_text(errno));

  // Handshake, synchronously: HELLO, then wait for WELCOME (or ERROR) within timeout_ms.
  p::ConnectionState state(p::Role::client);
  p::Hello hello;
  hello.client_name = "libllmsvc";
  std::vector<uint8_t> out;
  LLMSVC_RETURN_IF_ERROR(state.on_send(0, hello));
  LLMSVC_RETURN_IF_ERROR(p::append_frame(out, p::Role::client, 0, hello, p::kHandshakeMaxPayload));
  // A daemon refusing this connection (the app's connection quota) writes ERROR and closes
  // at accept, maybe before HELLO goes out: then the write fails, but its reason is already
  // waiting to be read, and it is the answer that matters.
  const Status sent = write_all(fd, out.data(), out.size());
  p::FrameReader reader(p::Role::client);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (auto frame = reader.next()) {
      auto m = p::decode_frame(*frame, state.version());
      if (!m.ok()) return unavailable("llmsvcd handshake: " + m.status().message());
      auto r = state.on_receive(frame->stream, *m);
      if (!r.ok()) return unavailable("llmsvcd handshake: " + r.status().message());
      if (const auto* e = std::get_if<p::Error>(&*m)) {
        Status st = e->to_status();
        // Its own word for why (no common version, the app's connection quota); anything
        // else means the daemon cannot serve us now.
        const bool kept = st.code() == Code::unsupported || st.code() == Code::quota_exceeded;
        return Status(kept ? st.code() : Code::unavailable, "llmsvcd refused the connection: " + st.message());
      }
      const auto* w = std::get_if<p::Welcome>(&*m);
      if (!w) return unavailable("llmsvcd handshake: unexpected " + std::string(p::type_info(frame->type).name));
      LLMSVC_RETURN_IF_ERROR(p::check_welcome(hello, *w));
      const int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (wake < 0) return unavailable("eventfd: " + fileio::errno_text(errno));
      auto conn = std::unique_ptr<ClientConnection>(new ClientConnection(owned.release(), wake, *w, std::move(state)));
      return conn;
    }
    if (!reader.error().ok()) return unavailable("llmsvcd handshake: " + reader.error().message());
    const int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0 && !sent.ok()) return sent;
    if (left <= 0) return unavailable("llmsvcd did not answer the handshake within " + std::to_string(timeout_ms) + " ms");
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, left) < 0 && errno != EINTR) return unavailable("poll: " + fileio::errno_text(errno));
    uint8_t buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) {
      if (!sent.ok()) return sent;
      return unavailable("llmsvcd closed the connection during the handshake");
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      if (!sent.ok()) return sent;
      return unavailable("llmsvcd handshake: read: " + fileio::errno_text(errno));
    }
    (void)reader.feed(std::span<const uint8_t>(buf, static_cast<size_t>(n)));
  }
}

ClientConnection::ClientConnection(int fd, int wake_fd, p::Welcome welcome, p::ConnectionState state)
    : fd_(fd), wake_fd_(wake_fd), welcome_(std::move(welcome)), state_(std::move(state)) {
  writer_.set_max_payload(welcome_.max_frame_payload);
  writer_.set_version(welcome_.version);
  keeper_ = std::thread([this] { keeper_loop(); });
}

ClientConnection::~ClientConnection() {
  stopping_ = true;
  ::shutdown(fd_, SHUT_RDWR);
  {
    std::lock_guard lock(mu_);
    wake_keeper();
  }
  cv_.notify_all();
  keeper_cv_.notify_all();
  if (keeper_.joinable()) keeper_.join();
  ::close(fd_);
  ::close(wake_fd_);
}

bool ClientConnection::alive() const {
  {
    std::lock_guard lock(mu_);
    if (!lost_.ok()) return false;
  }
  // The daemon may have closed its end a moment ago, before any reader saw it (the keeper
  // reads an idle connection, but not at once): ask the socket itself.
  pollfd pfd{fd_, POLLRDHUP, 0};
  return ::poll(&pfd, 1, 0) <= 0 || !(pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

Status ClientConnection::send_locked(uint32_t stream, const p::Message& m, std::unique_lock<std::mutex>& lock) {
  // Caller holds write_mu_ and `lock` (mu_); mu_ is released for the socket write.
  LLMSVC_RETURN_IF_ERROR(state_.on_send(stream, m));
  LLMSVC_RETURN_IF_ERROR(writer_.write(stream, m));
  std::vector<uint8_t> bytes(writer_.pending().begin(), writer_.pending().end());
  writer_.consume(bytes.size());
  lock.unlock();
  Status st = write_all(fd_, bytes.data(), bytes.size());
  if (!st.ok()) fail_all(st.message());
  lock.lock();
  return st;
}

Result<std::shared_ptr<ClientConnection::Request>> ClientConnection::start(const p::Message& request) {
  const bool is_call = std::holds_alternative<p::Call>(request);
  std::unique_lock<std::mutex> wlock(write_mu_, std::defer_lock);
  std::unique_lock lock(mu_);
  // A CALL beyond the daemon's max_calls waits for one of this connection's calls to end
  // (as embedded, where any number may be issued). Waiting is done without write_mu_, so
  // a CANCEL can still go out meanwhile.
  for (;;) {
    cv_.wait(lock, [&] { return !lost_.ok() || !is_call || state_.calls_in_flight() < state_.max_calls(); });
    if (!lost_.ok()) return lost_;
    lock.unlock();
    wlock.lock();
    lock.lock();
    if (!lost_.ok() || !is_call || state_.calls_in_flight() < state_.max_calls()) break;
    wlock.unlock();
  }
  if (!lost_.ok()) return lost_;
  uint32_t stream = next_stream_;
  while (stream == 0 || requests_.count(stream)) ++stream;
  next_stream_ = stream + 1;
  auto r = std::make_shared<Request>();
  r->stream = stream;
  // Registered first: the answer may arrive before send_locked returns.
  requests_[stream] = r;
  // The caller will read its answer itself: the keeper gives up the turn meanwhile.
  wake_keeper();
  Status st = send_locked(stream, request, lock);
  if (!st.ok()) {
    requests_.erase(stream);
    return st;
  }
  return r;
}

Result<std::optional<p::Message>> ClientConnection::next(Request& r, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  auto left_ms = [&] {
    if (timeout_ms < 0) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::max<int64_t>(0, left));
  };
  std::unique_lock lock(mu_);
  // Counted while here, so that the keeper leaves the turn alone. Leaving wakes nobody: the
  // keeper looks again on its own (a wake-up per streamed piece would cost the daemon's
  // compute threads their CPU on a small machine).
  ++waiting_;
  struct Uncount {
    int& n;
    ~Uncount() { --n; }
  } uncount{waiting_};
  for (;;) {
    if (!r.answers.empty()) {
      p::Message m = std::move(r.answers.front());
      r.answers.pop_front();
      return std::optional<p::Message>(std::move(m));
    }
    if (!lost_.ok()) return lost_;
    const int left = left_ms();
    if (timeout_ms >= 0 && left == 0) return std::optional<p::Message>();
    if (!reading_) {  // take the turn and read for ourselves (and for whoever else waits)
      reading_ = true;
      ++turns_;
      lock.unlock();
      read_some(left, false);
      lock.lock();
      reading_ = false;
      lock.unlock();
      cv_.notify_all();  // answers for others, or the turn for the next waiter
      lock.lock();
      continue;
    }
    if (keeper_reading_) wake_keeper();
    if (timeout_ms < 0) cv_.wait(lock);
    else cv_.wait_until(lock, deadline);
  }
}

Result<std::vector<p::Message>> ClientConnection::round_trip(const p::Message& request) {
  auto r = start(request);
  if (!r.ok()) return r.status();
  std::vector<p::Message> answers;
  for (;;) {
    auto m = next(**r);
    if (!m.ok()) return m.status();
    answers.push_back(std::move(**m));
    if (const auto* e = std::get_if<p::Error>(&answers.back())) return e->to_status();
    if (p::is_final_answer(answers.back())) return answers;
  }
}

void ClientConnection::cancel(uint32_t stream) {
  std::lock_guard wlock(write_mu_);
  std::unique_lock lock(mu_);
  if (!lost_.ok() || !state_.call_in_flight(stream)) return;
  (void)send_locked(0, p::Cancel{stream}, lock);
}

void ClientConnection::fail_all(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (lost_.ok()) lost_ = unavailable(why);
    requests_.clear();
  }
  cv_.notify_all();
  keeper_cv_.notify_all();
}

void ClientConnection::wake_keeper() {
  if (!keeper_reading_ && !stopping_) return;
  const uint64_t one = 1;
  ssize_t w = ::write(wake_fd_, &one, sizeof(one));
  (void)w;
}

void ClientConnection::keeper_loop() {
  const int ping_every = welcome_.idle_timeout_ms > 0 ? static_cast<int>(welcome_.idle_timeout_ms / 3) + 1 : -1;
  // The keeper takes the turn when callers have left it alone for this long, and at once on
  // an idle connection (nothing asked). It only looks every so often, on its own condition
  // variable: between two pieces a caller is in its callback, and neither a keeper taking
  // the turn then nor waking it there may cost the caller a wake-up per piece. An idle
  // connection is thus watched (the daemon closing it is seen) within about this long.
  constexpr auto kCallersFirst = std::chrono::milliseconds(50);
  std::unique_lock lock(mu_);
  for (;;) {
    if (stopping_ || !lost_.ok()) return;
    const bool free = !reading_ && waiting_ == 0;
    if (!free || !requests_.empty()) {
      const uint64_t seen = turns_;
      keeper_cv_.wait_for(lock, kCallersFirst);
      if (stopping_ || !lost_.ok()) return;
      if (turns_ != seen || reading_ || waiting_ > 0) continue;
      if (requests_.empty()) continue;  // went idle meanwhile: taken on the next look
    }
    reading_ = keeper_reading_ = true;
    ++turns_;
    lock.unlock();
    read_some(ping_every, true);
    lock.lock();
    reading_ = keeper_reading_ = false;
    cv_.notify_all();
  }
}

bool ClientConnection::read_some(int timeout_ms, bool ping) {
  pollfd pfd[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const int pr = ::poll(pfd, 2, timeout_ms);
  if (stopping_) {
    fail_all("the connection was closed");
    return false;
  }
  if (pr < 0) return false;  // EINTR: the caller looks again
  if (pfd[1].revents & POLLIN) {
    uint64_t n = 0;
    ssize_t r = ::read(wake_fd_, &n, sizeof(n));
    (void)r;
  }
  if (pr == 0) {
    if (ping) {  // quiet: keep the connection from being closed as idle
      std::lock_guard wlock(write_mu_);
      std::unique_lock lock(mu_);
      if (lost_.ok()) (void)send_locked(0, p::Ping{++ping_nonce_}, lock);
    }
    return false;
  }
  if (!(pfd[0].revents & (POLLIN | POLLHUP | POLLERR))) return false;
  const ssize_t n = ::recv(fd_, read_buf_.data(), read_buf_.size(), MSG_DONTWAIT);
  if (n == 0) {
    fail_all(stopping_ ? "the connection was closed" : "llmsvcd closed the connection");
    return true;
  }
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return false;
    fail_all("llmsvcd connection: read: " + fileio::errno_text(errno));
    return true;
  }
  (void)reader_.feed(std::span<const uint8_t>(read_buf_.data(), static_cast<size_t>(n)));
  while (auto frame = reader_.next()) deliver(*frame);
  if (!reader_.error().ok()) fail_all("llmsvcd sent a bad frame: " + reader_.error().message());
  return true;
}

void ClientConnection::deliver(const p::Frame& frame) {
  auto m = p::decode_frame(frame, welcome_.version);
  if (!m.ok())
    return fail_all("llmsvcd sent a bad " + std::string(p::type_info(frame.type).name) + ": " + m.status().message());
  if (const auto* ping = std::get_if<p::Ping>(&*m)) {
    std::lock_guard wlock(write_mu_);
    std::unique_lock lock(mu_);
    if (lost_.ok()) (void)send_locked(0, p::Pong{ping->nonce}, lock);
    return;
  }
  std::unique_lock lock(mu_);
  if (!lost_.ok()) return;
  auto r = state_.on_receive(frame.stream, *m);
  if (!r.ok()) {
    lock.unlock();
    return fail_all("llmsvcd broke the protocol: " + r.status().message());
  }
  if (frame.stream == 0) {
    if (const auto* e = std::get_if<p::Error>(&*m)) {
      lock.unlock();
      return fail_all("llmsvcd closed the connection: " + e->message);
    }
    return;  // PONG
  }
  auto it = requests_.find(frame.stream);
  if (it == requests_.end()) return;
  it->second->answers.push_back(std::move(*m));
  if (r->ends_request) {
    it->second->done = true;
    requests_.erase(it);
  }
  lock.unlock();
  cv_.notify_all();
}

}  // namespace llmsvc::client
