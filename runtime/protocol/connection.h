// SPDX-License-Identifier: Apache-2.0
// ConnectionState: the state machine of one connection (docs/PROTOCOL.md section 6), kept
// by both ends over the messages they send and receive. It owns no socket: the daemon and
// the client call on_send() before queueing a frame and on_receive() after decoding one.
//
//   - HELLO first (client), WELCOME or ERROR on stream 0 (server), then READY;
//   - a request's stream id is not reused while it is in flight;
//   - every request gets exactly one final answer of a type that answers it;
//   - answers on a stream with no request in flight are refused;
//   - at most max_calls CALLs in flight (the server refuses more with QUOTA_EXCEEDED);
//   - a CANCEL naming a call not in flight is ignored.
//
// A failed on_send() is a bug of this end (nothing must be sent); a failed on_receive() is
// a connection error (the server answers ERROR on stream 0 and closes; the client closes).
#pragma once

#include <cstdint>
#include <unordered_map>

#include "base/status.h"
#include "runtime/protocol/messages.h"
#include "runtime/protocol/types.h"

namespace llmsvc::protocol {

enum class Phase : uint8_t {
  handshake,  // before WELCOME (client: HELLO sent or not yet; server: HELLO received or not)
  ready,      // WELCOME exchanged: requests may flow
  closed,     // an ERROR on stream 0 was sent or received: nothing more
};

// What a received frame means to the receiver.
struct Received {
  bool ends_request = false;  // (client) the frame was its request's final answer
  MsgType request = MsgType::ping;  // the request type on that stream, when there is one
  bool ignore = false;        // (server) a CANCEL of a call not in flight: drop it
  Status refuse;              // (server) the request is tracked, but must be answered ERROR(refuse)
};

// Whether a message ends its request (PIECE and CONTEXT_LIST_REPLY with more = 1 do not).
bool is_final_answer(const Message& m);
// Whether `answer` is a type that answers `request`.
bool answers(MsgType request, MsgType answer);

class ConnectionState {
 public:
  explicit ConnectionState(Role self) : self_(self) {}

  Role role() const { return self_; }
  Phase phase() const { return phase_; }
  // The protocol version the WELCOME agreed on (kMinVersion before it): how payloads are laid
  // out from then on, both ways.
  uint16_t version() const { return version_; }
  uint32_t max_calls() const { return max_calls_; }
  // Requests in flight, and CALLs among them.
  size_t in_flight() const { return streams_.size(); }
  uint32_t calls_in_flight() const { return calls_; }
  // The request on `stream`, if one is in flight.
  bool in_flight(uint32_t stream) const { return streams_.count(stream) != 0; }
  bool call_in_flight(uint32_t stream) const;

  // This end is about to send `m` on `stream`: checks that it may and records it.
  Status on_send(uint32_t stream, const Message& m);
  // This end received `m` on `stream` (its header already checked by FrameReader).
  Result<Received> on_receive(uint32_t stream, const Message& m);
  // (server) A request of `type` on `stream` whose payload did not decode: tracked like a
  // request, so that its ERROR answer follows the rules; a connection error where a
  // well-formed one would be too (stream 0 types, before the handshake, a stream in flight).
  Status on_bad_request(uint32_t stream, MsgType type);

 private:
  Status track_request(uint32_t stream, MsgType type, const char* who);
  // A type the agreed version lacks (a newer one's) is a violation, as an unknown type.
  Status check_version(MsgType type, const char* who) const;
  Result<bool> track_answer(uint32_t stream, const Message& m, const char* who);

  Role self_;
  Phase phase_ = Phase::handshake;
  bool hello_seen_ = false;  // HELLO sent (client) / received (server)
  uint16_t version_ = kMinVersion;
  uint32_t max_calls_ = 1;
  uint32_t calls_ = 0;
  std::unordered_map<uint32_t, MsgType> streams_;  // requests in flight by stream id
};

}  // namespace llmsvc::protocol
