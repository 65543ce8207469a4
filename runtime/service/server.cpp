// Server: the epoll loop, request dispatch, call workers, shutdown.
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
#include "llmsvc/llmsvc.h"
#include "runtime/api/options.h"
#include "runtime/protocol/engine_types.h"
#include "runtime/protocol/handshake.h"
#include "runtime/service/log.h"
#include "runtime/service/notify.h"

namespace llmsvc::service {
namespace {

namespace p = protocol;

constexpr size_t kPieceSplit = kPieceSplitBytes;
constexpr size_t kReadChunk = kReadChunkBytes;
constexpr const char* kAfterProtocolError = "after a protocol error";

int ms_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count());
}

// Splits `text` (valid UTF-8) into parts of at most kPieceSplit bytes, at code point starts.
std::vector<std::string_view> split_piece(std::string_view text) {
  std::vector<std::string_view> parts;
  while (text.size() > kPieceSplit) {
    size_t cut = kPieceSplit;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    parts.push_back(text.substr(0, cut));
    text.remove_prefix(cut);
  }
  parts.push_back(text);
  return parts;
}

size_t estimate_bytes(const p::Message& m) {
  if (const auto* piece = std::get_if<p::Piece>(&m)) return p::kHeaderBytes + 8 + piece->text.size();
  return 256;
}

}  // namespace

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
  uint8_t buf[kReadChunk];
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

void Server::handle_frame(const SessionPtr& s, const p::Frame& frame) {
  auto m = p::decode_frame(frame, s->state.version());
  if (!m.ok()) {
    if (frame.stream != 0 && s->state.phase() == p::Phase::ready) {
      Status tracked = s->state.on_bad_request(frame.stream, frame.type);
      if (!tracked.ok()) return connection_error(s, tracked);
      return send_error(s, frame.stream, m.status());
    }
    return connection_error(s, m.status());
  }
  auto r = s->state.on_receive(frame.stream, *m);
  if (!r.ok()) return connection_error(s, r.status());
  if (const auto* hello = std::get_if<p::Hello>(&*m)) {
    auto version = p::negotiate(*hello);
    if (!version.ok()) return connection_error(s, version.status());
    p::Welcome w;
    w.version = *version;
    w.max_frame_payload = opt_.max_frame_payload;
    w.max_prompt_bytes = opt_.max_prompt_bytes;
    w.max_context_tokens = static_cast<uint32_t>(apps_.engine().n_ctx());
    w.max_calls = opt_.max_calls;
    w.idle_timeout_ms = opt_.idle_timeout_ms;
    w.server = opt_.server_name;
    w.model = opt_.model_name.substr(0, p::kMaxNameBytes);
    {
      std::lock_guard wlock(s->wmu);
      s->writer.set_max_payload(hello->max_frame_payload);
    }
    s->peer_max_payload = hello->max_frame_payload;
    send(s, 0, w);
    {
      std::lock_guard wlock(s->wmu);
      s->writer.set_version(s->state.version());  // what follows is laid out as the agreed version
    }
    s->reader.set_max_payload(opt_.max_frame_payload);
    return;
  }
  if (const auto* ping = std::get_if<p::Ping>(&*m)) return send(s, 0, p::Pong{ping->nonce});
  if (std::holds_alternative<p::Pong>(*m)) return;
  if (const auto* cancel = std::get_if<p::Cancel>(&*m)) {
    if (r->ignore) return;
    if (auto it = s->cancel_flags.find(cancel->call); it != s->cancel_flags.end()) it->second->store(true);
    return;
  }
  if (!r->refuse.ok()) return send_error(s, frame.stream, r->refuse);
  if (stopping_) return send_error(s, frame.stream, Status(Code::unavailable, "llmsvcd is stopping"));
  handle_request(s, frame.stream, *m);
}

void Server::handle_request(const SessionPtr& s, uint32_t stream, const p::Message& m) {
  const AppIdentity app = s->app;
  if (const auto* req = std::get_if<p::ContextClose>(&m)) return close_handle(s, stream, req->handle);
  if (const auto* req = std::get_if<p::Call>(&m)) return start_call(s, stream, *req);
  // The rest are context operations, run on the ops pool; each holds one of the connection's
  // max_ops_in_flight places until its answer is taken (take_outbox).
  auto answer = [this, s, stream](p::Message msg, bool assign = false) {
    post(s, Outgoing{stream, std::move(msg), assign, false, true, nullptr});
  };
  auto fail = [this, s, stream](const Status& st) {
    post(s, Outgoing{stream, p::error_message(st), false, false, true, nullptr});
  };
  const bool opens = std::holds_alternative<p::ContextNew>(m) || std::holds_alternative<p::ContextOpen>(m);
  if (opens && s->handles.size() + s->ops_in_flight >= opt_.max_handles)
    return send_error(s, stream, Status(Code::quota_exceeded, "this connection has " + std::to_string(s->handles.size()) +
                                                                  " contexts open, its limit; close one first"));
  if (const auto* req = std::get_if<p::ContextNew>(&m)) {
    if (req->system_prompt && req->system_prompt->size() > opt_.max_prompt_bytes)
      return send_error(s, stream, Status(Code::invalid_argument, "system prompt longer than the daemon's " +
                                                                      std::to_string(opt_.max_prompt_bytes) + " bytes"));
    ContextOptions o;
    o.id = req->id.value_or("");
    o.system_prompt = req->system_prompt.value_or("");
    o.raw = req->raw;
    ++s->ops_in_flight;
    ops_->post([this, app, o, answer, fail] {
      auto id = apps_.create(app, o);
      if (!id.ok()) return fail(id.status());
      answer(p::ContextOpened{0, *id}, true);
    }, app.scope());
    return;
  }
  if (const auto* req = std::get_if<p::ContextOpen>(&m)) {
    ++s->ops_in_flight;
    ops_->post([this, app, id = req->id, answer, fail] {
      if (Status st = apps_.open(app, id); !st.ok()) return fail(st);
      answer(p::ContextOpened{0, id}, true);
    }, app.scope());
    return;
  }
  if (const auto* req = std::get_if<p::ContextDelete>(&m)) {
    ++s->ops_in_flight;
    ops_->post([this, app, id = req->id, answer, fail] {
      if (Status st = apps_.remove(app, id); !st.ok()) return fail(st);
      answer(p::Ack{});
    }, app.scope());
    return;
  }
  if (std::holds_alternative<p::ContextList>(m)) {
    ++s->ops_in_flight;
    ops_->post([this, s, stream, app, fail] {
      auto ids = apps_.list(app);
      if (!ids.ok()) return fail(ids.status());
      // Encoded by the loop, part by part, as the client reads (produce_lists).
      post(s, Outgoing{stream, p::ContextListReply{}, false, false, true,
                       std::make_shared<std::vector<std::string>>(std::move(ids).value())});
    }, app.scope());
    return;
  }
  if (const auto* req = std::get_if<p::ContextInfo>(&m)) {
    ++s->ops_in_flight;
    ops_->post([this, app, id = req->id, answer, fail] {
      auto info = apps_.info(app, id);
      if (!info.ok()) return fail(info.status());
      answer(p::to_wire(*info));
    }, app.scope());
    return;
  }
  if (std::holds_alternative<p::Stats>(m)) {
    const int32_t open = static_cast<int32_t>(s->handles.size());
    ++s->ops_in_flight;
    ops_->post([this, app, open, answer, fail] {
      auto st = apps_.stats(app);
      if (!st.ok()) return fail(st.status());
      answer(p::to_wire(*st, open));
    }, app.scope());
    return;
  }
  send_error(s, stream, Status(Code::internal, "unhandled request"));
}

void Server::release_handle(const AppIdentity& app, const std::string& id) {
  // A closed context stays known to the engine, its chunks under the memory policy like any
  // other's: an app that restarts or reconnects switches back in without reading storage.
  // The contexts quota and the KV budget bound what closed contexts hold.
  (void)apps_.close(app, id);
}

void Server::close_handle(const SessionPtr& s, uint32_t stream, uint32_t handle) {
  auto it = s->handles.find(handle);
  if (it == s->handles.end())
    return send_error(s, stream, Status(Code::invalid_argument, "no context handle " + std::to_string(handle)));
  if (it->second.call != 0) {
    // Its call is cancelled; the ACK follows the call's RESULT (call_finished).
    if (auto f = s->cancel_flags.find(it->second.call); f != s->cancel_flags.end()) f->second->store(true);
    it->second.close_streams.push_back(stream);
    return;
  }
  release_handle(s->app, it->second.id);
  s->handles.erase(it);
  send(s, stream, p::Ack{});
}

void Server::start_call(const SessionPtr& s, uint32_t stream, const p::Call& call) {
  auto it = s->handles.find(call.handle);
  if (it == s->handles.end())
    return send_error(s, stream, Status(Code::invalid_argument, "no context handle " + std::to_string(call.handle)));
  if (it->second.call != 0 || !it->second.close_streams.empty())
    return send_error(s, stream, Status(Code::busy, "context '" + it->second.id + "' is inside another call"));
  if (call.prompt.size() > opt_.max_prompt_bytes)
    return send_error(s, stream, Status(Code::context_overflow, "prompt of " + std::to_string(call.prompt.size()) +
                                                                    " bytes is longer than any context holds (at most " +
                                                                    std::to_string(opt_.max_prompt_bytes) + " bytes)"));
  auto params = api::read_call_args(call.options);  // the C API's rules, again
  if (!params.ok()) return send_error(s, stream, params.status());
  {
    std::lock_guard lock(app_calls_mu_);
    uint32_t& n = app_calls_[s->app.uid];
    if (const uint32_t quota = opt_.quotas.of(s->app.uid).concurrent_calls; quota > 0 && n >= quota)
      return send_error(s, stream, Status(Code::quota_exceeded, "this app has " + std::to_string(n) +
                                                                    " calls in flight, its quota; wait for one to end"));
    ++n;
  }
  auto flag = std::make_shared<std::atomic<bool>>(false);
  it->second.call = stream;
  s->call_handle[stream] = call.handle;
  s->cancel_flags[stream] = flag;
  ++calls_running_;
  auto task = [this, s, stream, flag, app = s->app, id = it->second.id, prompt = call.prompt,
               params = std::move(params).value()]() mutable {
    params.cancel = flag.get();
    PieceFn on_piece = [&](std::string_view text, int32_t token) {
      for (std::string_view part : split_piece(text)) {
        if (!send_piece(s, stream, p::Piece{token, std::string(part)})) return false;
      }
      return wait_for_room(s);
    };
    CallStats stats;
    Status st = apps_.call(app, id, prompt, params, on_piece, &stats);
    {
      // Out of the app's count before its answer goes: the app may send its next call the
      // moment it has this one's answer.
      std::lock_guard lock(app_calls_mu_);
      if (--app_calls_[app.uid] == 0) app_calls_.erase(app.uid);
    }
    // Before the answer, whose kick wakes the loop to see it. A loop that stops meanwhile
    // still sends the answer: it joins the workers, then takes the outboxes.
    --calls_running_;
    bool delivered = false;
    if (st.ok() || st.code() == Code::cancelled) {
      delivered = send_result(s, stream, p::to_wire(st, stats));
    } else {
      // The daemon's own failures are logged; an app's mistakes (bad input, quotas, busy
      // contexts) are its to see, and would let it fill the log.
      const Code c = st.code();
      if (c == Code::internal || c == Code::io || c == Code::out_of_memory)
        log_event(LogLevel::error, "call of " + app.label() + " failed: " + st.message(), {&app, id, stream});
      delivered = send_result(s, stream, p::error_message(st));
    }
    if (!delivered) {  // no kick: wake the loop for calls_running_ anyway
      uint64_t one = 1;
      ssize_t w = ::write(evfd_, &one, sizeof(one));
      (void)w;
    }
  };
  started_.push_back({std::move(task), s->app.scope()});  // lead() runs or queues it
}

void Server::call_finished(const SessionPtr& s, uint32_t stream) {
  s->cancel_flags.erase(stream);
  auto ch = s->call_handle.find(stream);
  if (ch == s->call_handle.end()) return;
  const uint32_t handle = ch->second;
  s->call_handle.erase(ch);
  auto it = s->handles.find(handle);
  if (it == s->handles.end()) return;
  it->second.call = 0;
  if (it->second.close_streams.empty()) return;
  const std::vector<uint32_t> closes = std::move(it->second.close_streams);
  release_handle(s->app, it->second.id);
  s->handles.erase(it);
  for (uint32_t c : closes) send(s, c, p::Ack{});
}

// ------------------------------------------------------------------ sending

void Server::send(const SessionPtr& s, uint32_t stream, const p::Message& m) {
  bool finished = false;
  {
    std::lock_guard wlock(s->wmu);
    finished = encode_locked(s, stream, m);
  }
  if (finished) call_finished(s, stream);
}

bool Server::encode_locked(const SessionPtr& s, uint32_t stream, const p::Message& m, bool written) {
  if (Status st = s->state.on_send(stream, m); !st.ok()) {
    // A worker's answer that went out before the loop closed the connection (an ERROR on
    // stream 0 since) is no fault of ours.
    if (!(written && s->state.phase() == p::Phase::closed))
      log_line("internal: " + std::string(written ? "sent" : "not sent") + " to " + s->app.label() + ": " +
               st.message());
    return false;
  }
  if (!written) {
    if (s->writer.pending_bytes() == 0) s->last_write_progress = Clock::now();  // the write clock starts now
    Status st = s->writer.write(stream, m);
    if (!st.ok()) {
      log_line("internal: cannot encode for " + s->app.label() + ": " + st.message());
      if (stream != 0 && p::is_final_answer(m))
        (void)s->writer.write(stream, p::error_message(Status(Code::internal, st.message())));
    }
  }
  s->direct_ok = s->state.phase() == p::Phase::ready;
  return stream != 0 && p::type_of(m) != p::MsgType::piece && p::is_final_answer(m) && s->call_handle.count(stream);
}

size_t Server::pending_bytes(const SessionPtr& s) {
  std::lock_guard wlock(s->wmu);
  return s->writer.pending_bytes();
}

void Server::send_error(const SessionPtr& s, uint32_t stream, const Status& st) { send(s, stream, p::error_message(st)); }

void Server::produce_lists(const SessionPtr& s) {
  std::vector<uint32_t> finished;
  {
    std::lock_guard wlock(s->wmu);
    const size_t budget = s->peer_max_payload - 64;
    while (!s->lists.empty() && s->writer.pending_bytes() < opt_.max_unsent_bytes) {
      ListCursor& c = s->lists.front();
      p::ContextListReply part;
      size_t bytes = 0;
      while (c.next < c.ids->size() && part.ids.size() < p::kMaxListIds &&
             bytes + 4 + (*c.ids)[c.next].size() <= budget) {
        bytes += 4 + (*c.ids)[c.next].size();
        part.ids.push_back(std::move((*c.ids)[c.next++]));
      }
      c.bytes -= bytes;
      s->list_bytes -= bytes;
      part.more = c.next < c.ids->size();
      const uint32_t stream = c.stream;
      if (!part.more) s->lists.pop_front();
      if (encode_locked(s, stream, part)) finished.push_back(stream);
    }
  }
  for (uint32_t stream : finished) call_finished(s, stream);
}

void Server::flush(const SessionPtr& s) {
  std::string failed;
  size_t pending = 0;
  for (bool more = true; more && failed.empty();) {
    if (!s->lists.empty()) produce_lists(s);
    std::lock_guard wlock(s->wmu);
    while (s->writer.pending_bytes() > 0) {
      auto data = s->writer.pending();
      const ssize_t n = ::send(s->fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        s->writer.consume(static_cast<size_t>(n));
        s->bytes_sent += static_cast<uint64_t>(n);
        s->last_write_progress = s->last_activity = Clock::now();
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      failed = n < 0 ? "write: " + fileio::errno_text(errno) : "write failed";
      break;
    }
    pending = s->writer.pending_bytes();
    // All sent and more of a list to encode: another round (the socket may take it too).
    more = pending == 0 && !s->lists.empty();
    std::lock_guard lock(s->mu);
    s->unsent_bytes = pending;
  }
  if (!failed.empty()) return drop(s, failed);
  s->drained.notify_all();
  if (s->closing && pending == 0) return drop(s, kAfterProtocolError);
  // Room again: frames held back by the bounds.
  if (s->reader.queued() > 0 && !s->closing) process_frames(s);
  if (sessions_.count(s->fd) && sessions_[s->fd] == s) update_interest(s);
}

bool Server::post(const SessionPtr& s, Outgoing out) {
  {
    std::lock_guard lock(s->mu);
    if (s->dead) {
      if (out.assign_handle) {
        if (const auto* opened = std::get_if<p::ContextOpened>(&out.message)) (void)apps_.close(s->app, opened->id);
      }
      return false;
    }
    s->outbox_bytes += estimate_bytes(out.message);
    s->outbox.push_back(std::move(out));
  }
  kick(s);
  return true;
}

void Server::kick(const SessionPtr& s) {
  {
    std::lock_guard lock(s->mu);
    if (s->queued_dirty) return;
    s->queued_dirty = true;
  }
  {
    std::lock_guard lock(dirty_mu_);
    dirty_.push_back(s);
  }
  uint64_t one = 1;
  ssize_t w = ::write(evfd_, &one, sizeof(one));
  (void)w;
}

size_t Server::send_now_locked(const SessionPtr& s) {
  auto data = s->writer.pending();
  const ssize_t n = ::send(s->fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0) {
    s->writer.consume(static_cast<size_t>(n));
    s->bytes_sent += static_cast<uint64_t>(n);
  }
  const size_t left = s->writer.pending_bytes();
  if (left > 0) {
    // A full socket buffer or an error: the loop sends the rest, or sees the error.
    s->last_write_progress = Clock::now();
    std::lock_guard lock(s->mu);
    s->unsent_bytes = left;
  }
  return left;
}

bool Server::send_piece(const SessionPtr& s, uint32_t stream, p::Piece piece) {
  {
    // Straight to the socket only in order: nothing left unsent and nothing queued (the loop
    // empties the outbox and encodes it under wmu, so nothing is in between). A worker does
    // not wait for the loop's turn at the socket: it queues instead.
    std::unique_lock wlock(s->wmu, std::try_to_lock);
    if (wlock.owns_lock() && s->direct_ok && s->writer.pending_bytes() == 0) {
      bool queued = false;
      {
        std::lock_guard lock(s->mu);  // (not dead: drop() clears direct_ok under wmu first)
        queued = !s->outbox.empty();
      }
      if (!queued && s->writer.write(stream, piece).ok()) {
        if (send_now_locked(s) == 0) return true;
        wlock.unlock();
        kick(s);
        return true;
      }
    }
  }
  return post(s, Outgoing{stream, std::move(piece), false});
}

bool Server::send_result(const SessionPtr& s, uint32_t stream, p::Message m) {
  bool sent = false;
  {
    // As send_piece, in order only; but a final answer waits for the loop's turn at the
    // socket (the loop holds wmu briefly) rather than queueing behind a wake-up.
    std::lock_guard wlock(s->wmu);
    if (s->direct_ok && s->writer.pending_bytes() == 0) {
      std::unique_lock lock(s->mu);  // (not dead: drop() clears direct_ok under wmu first)
      if (s->outbox.empty() && s->writer.write(stream, m).ok()) {
        // The record goes first: the loop can take it only once wmu is released, when the
        // answer is on its way, and it takes it before it reads what the app sends next.
        s->outbox.push_back(Outgoing{stream, std::move(m), false, true});
        lock.unlock();
        (void)send_now_locked(s);
        sent = true;
      }
    }
  }
  if (!sent) return post(s, Outgoing{stream, std::move(m), false});
  kick(s);  // the record's bookkeeping, and any bytes left unsent
  return true;
}

bool Server::wait_for_room(const SessionPtr& s) {
  std::unique_lock lock(s->mu);
  const bool ok = s->drained.wait_for(lock, std::chrono::milliseconds(opt_.write_timeout_ms), [&] {
    return s->dead || s->unsent_bytes + s->outbox_bytes <= opt_.max_unsent_bytes;
  });
  return ok && !s->dead;
}

void Server::take_outboxes() {
  std::vector<SessionPtr> dirty;
  {
    std::lock_guard lock(dirty_mu_);
    dirty.swap(dirty_);
  }
  for (const SessionPtr& s : dirty) take_outbox(s);
}

void Server::take_outbox(const SessionPtr& s) {
  std::vector<uint32_t> finished;
  {
    // Emptied and encoded under wmu: a worker's piece cannot slip in between.
    std::lock_guard wlock(s->wmu);
    std::deque<Outgoing> out;
    {
      std::lock_guard lock(s->mu);
      out.swap(s->outbox);
      s->outbox_bytes = 0;
      s->queued_dirty = false;
    }
    if (!sessions_.count(s->fd) || sessions_[s->fd] != s) return;
    for (Outgoing& o : out) {
      if (o.op_done && s->ops_in_flight > 0) --s->ops_in_flight;
      if (o.list_ids) {
        ListCursor c{o.stream, std::move(o.list_ids), 0, 0};
        for (const std::string& id : *c.ids) c.bytes += 4 + id.size();
        s->list_bytes += c.bytes;
        s->lists.push_back(std::move(c));
        continue;
      }
      if (o.assign_handle) {
        auto* opened = std::get_if<p::ContextOpened>(&o.message);
        const uint32_t h = s->next_handle++;
        if (s->next_handle == 0) s->next_handle = 1;
        s->handles[h] = Session::Handle{opened->id, 0, {}};
        opened->handle = h;
      }
      if (encode_locked(s, o.stream, o.message, o.already_sent)) finished.push_back(o.stream);
    }
  }
  for (uint32_t stream : finished) call_finished(s, stream);
  flush(s);
}

namespace {

// One minimum-rate window (Session's send_window / recv_window): opened while bytes are owed,
// checked when it has lasted `window`; "" or why the connection goes.
std::string check_rate(std::optional<Clock::time_point>& start, uint64_t& at_start, uint64_t moved_total, bool owed,
                       Clock::time_point now, int window_ms, uint32_t min_rate, const char* what) {
  if (!owed || min_rate == 0) {
    start.reset();
    return {};
  }
  if (!start) {
    start = now;
    at_start = moved_total;
    return {};
  }
  const int elapsed = ms_between(*start, now);
  if (elapsed < window_ms) return {};
  const uint64_t moved = moved_total - at_start;
  const uint64_t needed = static_cast<uint64_t>(min_rate) * static_cast<uint64_t>(elapsed) / 1000;
  if (moved < needed)
    return std::string(what) + " too slowly (" + std::to_string(moved) + " bytes in " + std::to_string(elapsed) +
           " ms, the minimum is " + std::to_string(min_rate) + " bytes/s)";
  start = now;
  at_start = moved_total;
  return {};
}

}  // namespace

void Server::check_timers() {
  const auto now = Clock::now();
  if (accept_paused_ && now >= accept_resume_ && !stopping_) resume_accepting();
  std::vector<std::pair<SessionPtr, std::string>> expired;
  for (auto& [fd, s] : sessions_) {
    size_t pending = 0;
    uint64_t sent = 0;
    Clock::time_point progress;
    {
      std::lock_guard wlock(s->wmu);
      pending = s->writer.pending_bytes();
      progress = s->last_write_progress;
      sent = s->bytes_sent;
    }
    std::string slow = check_rate(s->send_window, s->sent_at_window, sent, pending > 0, now, opt_.rate_window_ms,
                                  opt_.min_rate_bytes_per_s, "reads its answers");
    if (slow.empty())
      slow = check_rate(s->recv_window, s->received_at_window, s->bytes_received, s->reader.mid_frame(), now,
                        opt_.rate_window_ms, opt_.min_rate_bytes_per_s, "sends a frame");
    if (s->state.phase() == p::Phase::handshake && ms_between(s->accepted, now) > opt_.handshake_timeout_ms) {
      expired.emplace_back(s, "no handshake within " + std::to_string(opt_.handshake_timeout_ms) + " ms");
    } else if (!slow.empty()) {
      expired.emplace_back(s, slow);
    } else if (pending > 0 && ms_between(progress, now) > opt_.write_timeout_ms) {
      expired.emplace_back(s, "the client read nothing for " + std::to_string(opt_.write_timeout_ms) + " ms");
    } else if (opt_.idle_timeout_ms > 0 && s->state.phase() == p::Phase::ready && s->state.in_flight() == 0 &&
               pending == 0 && !s->reader.mid_frame() &&
               ms_between(s->last_activity, now) > static_cast<int>(opt_.idle_timeout_ms)) {
      expired.emplace_back(s, "idle");
    }
  }
  for (auto& [s, why] : expired) drop(s, why);
}

}  // namespace llmsvc::service
