// SPDX-License-Identifier: Apache-2.0
// Frame headers, the reassembling reader and the queueing writer.
#include "runtime/protocol/frame.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace llmsvc::protocol {
namespace {

Status bad(std::string what) { return {Code::invalid_argument, "frame: " + std::move(what)}; }

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, v);
  return buf;
}

uint32_t load32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

void store(uint8_t* p, uint32_t v, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

const char* role_name(Role r) { return r == Role::server ? "server" : "client"; }
Role peer_of(Role r) { return r == Role::server ? Role::client : Role::server; }

}  // namespace

Status check_stream(const TypeInfo& info, uint32_t stream) {
  if (info.stream == StreamRule::zero && stream != 0)
    return bad(std::string(info.name) + " on stream " + std::to_string(stream) + " (it belongs on stream 0)");
  if (info.stream == StreamRule::request && stream == 0)
    return bad(std::string(info.name) + " on stream 0 (it needs a request's stream id)");
  return Status::Ok();
}

Result<FrameHeader> parse_header(std::span<const uint8_t, kHeaderBytes> b, Role receiver, uint32_t max_payload) {
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0)
    return bad("bad magic " + hex(load32(b.data()), 8) + " (not an llmsvc protocol stream)");
  const uint16_t type = static_cast<uint16_t>(b[4] | b[5] << 8);
  const uint16_t flags = static_cast<uint16_t>(b[6] | b[7] << 8);
  FrameHeader h;
  h.stream = load32(b.data() + 8);
  h.length = load32(b.data() + 12);
  if (flags != 0) return bad("flags " + hex(flags, 4) + " set (no flag is defined)");
  const TypeInfo* info = find_type(type);
  if (info == nullptr) return bad("unknown message type " + hex(type, 4));
  if (!receivable(*info, receiver))
    return bad(std::string(info->name) + " is not sent by a " + role_name(peer_of(receiver)));
  LLMSVC_RETURN_IF_ERROR(check_stream(*info, h.stream));
  if (h.length > max_payload) {
    return bad(std::string(info->name) + " payload of " + std::to_string(h.length) + " bytes exceeds the limit of " +
               std::to_string(max_payload));
  }
  h.type = info->type;
  return h;
}

Result<Message> decode_frame(const Frame& frame, uint16_t version) {
  return decode_message(frame.type, frame.payload, version);
}

Status check_send(MsgType type, Role sender, uint32_t stream) {
  const TypeInfo& info = type_info(type);
  if (!receivable(info, peer_of(sender)))
    return bad(std::string(info.name) + " is not sent by a " + role_name(sender));
  return check_stream(info, stream);
}

Status seal_frame(std::vector<uint8_t>& out, size_t start, MsgType type, uint32_t stream, uint32_t max_payload) {
  const size_t length = out.size() - start - kHeaderBytes;
  if (length > max_payload) {
    return bad(std::string(type_info(type).name) + " payload of " + std::to_string(length) +
               " bytes exceeds the peer's limit of " + std::to_string(max_payload));
  }
  uint8_t* h = out.data() + start;
  std::memcpy(h, kMagic, sizeof kMagic);
  store(h + 4, static_cast<uint16_t>(type), 2);
  store(h + 6, 0, 2);
  store(h + 8, stream, 4);
  store(h + 12, static_cast<uint32_t>(length), 4);
  return Status::Ok();
}

Status FrameReader::feed(std::span<const uint8_t> bytes) {
  if (!error_.ok()) return error_;
  size_t i = 0;
  while (i < bytes.size()) {
    if (!in_payload_) {
      const size_t n = std::min(kHeaderBytes - have_, bytes.size() - i);
      std::memcpy(header_ + have_, bytes.data() + i, n);
      have_ += n;
      i += n;
      if (have_ < kHeaderBytes) break;
      auto h = parse_header(std::span<const uint8_t, kHeaderBytes>(header_), receiver_, max_payload_);
      if (!h.ok()) {
        error_ = h.status();
        return error_;
      }
      current_.type = h->type;
      current_.stream = h->stream;
      want_ = h->length;  // <= max_payload_, checked above; nothing allocated for it yet
      in_payload_ = true;
    }
    const size_t got = have_ - kHeaderBytes;
    const size_t n = std::min(size_t{want_} - got, bytes.size() - i);
    if (n > 0) {
      // Doubling, but never past the claimed length: the buffer holds at most twice what
      // arrived, and at most the frame.
      std::vector<uint8_t>& pl = current_.payload;
      if (pl.capacity() < got + n) pl.reserve(std::min<size_t>(want_, std::max(got + n, 2 * pl.capacity())));
      pl.insert(pl.end(), bytes.data() + i, bytes.data() + i + n);
    }
    have_ += n;
    i += n;
    if (have_ - kHeaderBytes == want_) {
      ready_bytes_ += have_;
      ready_.push_back(std::move(current_));
      current_ = Frame{};
      have_ = 0;
      want_ = 0;
      in_payload_ = false;
    }
  }
  return Status::Ok();
}

std::optional<Frame> FrameReader::next() {
  if (ready_.empty()) return std::nullopt;
  Frame f = std::move(ready_.front());
  ready_.pop_front();
  ready_bytes_ -= kHeaderBytes + f.payload.size();
  return f;
}

void FrameWriter::consume(size_t n) {
  sent_ += std::min(n, pending_bytes());
  if (sent_ == buffer_.size()) {
    // All sent: a buffer grown by a burst is given back, so a quiet connection holds little.
    if (buffer_.capacity() > kKeptCapacity) {
      std::vector<uint8_t>().swap(buffer_);
    } else {
      buffer_.clear();
    }
    sent_ = 0;
  } else if (sent_ >= (64u << 10) && sent_ * 2 >= buffer_.size()) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(sent_));
    sent_ = 0;
  }
}

}  // namespace llmsvc::protocol
