// SPDX-License-Identifier: Apache-2.0
// Session: one client connection of llmsvcd. The event loop owns its socket's read side,
// its frame reader, its protocol state and its context handles; worker threads (calls,
// context operations) append answers to its outbox, which the loop sends. The write side
// (the frame writer and writes to the socket) is shared under `wmu`: a call's worker sends
// its streamed pieces and its final answer itself when nothing is queued before them, so that
// neither a token nor the end of a call waits for a wake-up of the loop (on a small device
// that wake-up preempts a compute thread, and on a VM a wake-up across CPUs costs ~0.1 ms).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/protocol/connection.h"
#include "runtime/protocol/frame.h"
#include "runtime/service/app_identity.h"

namespace llmsvc::service {

using Clock = std::chrono::steady_clock;

// An answer a worker produced, for the loop to send.
struct Outgoing {
  uint32_t stream = 0;
  protocol::Message message;
  // CONTEXT_OPENED from a worker carries no handle yet: the loop assigns it (handles
  // belong to the loop), or, if the connection is gone, closes the context again.
  bool assign_handle = false;
  // A call's final answer its worker already wrote to the socket (Server::send_result): the
  // loop only does the bookkeeping of sending it (protocol state, the handle's call).
  bool already_sent = false;
  // The last answer of a context operation (run on the ops pool): its slot is free again.
  bool op_done = false;
  // CONTEXT_LIST: the ids, which the loop encodes into CONTEXT_LIST_REPLY parts only as the
  // client reads them (Session::lists), so a long list never sits unsent in full.
  std::shared_ptr<std::vector<std::string>> list_ids = nullptr;
};

// A CONTEXT_LIST answer being sent part by part.
struct ListCursor {
  uint32_t stream = 0;
  std::shared_ptr<std::vector<std::string>> ids;
  size_t next = 0;      // the first id not yet sent
  size_t bytes = 0;     // what the ids not yet sent hold (for the connection's bound)
};

struct Session {
  Session(int fd_, AppIdentity app_) : fd(fd_), app(std::move(app_)) {}

  // ---- loop thread only
  int fd;
  AppIdentity app;
  protocol::ConnectionState state{protocol::Role::server};
  protocol::FrameReader reader{protocol::Role::server};
  uint32_t peer_max_payload = protocol::kHandshakeMaxPayload;
  Clock::time_point accepted = Clock::now();
  Clock::time_point last_activity = Clock::now();
  // Minimum rates (Server::check_timers): a window opens when the connection starts to owe
  // bytes (answers unsent, or a frame begun and not finished) and lasts rate_window; if
  // less than the minimum rate moved in it (and bytes are still owed), the connection is
  // dropped. Trickling a few bytes now and then keeps no deadline away.
  std::optional<Clock::time_point> send_window;  // since: answers unsent throughout
  uint64_t sent_at_window = 0;                    // bytes_sent then
  std::optional<Clock::time_point> recv_window;  // since: a frame in progress throughout
  uint64_t received_at_window = 0;                // bytes_received then
  uint64_t bytes_received = 0;
  uint32_t ops_in_flight = 0;   // context operations on the ops pool, not yet answered
  std::deque<ListCursor> lists;  // CONTEXT_LIST answers still being sent
  size_t list_bytes = 0;         // the ids they hold
  bool reading = true;       // EPOLLIN wanted (backpressure clears it)
  bool want_write = false;   // EPOLLOUT registered
  bool closing = false;      // flush what is queued, then close (after an ERROR on stream 0)
  bool eof = false;          // the peer closed its end

  struct Handle {
    std::string id;
    uint32_t call = 0;                 // stream of its call in flight, 0 if none
    std::vector<uint32_t> close_streams;  // CONTEXT_CLOSE waiting for that call's RESULT
  };
  std::map<uint32_t, Handle> handles;
  uint32_t next_handle = 1;
  std::map<uint32_t, uint32_t> call_handle;  // call stream -> handle
  // Cancel flags of the calls in flight, by stream (set on CANCEL, close, shutdown); the
  // call's worker holds its own reference.
  std::map<uint32_t, std::shared_ptr<std::atomic<bool>>> cancel_flags;

  // ---- the write side, shared with call workers (wmu; taken before mu, never after it)
  std::mutex wmu;
  protocol::FrameWriter writer{protocol::Role::server};
  Clock::time_point last_write_progress = Clock::now();
  uint64_t bytes_sent = 0;  // to the socket, ever
  // Workers may write pieces themselves: the handshake is done, no ERROR on stream 0 went
  // out, the socket is open.
  bool direct_ok = false;

  // ---- shared with workers (mu)
  std::mutex mu;
  std::condition_variable drained;  // unsent bytes went down, or the session died
  std::deque<Outgoing> outbox;
  size_t outbox_bytes = 0;
  size_t unsent_bytes = 0;  // the writer's pending bytes, as of the loop's last flush
  bool dead = false;        // the connection is closed: answers are dropped
  bool queued_dirty = false;  // on the server's list of sessions with outbox entries
};

}  // namespace llmsvc::service
