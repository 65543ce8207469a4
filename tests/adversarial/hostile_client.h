// SPDX-License-Identifier: Apache-2.0
// HostileClient: one connection to llmsvcd that behaves as an attacker may, on a raw socket
// with the protocol library's encoder (libllmsvc would never send these), connected as any uid
// (as_uid: the calling thread alone takes that uid, so SO_PEERCRED names it and the daemon
// takes it for another app). Used by the adversarial tests and bench/service/bench_attacks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/protocol/messages.h"

namespace llmsvc::test {

// The calling thread alone takes uid (and gid) `uid` for good: raw setresuid, not glibc's
// process-wide wrapper. Needs root; false otherwise.
bool become_uid(uid_t uid);
// Runs `fn` on a new thread that has become `uid`; false when it could not.
bool as_uid(uid_t uid, const std::function<void()>& fn);

// What the daemon did to a connection, as its client saw it.
enum class Seen {
  open,          // still open and served
  refused,       // answered ERROR on stream 0 at connect or handshake
  throttled,     // the daemon stopped reading (sends would block) but kept it open
  disconnected,  // closed by the daemon after it was served
};
const char* seen_name(Seen s);

class HostileClient {
 public:
  HostileClient() = default;
  ~HostileClient();
  HostileClient(const HostileClient&) = delete;
  HostileClient& operator=(const HostileClient&) = delete;

  // Connects (as the calling thread's uid); false when nothing accepts.
  bool connect(const std::string& socket_path);
  // HELLO, then the WELCOME (true) or an ERROR / close (false: refused).
  bool handshake(uint32_t max_frame_payload = protocol::kDefaultMaxPayload);
  // Sends one request on a fresh stream id; false when it could not be sent whole (blocking).
  bool request(const protocol::Message& m, uint32_t* stream = nullptr);
  // The final answer of `stream` (skipping pieces and list parts before it); an ERROR's
  // status, or ok; Code::unavailable when the connection ended.
  Status answer(uint32_t stream, protocol::Message* out = nullptr, int timeout_s = 30);
  // Non-blocking send of raw bytes: the bytes taken (0 when the socket is full), -1 once the
  // daemon has closed the connection.
  ssize_t send_some(const std::string& bytes);
  // Non-blocking read of up to `max` bytes: the count, 0 when none are there, -1 on close.
  ssize_t read_some(size_t max);
  // Whether the daemon has closed its end (polls, does not consume data).
  bool closed_by_peer();
  // Encodes a request frame on a fresh stream (for floods built up front).
  std::string frame(const protocol::Message& m);

  int fd() const { return fd_; }
  uint32_t next_stream() const { return next_stream_; }

 private:
  int fd_ = -1;
  uint32_t next_stream_ = 1;
  uint16_t version_ = protocol::kMaxVersion;
  std::string pending_;  // received bytes not yet decoded
};

}  // namespace llmsvc::test
