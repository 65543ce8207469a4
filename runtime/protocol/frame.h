// SPDX-License-Identifier: Apache-2.0
// Frames (docs/PROTOCOL.md, "Frames"): a 16-byte header, then the payload.
//
//   offset 0  magic "LLMS"     offset 8   stream id   u32 LE
//   offset 4  type    u16 LE   offset 12  payload len u32 LE
//   offset 6  flags   u16 LE (0: no flag is defined)
//
// FrameReader reassembles frames from reads of any size and checks each header before any of
// its payload is taken; a payload's buffer grows as its bytes arrive, never to the length a
// header claims (a peer that sends headers alone makes it hold nothing). FrameWriter encodes messages into a send queue. Neither touches a
// socket: the daemon and the client own their I/O.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <type_traits>
#include <variant>
#include <vector>

#include "base/status.h"
#include "runtime/protocol/messages.h"
#include "runtime/protocol/types.h"

namespace llmsvc::protocol {

struct FrameHeader {
  MsgType type = MsgType::ping;
  uint32_t stream = 0;
  uint32_t length = 0;
};

struct Frame {
  MsgType type = MsgType::ping;
  uint32_t stream = 0;
  std::vector<uint8_t> payload;
};

// Checks the 16 header bytes as received by `receiver`: magic, flags, a type of this version
// that the peer may send, the type's stream rule, length <= max_payload.
Result<FrameHeader> parse_header(std::span<const uint8_t, kHeaderBytes> bytes, Role receiver, uint32_t max_payload);

// The stream rule of a type (stream 0, or a request's non-zero id).
Status check_stream(const TypeInfo& info, uint32_t stream);

// Decodes a received frame's payload, laid out as the connection's protocol `version` has it
// (kMinVersion before the handshake is done: HELLO, WELCOME and ERROR are alike in every
// version).
Result<Message> decode_frame(const Frame& frame, uint16_t version);

// Appends one whole frame (header and payload, as protocol `version` lays it out) sent by
// `sender`; `out` is unchanged on failure (a type `sender` may not send, the stream rule, a
// field, payload > max_payload). M is a message struct or the Message variant.
template <class M>
Status append_frame(std::vector<uint8_t>& out, Role sender, uint32_t stream, const M& m, uint32_t max_payload,
                    uint16_t version = kMaxVersion);

class FrameReader {
 public:
  // `receiver` is this end; `max_payload` its limit (kHandshakeMaxPayload until the handshake
  // is done, then the limit it announced).
  explicit FrameReader(Role receiver, uint32_t max_payload = kHandshakeMaxPayload)
      : receiver_(receiver), max_payload_(max_payload) {}

  void set_max_payload(uint32_t max_payload) { max_payload_ = max_payload; }
  uint32_t max_payload() const { return max_payload_; }

  // Takes bytes as they arrive, split anywhere. Complete frames queue for next(). The first
  // bad header stops the reader for good: that error is returned now and by every later
  // feed() (the stream cannot be resynchronised). Frames completed before it stay queued.
  Status feed(std::span<const uint8_t> bytes);
  // The oldest complete frame, if any.
  std::optional<Frame> next();

  // Frames complete and not yet taken.
  size_t queued() const { return ready_.size(); }
  // Bytes held: the complete frames not yet taken (headers and payloads) and what arrived of
  // the current one. What a connection holds undecoded is bounded by this.
  size_t buffered_bytes() const { return ready_bytes_ + have_; }
  // Bytes of an incomplete frame are held: end of stream now means a truncated frame.
  bool mid_frame() const { return have_ > 0; }
  const Status& error() const { return error_; }

 private:
  Role receiver_;
  uint32_t max_payload_;
  uint8_t header_[kHeaderBytes] = {};
  size_t have_ = 0;       // bytes of the current frame received (header included)
  bool in_payload_ = false;
  uint32_t want_ = 0;     // the current frame's payload length (its header's claim)
  Frame current_;
  std::deque<Frame> ready_;
  size_t ready_bytes_ = 0;  // kHeaderBytes + payload of each frame in ready_
  Status error_;
};

class FrameWriter {
 public:
  // `sender` is this end; `max_payload` the peer's limit (kHandshakeMaxPayload until its
  // HELLO or WELCOME says otherwise).
  explicit FrameWriter(Role sender, uint32_t max_payload = kHandshakeMaxPayload)
      : sender_(sender), max_payload_(max_payload) {}

  void set_max_payload(uint32_t max_payload) { max_payload_ = max_payload; }
  // The version the handshake agreed on. Until then kMinVersion: what is sent before it
  // (HELLO, WELCOME, ERROR) is the same in every version, and a writer whose owner forgot
  // to set it fails loudly against a newer peer rather than sending fields an older one lacks.
  void set_version(uint16_t version) { version_ = version; }
  uint16_t version() const { return version_; }

  // Queues one frame; nothing is queued on failure.
  template <class M>
  Status write(uint32_t stream, const M& m) {
    return append_frame(buffer_, sender_, stream, m, max_payload_, version_);
  }

  // Bytes queued and not yet sent; after sending n of them, consume(n).
  std::span<const uint8_t> pending() const { return std::span<const uint8_t>(buffer_).subspan(sent_); }
  size_t pending_bytes() const { return buffer_.size() - sent_; }
  void consume(size_t n);

 private:
  Role sender_;
  uint32_t max_payload_;
  uint16_t version_ = kMinVersion;
  static constexpr size_t kKeptCapacity = 64u << 10;
  std::vector<uint8_t> buffer_;
  size_t sent_ = 0;
};

// ---------------------------------------------------------------- implementation

// Checks a frame's type and stream for `sender` (before encoding).
Status check_send(MsgType type, Role sender, uint32_t stream);
// Writes the header of the frame that starts at out[start], whose payload follows it.
Status seal_frame(std::vector<uint8_t>& out, size_t start, MsgType type, uint32_t stream, uint32_t max_payload);

template <class M>
Status append_frame(std::vector<uint8_t>& out, Role sender, uint32_t stream, const M& m, uint32_t max_payload,
                    uint16_t version) {
  if constexpr (std::is_same_v<M, Message>) {
    return std::visit([&](const auto& x) { return append_frame(out, sender, stream, x, max_payload, version); }, m);
  } else {
    LLMSVC_RETURN_IF_ERROR(check_send(M::kType, sender, stream));
    const size_t start = out.size();
    out.resize(start + kHeaderBytes);
    Status s = encode_payload(m, out, version);
    if (s.ok()) s = seal_frame(out, start, M::kType, stream, max_payload);
    if (!s.ok()) out.resize(start);
    return s;
  }
}

}  // namespace llmsvc::protocol
