// ClientConnection: one connection to llmsvcd, from the app's side. Connects, handshakes,
// then a reader thread delivers each answer to the request waiting on its stream, under the
// rules of protocol::ConnectionState. Any number of threads may have requests in flight.
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
  ClientConnection(int fd, protocol::Welcome welcome, protocol::ConnectionState state);
  Status send_locked(uint32_t stream, const protocol::Message& m, std::unique_lock<std::mutex>& state_lock);
  void reader_loop();
  void fail_all(const std::string& why);

  int fd_;
  protocol::Welcome welcome_;
  std::mutex write_mu_;  // socket writes (taken before mu_, never while holding it)
  mutable std::mutex mu_;  // everything below
  std::condition_variable cv_;
  protocol::ConnectionState state_;
  protocol::FrameWriter writer_{protocol::Role::client};
  std::map<uint32_t, std::shared_ptr<Request>> requests_;
  uint32_t next_stream_ = 1;
  Status lost_;  // set once: why the connection is over
  std::atomic<bool> stopping_{false};
  std::thread reader_;
};

}  // namespace llmsvc::client
