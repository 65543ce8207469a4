// SPDX-License-Identifier: Apache-2.0
// Server, the loop: epoll and its leader/followers, accepting and refusing connections,
// reading and the backpressure that stops it, dropping a connection, shutdown.
#include "runtime/service/server.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/file_io.h"
#include "runtime/protocol/engine_types.h"
#include "runtime/service/log.h"
#include "runtime/service/notify.h"

namespace llmsvc::service {

namespace p = protocol;

Server::Server(AppContexts& apps, ServerOptions options) : apps_(apps), opt_(std::move(options)) {
  // Apps take turns for the operations' threads, one operation of an app at a time: an app
  // flooding requests delays its own, not the others'.
  ops_ = std::make_unique<WorkerPool>(std::max(1, opt_.op_workers), "llmsvcd-ops", 1);
  // One thread more than calls at once: one of them runs the loop.
  calls_ = std::make_unique<WorkerPool>(std::max(1, opt_.call_workers) + 1, "llmsvcd-call",
                                        std::max(1, opt_.call_workers_per_app));
}

Server::~Server() {
  // Workers first: they may still post to sessions.
  calls_.reset();
  ops_.reset();
  for (auto& [fd, s] : sessions_) ::close(fd);
  for (const Listener& l : listeners_) ::close(l.fd);
  if (evfd_ >= 0) ::close(evfd_);
  if (sigfd_ >= 0) ::close(sigfd_);
  if (epfd_ >= 0) ::close(epfd_);
}

void Server::add_listener(int fd, std::string unlink_path) { listeners_.push_back({fd, std::move(unlink_path)}); }

std::string Server::status_line() const {
  return std::to_string(sessions_.size()) + " connections, " + std::to_string(calls_running_.load()) +
         " calls running, " + std::to_string(accepted_) + " accepted";
}

int Server::run() {
  // Connections at once: what the descriptor limit allows, less a reserve, so the daemon
  // refuses a connection before any of its own opens (state files, chunk reads) can fail.
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &nofile);
    (void)::getrlimit(RLIMIT_NOFILE, &nofile);
  }
  const uint64_t fd_room = nofile.rlim_cur > opt_.fd_reserve + 16 ? nofile.rlim_cur - opt_.fd_reserve - 16 : 1;
  max_connections_ = static_cast<uint32_t>(std::min<uint64_t>(fd_room, UINT32_MAX));
  if (opt_.max_connections > 0) max_connections_ = std::min(max_connections_, opt_.max_connections);
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigfd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  evfd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epfd_ < 0 || sigfd_ < 0 || evfd_ < 0) {
    log_line("cannot set up the event loop: " + fileio::errno_text(errno));
    return 1;
  }
  auto watch = [&](int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    return ::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) == 0;
  };
  bool ok = watch(sigfd_) && watch(evfd_);
  if (pressure_.kind() != MemoryPressure::Kind::none) {
    epoll_event ev{};
    ev.events = pressure_.epoll_events();
    ev.data.fd = pressure_.fd();
    ok = ok && ::epoll_ctl(epfd_, EPOLL_CTL_ADD, pressure_.fd(), &ev) == 0;
  }
  for (const Listener& l : listeners_) ok = ok && watch(l.fd);
  if (!ok) {
    log_line("epoll_ctl: " + fileio::errno_text(errno));
    return 1;
  }
  notify_ready("serving: " + status_line());
  log_line("ready (" + std::to_string(listeners_.size()) + " listening sockets, at most " +
           std::to_string(max_connections_) + " connections)");

  last_status_ = last_watchdog_ = last_busy_ = Clock::now();
  if (opt_.watchdog_us > 0) notify_watchdog();
  // The loop runs on the call workers, one at a time (lead()); this thread waits for its end.
  calls_->post_lead([this] { lead(); });
  int rc = 0;
  {
    std::unique_lock lock(loop_mu_);
    loop_cv_.wait(lock, [&] { return loop_rc_.has_value(); });
    rc = *loop_rc_;
  }
  if (rc != 0) return rc;
  if (calls_running_.load() > 0) {
    // Past the hard deadline: calls still running (a long prefill) lose their connection, so
    // that none waits for room to send.
    cancel_all();
    std::vector<SessionPtr> all;
    for (auto& [fd, s] : sessions_) all.push_back(s);
    for (const SessionPtr& s : all) drop(s, "daemon stopping");
  }
  // Let the call workers end (they were cancelled), then send what they left.
  calls_.reset();
  ops_.reset();
  take_outboxes();
  std::vector<SessionPtr> all;
  for (auto& [fd, s] : sessions_) all.push_back(s);
  for (const SessionPtr& s : all) {
    flush(s);
    if (sessions_.count(s->fd)) drop(s, "daemon stopping");
  }
  log_line("stopped");
  return 0;
}

void Server::watch_memory_pressure(MemoryPressure source, std::function<uint64_t()> on_pressure) {
  pressure_ = std::move(source);
  on_pressure_ = std::move(on_pressure);
}

void Server::on_memory_pressure() {
  if (!pressure_.drain()) {
    log_line("memory pressure: " + pressure_.describe() + " closed; no longer watched");
    ::epoll_ctl(epfd_, EPOLL_CTL_DEL, pressure_.fd(), nullptr);
    pressure_ = MemoryPressure();
    return;
  }
  // One line per release: an event that finds nothing to give back (already given, or a
  // call's next turn will) logs nothing, so repeated events cannot fill the journal.
  const uint64_t bytes = on_pressure_ ? on_pressure_() : 0;
  if (bytes > 0) log_line("memory pressure: gave back " + std::to_string(bytes >> 10) + " KiB of model weights");
}

void Server::lead() {
  // Not through calls_: once the loop is over, run() resets it (null first, then the pool's
  // destructor joins this thread), while a call run here may still be finishing.
  WorkerPool& pool = *calls_;
  for (;;) {
    const std::optional<int> rc = loop_step();
    std::vector<CallTask> started = std::move(started_);
    started_.clear();
    size_t i = 0;
    // The round's first call runs on this thread, which hands the loop to an idle worker;
    // the others are queued. So a call does not wait for another thread to wake up.
    const bool here = !rc && !started.empty() && pool.swap_lead([this] { lead(); }, started[0].key);
    if (here) i = 1;
    for (; i < started.size(); ++i) pool.post(std::move(started[i].task), started[i].key);
    if (here) {
      started[0].task();
      const std::string key = std::move(started[0].key);
      started.clear();  // the captures go before the key's slot is given back
      pool.finish_here(key);
      return;
    }
    if (rc) {
      {
        std::lock_guard lock(loop_mu_);
        loop_rc_ = *rc;
      }
      loop_cv_.notify_all();
      return;
    }
  }
}

std::optional<int> Server::loop_step() {
  epoll_event events[64];
  const int n = ::epoll_wait(epfd_, events, 64, 100);
  if (n < 0 && errno != EINTR) {
    log_line("epoll_wait: " + fileio::errno_text(errno));
    return 1;
  }
  for (int i = 0; i < n; ++i) {
    const int fd = events[i].data.fd;
    if (fd == sigfd_) {
      signalfd_siginfo si;
      while (::read(sigfd_, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
        log_line(std::string("signal ") + ::strsignal(static_cast<int>(si.ssi_signo)));
        if (stopping_) cancel_all();  // a second signal: do not wait for calls
        begin_shutdown();
      }
      continue;
    }
    if (pressure_.kind() != MemoryPressure::Kind::none && fd == pressure_.fd()) {
      on_memory_pressure();
      continue;
    }
    if (fd == evfd_) {
      uint64_t v;
      ssize_t r = ::read(evfd_, &v, sizeof(v));
      (void)r;
      continue;
    }
    bool is_listener = false;
    for (const Listener& l : listeners_) is_listener = is_listener || l.fd == fd;
    if (is_listener) {
      accept_all(fd);
      continue;
    }
    auto it = sessions_.find(fd);
    if (it == sessions_.end()) continue;
    SessionPtr s = it->second;
    if ((events[i].events & (EPOLLHUP | EPOLLERR)) && !s->reading) {
      drop(s, "hung up");  // not being read (backpressure): nothing more can come or go
      continue;
    }
    if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) on_readable(s);
    if (sessions_.count(fd) && sessions_[fd] == s && (events[i].events & EPOLLOUT)) flush(s);
  }
  take_outboxes();
  check_timers();
  const auto now = Clock::now();
  if (!stopping_ && now - last_status_ > std::chrono::seconds(5)) {
    notify_status("serving: " + status_line());
    last_status_ = now;
  }
  if (opt_.watchdog_us > 0 && now - last_watchdog_ >= std::chrono::microseconds(opt_.watchdog_us / 2)) {
    notify_watchdog();
    last_watchdog_ = now;
  }
  if (!stopping_ && opt_.exit_idle_ms > 0) {
    if (!sessions_.empty() || calls_running_.load() > 0) {
      last_busy_ = now;
    } else if (now - last_busy_ > std::chrono::milliseconds(opt_.exit_idle_ms)) {
      // Clients that connect from now on wait in systemd's socket, which starts us again.
      log_line("no clients for " + std::to_string(opt_.exit_idle_ms) + " ms: exiting");
      begin_shutdown();
    }
  }
  if (stopping_) {
    if (!cancelled_all_ && now >= stop_deadline_) {
      log_line("stop timeout: cancelling " + std::to_string(calls_running_.load()) + " calls");
      cancel_all();
    }
    bool flushed = true;
    for (auto& [fd, s] : sessions_) flushed = flushed && pending_bytes(s) == 0;
    const bool hard = now >= stop_deadline_ + std::chrono::seconds(3);
    if ((calls_running_.load() == 0 && flushed) || hard) return 0;
  }
  return std::nullopt;
}

void Server::begin_shutdown() {
  if (stopping_) return;
  stopping_ = true;
  stop_deadline_ = Clock::now() + std::chrono::milliseconds(opt_.stop_timeout_ms);
  notify_stopping("stopping: " + status_line());
  for (const Listener& l : listeners_) {
    ::epoll_ctl(epfd_, EPOLL_CTL_DEL, l.fd, nullptr);
    ::close(l.fd);
    if (!l.unlink_path.empty()) ::unlink(l.unlink_path.c_str());
  }
  listeners_.clear();
}

void Server::cancel_all() {
  cancelled_all_ = true;
  for (auto& [fd, s] : sessions_)
    for (auto& [stream, flag] : s->cancel_flags) flag->store(true);
}

// ------------------------------------------------------------------ connections

void Server::accept_all(int listen_fd) {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The connection stays in the backlog and the listener stays readable: without a
        // pause the loop would spin on it. Try again in a while.
        pause_accepting(fileio::errno_text(errno));
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        log_line("accept: " + fileio::errno_text(errno));
      }
      return;
    }
    auto who = peer_identity(fd);
    if (!who.ok()) {
      log_line(who.status().message());
      ::close(fd);
      continue;
    }
    if (std::string why = accept_refusal(who->uid); !why.empty()) {
      // Refused before it holds anything: one ERROR frame if the socket takes it, then closed.
      log_event(LogLevel::warning, "refusing a connection of " + who->label() + ": " + why, {&*who, {}, 0});
      std::vector<uint8_t> bytes;
      if (p::append_frame(bytes, p::Role::server, 0, p::error_message(Status(Code::quota_exceeded, why)),
                          p::kHandshakeMaxPayload, p::kMinVersion)
              .ok())
        (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      continue;
    }
    auto s = std::make_shared<Session>(fd, *who);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      log_line("epoll_ctl: " + fileio::errno_text(errno));
      ::close(fd);
      continue;
    }
    sessions_[fd] = s;
    ++accepted_;
    ++app_connections_[s->app.uid];
  }
}

std::string Server::accept_refusal(uid_t uid) const {
  auto held_it = app_connections_.find(uid);
  const uint32_t held = held_it == app_connections_.end() ? 0 : held_it->second;
  if (const uint32_t quota = opt_.quotas.of(uid).connections; quota > 0 && held >= quota)
    return "this app has " + std::to_string(held) + " connections open, its quota";
  if (sessions_.size() >= max_connections_)
    return "llmsvcd serves " + std::to_string(sessions_.size()) + " connections, its limit";
  // The last few places go to apps that hold none, so no app can crowd the others out.
  if (held > 0 && sessions_.size() + opt_.reserve_for_new_apps >= max_connections_)
    return "llmsvcd is near its limit of " + std::to_string(max_connections_) +
           " connections; the rest are kept for apps that have none";
  return {};
}

void Server::pause_accepting(const std::string& why) {
  if (accept_paused_) return;
  accept_paused_ = true;
  accept_resume_ = Clock::now() + std::chrono::milliseconds(kAcceptPauseMs);
  for (const Listener& l : listeners_) {
    epoll_event ev{};
    ev.data.fd = l.fd;
    ::epoll_ctl(epfd_, EPOLL_CTL_MOD, l.fd, &ev);  // no events: the backlog waits
  }
  const auto now = Clock::now();
  if (starved_logged_ && now - *starved_logged_ < std::chrono::seconds(kStarvedLogEveryS)) {
    ++starved_unlogged_;
    return;
  }
  std::string line = "cannot accept (" + why + ") with " + std::to_string(sessions_.size()) +
                     " connections open: new ones wait until some close";
  if (starved_unlogged_ > 0)
    line += " (" + std::to_string(starved_unlogged_) + " more such pauses since the last line)";
  log_line(line);
  starved_logged_ = now;
  starved_unlogged_ = 0;
}

void Server::resume_accepting() {
  accept_paused_ = false;
  for (const Listener& l : listeners_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = l.fd;
    ::epoll_ctl(epfd_, EPOLL_CTL_MOD, l.fd, &ev);
  }
}

void Server::drop(const SessionPtr& s, const std::string& why) {
  // A protocol error was logged where it was found; a client closing is no event.
  if (why != "closed by the client" && why != kAfterProtocolError)
    log_event(LogLevel::info, "connection of " + s->app.label() + " closed: " + why, {&s->app, {}, 0});
  if (auto it = app_connections_.find(s->app.uid); it != app_connections_.end() && --it->second == 0)
    app_connections_.erase(it);
  ::epoll_ctl(epfd_, EPOLL_CTL_DEL, s->fd, nullptr);
  {
    std::lock_guard wlock(s->wmu);  // no worker is writing to it, nor will (the number may be reused)
    s->direct_ok = false;
    ::close(s->fd);
    std::lock_guard lock(s->mu);
    s->dead = true;
    s->outbox.clear();
  }
  sessions_.erase(s->fd);
  s->drained.notify_all();
  for (auto& [stream, flag] : s->cancel_flags) flag->store(true);
  for (auto& [h, handle] : s->handles) release_handle(s->app, handle.id);
  s->handles.clear();
}

size_t Server::held_answer_bytes(const SessionPtr& s) {
  size_t bytes = s->list_bytes;
  std::lock_guard wlock(s->wmu);
  bytes += s->writer.pending_bytes();
  std::lock_guard lock(s->mu);
  return bytes + s->outbox_bytes;
}

bool Server::can_take_request(const SessionPtr& s) {
  return !s->closing && s->state.in_flight() < opt_.max_requests_in_flight &&
         s->ops_in_flight < opt_.max_ops_in_flight && held_answer_bytes(s) < opt_.max_unsent_bytes;
}

void Server::update_interest(const SessionPtr& s) {
  const size_t pending = pending_bytes(s);
  // Nothing more is read while a complete frame waits: what is held undecoded stays within
  // one read and the frame in progress.
  const bool read = !s->eof && s->reader.queued() == 0 && can_take_request(s);
  const bool write = pending > 0;
  if (read == s->reading && write == s->want_write) return;
  s->reading = read;
  s->want_write = write;
  epoll_event ev{};
  ev.events = (read ? EPOLLIN | EPOLLRDHUP : 0u) | (write ? EPOLLOUT : 0u);
  ev.data.fd = s->fd;
  ::epoll_ctl(epfd_, EPOLL_CTL_MOD, s->fd, &ev);
}

void Server::on_readable(const SessionPtr& s) {
  uint8_t buf[kReadChunkBytes];
  for (int round = 0; round < 4 && s->reading && !s->closing; ++round) {
    const ssize_t n = ::recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      s->last_activity = Clock::now();
      s->bytes_received += static_cast<uint64_t>(n);
      (void)s->reader.feed(std::span<const uint8_t>(buf, static_cast<size_t>(n)));  // error kept in reader
      // Calls that ended before the app sent these bytes are finished first (send_result).
      bool queued = false;
      {
        std::lock_guard lock(s->mu);
        queued = !s->outbox.empty();
      }
      if (queued) {
        take_outbox(s);
        if (!sessions_.count(s->fd) || sessions_[s->fd] != s) return;
      }
      process_frames(s);
      if (!sessions_.count(s->fd)) return;
      // Frames left undecoded (the connection is at its requests-in-flight bound): read no
      // more until they are taken, so a flood of small requests holds at most one chunk here.
      if (s->reader.queued() > 0) break;
      continue;
    }
    if (n == 0) {
      s->eof = true;
      break;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
    drop(s, "read: " + fileio::errno_text(errno));
    return;
  }
  if (s->eof) {
    // The client is gone (a truncated frame is simply the end): its calls are cancelled.
    drop(s, s->reader.mid_frame() ? "closed by the client mid-frame" : "closed by the client");
    return;
  }
  update_interest(s);
}

void Server::process_frames(const SessionPtr& s) {
  while (sessions_.count(s->fd) && can_take_request(s)) {
    auto frame = s->reader.next();
    if (!frame) break;
    handle_frame(s, *frame);
  }
  if (sessions_.count(s->fd) && !s->closing && s->reader.queued() == 0 && !s->reader.error().ok())
    connection_error(s, s->reader.error());
}

void Server::connection_error(const SessionPtr& s, const Status& st) {
  if (s->closing) return;
  log_event(LogLevel::warning, "protocol error from " + s->app.label() + ": " + st.message(), {&s->app, {}, 0});
  send(s, 0, p::error_message(st));
  s->closing = true;
  flush(s);
}

}  // namespace llmsvc::service
