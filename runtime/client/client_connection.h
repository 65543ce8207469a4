// SPDX-License-Identifier: Apache-2.0
// ClientConnection: one connection to llmsvcd, from the app's side. Connects, handshakes,
// then delivers each answer to the request waiting on its stream, under the rules of
// protocol::ConnectionState. Any number of threads may have requests in flight.
//
// Who reads the socket: a thread waiting for an answer reads it itself (one at a time, the
// "read turn"), handing frames of other streams to their requests, so an answer or a streamed
// piece reaches its caller without a second thread's wake-up in between (two fewer
// context switches per token on a small device). A keeper thread takes the turn only while
// nobody has wanted it for a while (an idle connection, or requests no caller waits on): it
// answers the daemon's pings, sends keep-alives, and sees the connection close. A caller
// that wants the turn while the keeper has it wakes it through an eventfd.
//
// When the connection fails (the daemon died, a protocol violation, an ERROR on stream 0)
// every request in flight gets Code::unavailable and the connection stays dead.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "runtime/protocol/connection.h"
#include "runtime/protocol/frame.h"

namespace llmsvc::client {

class ClientConnection {
 public:
  // A request in flight: its answers, in order.
  struct Request {
    uint32_t stream = 0;
    std::deque<protocol::Message> answers;
    bool done = false;  // its final answer is in `answers`
  };

  // Connects to the Unix socket `path` and handshakes within timeout_ms (generous: a
  // socket-activated daemon loads its model before it answers the first HELLO).
  static Result<std::unique_ptr<ClientConnection>> connect(const std::string& path, int timeout_ms = 30000);
  ~ClientConnection();
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  const protocol::Welcome& welcome() const { return welcome_; }
  // False once the connection failed, or the daemon has closed its end.
  bool alive() const;

  // Sends a request on a fresh stream (a CALL waits while max_calls are in flight).
  Result<std::shared_ptr<Request>> start(const protocol::Message& request);
  // The request's next answer; nullopt after timeout_ms (-1: wait); unavailable once the
  // connection is lost.
  Result<std::optional<protocol::Message>> next(Request& r, int timeout_ms = -1);
  // Sends a request and collects its answers through the final one.
  Result<std::vector<protocol::Message>> round_trip(const protocol::Message& request);
  // Asks the daemon to cancel the call on `stream` (best effort).
  void cancel(uint32_t stream);

 private:
  ClientConnection(int fd, int wake_fd, protocol::Welcome welcome, protocol::ConnectionState state);
  Status send_locked(uint32_t stream, const protocol::Message& m, std::unique_lock<std::mutex>& state_lock);
  // With the read turn: waits up to timeout_ms (-1: no limit) for the socket or the wake
  // eventfd, reads what is there and delivers it. Returns whether the socket had bytes; on
  // a timeout with ping set, sends a keep-alive.
  bool read_some(int timeout_ms, bool ping);
  void deliver(const protocol::Frame& frame);
  void keeper_loop();
  void wake_keeper();  // mu_ held
  void fail_all(const std::string& why);

  int fd_;
  int wake_fd_;  // eventfd: a caller wants the read turn the keeper holds
  protocol::Welcome welcome_;
  std::mutex write_mu_;  // socket writes (taken before mu_, never while holding it)
  mutable std::mutex mu_;  // everything below
  std::condition_variable cv_;         // callers: answers, the read turn, room for a call
  std::condition_variable keeper_cv_;  // the keeper: only stop and loss are signalled
  protocol::ConnectionState state_;
  protocol::FrameWriter writer_{protocol::Role::client};
  std::map<uint32_t, std::shared_ptr<Request>> requests_;
  uint32_t next_stream_ = 1;
  Status lost_;  // set once: why the connection is over
  bool reading_ = false;        // some thread has the read turn
  bool keeper_reading_ = false;  // ... and it is the keeper
  int waiting_ = 0;             // callers in next() without an answer yet
  uint64_t turns_ = 0;          // read turns taken so far (the keeper's sign of activity)
  protocol::FrameReader reader_{protocol::Role::client, protocol::kDefaultMaxPayload};  // the read turn's
  std::vector<uint8_t> read_buf_ = std::vector<uint8_t>(64u << 10);  // the read turn's (not an app thread's stack)
  uint64_t ping_nonce_ = 0;     // the read turn's
  std::atomic<bool> stopping_{false};
  std::thread keeper_;
};

}  // namespace llmsvc::client
