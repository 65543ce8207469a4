// SPDX-License-Identifier: Apache-2.0
// Server: llmsvcd's event loop. One thread at a time runs epoll over the listening sockets,
// every client connection, a signalfd (SIGTERM, SIGINT) and an eventfd that workers use to
// hand back answers. The loop runs on the call workers as leader/followers: the thread that
// runs it and starts a call runs that call itself, handing the loop to an idle worker, so a
// call does not wait for another thread to wake before it computes. Connections are
// non-blocking and read through FrameReader, written through FrameWriter, with the rules of
// ConnectionState. Calls run on the call workers over the shared engine (through
// AppContexts, so every request is confined to the caller's app); apps take turns for the
// workers, each running at most call_workers_per_app calls at once, and the engine
// interleaves running calls token by token. Context operations run on a small pool of their
// own.
//
// Bounds (docs/PROTOCOL.md section 9; the memory formula in docs/ARCHITECTURE.md, *Memory
// bound*): a connection is read only while its reader holds no complete frame it cannot take
// yet, it has fewer than max_requests_in_flight requests unanswered, fewer than
// max_ops_in_flight context operations running, and less than max_unsent_bytes of answers
// unsent (queued, encoded or listed); a payload is buffered as it arrives, never to its
// claimed length; CONTEXT_LIST replies are encoded part by part as the client reads; a call
// whose connection is over max_unsent_bytes waits before its next piece (up to write_timeout,
// then it is cancelled and the connection closed). Timeouts: handshake, idle, and minimum
// rates both ways (a client owing bytes must move min_rate_bytes_per_s over each
// rate_window_ms), so that trickling does not hold a connection's buffers forever. New
// connections past max_connections (at most the descriptors the process may open, less a
// reserve) are refused at accept, and the last reserve_for_new_apps of them go only to apps
// holding none.
//
// systemd: READY once listening, STATUS with live figures every 5 s, WATCHDOG=1 every half
// watchdog interval from the event loop (a loop that hangs stops them), STOPPING on exit.
//
// SIGTERM / SIGINT: stop accepting, refuse new requests (UNAVAILABLE), let calls in flight
// run for stop_timeout_ms, cancel the rest (they end with RESULT), flush, return 0.
//
// The definitions by concern: server.cpp (the loop, accepting, reading, dropping, shutdown),
// server_requests.cpp (dispatch, handles, calls), server_answers.cpp (encoding, lists,
// outboxes, flushes), server_timers.cpp (timeouts and minimum rates).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/service/app_contexts.h"
#include "runtime/service/memory_pressure.h"
#include "runtime/service/session.h"
#include "runtime/service/worker_pool.h"

namespace llmsvc::service {

inline constexpr size_t kReadChunkBytes = 64u << 10;   // one read of a connection's socket
inline constexpr size_t kPieceSplitBytes = 32u << 10;  // a piece's text per PIECE frame, at most
inline constexpr const char* kAfterProtocolError = "after a protocol error";  // a drop that logs nothing more

struct ServerOptions {
  std::string server_name = "llmsvcd 1.0.0";
  std::string model_name;
  uint32_t max_frame_payload = protocol::kDefaultMaxPayload;
  uint32_t max_prompt_bytes = 256u << 10;
  uint32_t max_calls = 4;            // per connection
  uint32_t idle_timeout_ms = 120000;  // 0: never (the client library pings an idle connection)
  // Exit (0, as on SIGTERM) after this long with no connection at all; 0: never. Only for
  // socket activation: systemd keeps the socket and starts the daemon on the next client.
  uint32_t exit_idle_ms = 0;
  uint64_t watchdog_us = 0;          // the service manager's watchdog; 0: none
  int handshake_timeout_ms = 5000;
  int write_timeout_ms = 30000;
  int stop_timeout_ms = 5000;
  size_t max_unsent_bytes = 256u << 10;
  size_t max_requests_in_flight = 64;
  uint32_t max_ops_in_flight = 4;   // per connection: context operations running at once
  uint32_t max_handles = 256;       // per connection: contexts open (QUOTA_EXCEEDED past it)
  uint32_t min_rate_bytes_per_s = 4096;
  int rate_window_ms = 10000;
  // Connections at once over all apps; 0: the descriptors the process may open (its raised
  // RLIMIT_NOFILE) less fd_reserve, kept for state files, the model and the swap reader.
  uint32_t max_connections = 0;
  uint32_t fd_reserve = 64;
  uint32_t reserve_for_new_apps = 16;
  int call_workers = 4;  // calls at once (the pool has one thread more, for the loop)
  // Calls of one app running at once (its others wait their turn), so an app's burst of
  // calls leaves workers for the other apps. Apps take turns for free workers.
  int call_workers_per_app = 2;
  // Each app's concurrent_calls (in flight on all its connections) and connections (at once:
  // a further one gets ERROR, QUOTA_EXCEEDED, on stream 0 and is closed, so one app cannot
  // take every descriptor the daemon has). The other quotas are AppContexts' and the engine's.
  QuotaTable quotas;
  int op_workers = 2;
};

class Server {
 public:
  Server(AppContexts& apps, ServerOptions options);
  ~Server();

  // A listening socket (non-blocking); `unlink_path`, when not empty, is removed at exit.
  void add_listener(int fd, std::string unlink_path = {});
  // Watches `source` from the event loop (before run()): on each event `on_pressure` runs
  // there (it must not block: Engine::trim_weights) and what it gave back is logged.
  void watch_memory_pressure(MemoryPressure source, std::function<uint64_t()> on_pressure);
  // Runs until SIGTERM or SIGINT (which the caller has blocked in every thread); 0 on a
  // clean stop.
  int run();

 private:
  using SessionPtr = std::shared_ptr<Session>;

  // Loop side. lead() runs the loop until it hands it on or it ends; loop_step() is one
  // round of it: a value when the loop is over (the exit code).
  void lead();
  std::optional<int> loop_step();
  void accept_all(int listen_fd);
  void on_readable(const SessionPtr& s);
  void process_frames(const SessionPtr& s);
  void handle_frame(const SessionPtr& s, const protocol::Frame& frame);
  void handle_request(const SessionPtr& s, uint32_t stream, const protocol::Message& m);
  void start_call(const SessionPtr& s, uint32_t stream, const protocol::Call& call);
  void close_handle(const SessionPtr& s, uint32_t stream, uint32_t handle);
  // Uncounts one handle of the app's on `id`; the last one lets the engine forget it.
  void release_handle(const AppIdentity& app, const std::string& id);
  void send(const SessionPtr& s, uint32_t stream, const protocol::Message& m);
  // send() with s->wmu held; true when `m` ended a call (call_finished() is then due,
  // once wmu is released).
  // `written`: its bytes are already in the writer (a worker sent them), only the
  // bookkeeping is left.
  bool encode_locked(const SessionPtr& s, uint32_t stream, const protocol::Message& m, bool written = false);
  size_t pending_bytes(const SessionPtr& s);
  void send_error(const SessionPtr& s, uint32_t stream, const Status& st);
  void connection_error(const SessionPtr& s, const Status& st);
  void call_finished(const SessionPtr& s, uint32_t stream);
  void flush(const SessionPtr& s);
  void update_interest(const SessionPtr& s);
  // Whether the connection may take another request now (the bounds above).
  bool can_take_request(const SessionPtr& s);
  // Answer bytes the connection holds: encoded and unsent, queued by workers, and the
  // CONTEXT_LIST ids not yet encoded.
  size_t held_answer_bytes(const SessionPtr& s);
  // Encodes CONTEXT_LIST parts while the connection is under its unsent bound.
  void produce_lists(const SessionPtr& s);
  // Why a new connection of `uid` is refused at accept, or "" when it is not.
  std::string accept_refusal(uid_t uid) const;
  void drop(const SessionPtr& s, const std::string& why);
  void take_outboxes();
  // Sends what workers queued for `s` (and does the bookkeeping of what they sent).
  void take_outbox(const SessionPtr& s);
  // Out of descriptors or memory for a new connection: stop watching the listeners for a
  // while (the backlog keeps the connections), then watch them again.
  void pause_accepting(const std::string& why);
  void resume_accepting();
  void check_timers();
  void begin_shutdown();
  void cancel_all();
  std::string status_line() const;

  // Worker side: queue an answer for the loop; false if the connection is gone.
  bool post(const SessionPtr& s, Outgoing out);
  // With wmu held: writes what the session's writer holds to the socket, non-blocking;
  // returns the bytes left, recorded for the loop (which the caller then kicks).
  size_t send_now_locked(const SessionPtr& s);
  // A streamed piece: written to the socket right away when nothing is queued before it
  // (else posted); false if the connection is gone.
  bool send_piece(const SessionPtr& s, uint32_t stream, protocol::Piece piece);
  // A call's final answer (RESULT or ERROR): written to the socket right away when nothing is
  // queued before it, with a record queued for the loop's bookkeeping (else posted); the
  // loop takes that record before it reads the connection's next requests, so the app's
  // next call on the context is not refused as busy. false if the connection is gone.
  bool send_result(const SessionPtr& s, uint32_t stream, protocol::Message m);
  // Puts the session on the loop's list to look at (its outbox, or bytes left unsent).
  void kick(const SessionPtr& s);
  // Before a call's next piece: waits while the connection is over its unsent-bytes bound.
  bool wait_for_room(const SessionPtr& s);

  AppContexts& apps_;
  ServerOptions opt_;
  int epfd_ = -1, sigfd_ = -1, evfd_ = -1;
  MemoryPressure pressure_;                  // Kind::none: not watched
  std::function<uint64_t()> on_pressure_;
  void on_memory_pressure();
  struct Listener {
    int fd;
    std::string unlink_path;
  };
  std::vector<Listener> listeners_;
  std::map<int, SessionPtr> sessions_;  // by fd

  struct CallTask {
    std::function<void()> task;
    std::string key;
  };
  std::vector<CallTask> started_;  // calls the loop started in this round (lead() places them)
  Clock::time_point last_status_{}, last_watchdog_{}, last_busy_{};
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  std::optional<int> loop_rc_;  // set when the loop is over

  std::mutex dirty_mu_;
  std::vector<SessionPtr> dirty_;  // sessions with outbox entries
  std::atomic<int> calls_running_{0};
  std::map<uid_t, uint32_t> app_connections_;          // loop thread only
  std::mutex app_calls_mu_;
  std::map<uid_t, uint32_t> app_calls_;  // calls in flight per app (the loop adds, workers remove)

  static constexpr int kAcceptPauseMs = 100;
  bool accept_paused_ = false;
  // Running out of descriptors is logged at most once a minute, with how many failed
  // accepts went unlogged since: starvation oscillates (a transient descriptor closes, one
  // accept succeeds, the next fails), so "once per episode" alone still repeats.
  static constexpr int kStarvedLogEveryS = 60;
  std::optional<Clock::time_point> starved_logged_;
  uint64_t starved_unlogged_ = 0;
  Clock::time_point accept_resume_{};
  uint32_t max_connections_ = 0;  // opt_.max_connections, or as the descriptor limit gives
  bool stopping_ = false;
  bool cancelled_all_ = false;
  Clock::time_point stop_deadline_{};
  uint64_t accepted_ = 0;

  // Destroyed first (declared last): workers finish before the rest goes away.
  std::unique_ptr<WorkerPool> ops_;
  std::unique_ptr<WorkerPool> calls_;
};

}  // namespace llmsvc::service
