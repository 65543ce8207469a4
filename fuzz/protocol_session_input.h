// SPDX-License-Identifier: Apache-2.0
// The input format of fuzz/protocol_session_fuzzer.cpp, shared with its seed writer
// (fuzz/make_protocol_session_seeds.cpp). An input is a session: a few configuration bytes,
// then actions on one simulated connection until the input runs out. Every read is bounds-
// checked: past the end, numbers read 0 and byte strings are cut short.
//
//   config   u8 max_calls (1 + b % 8)            u8 max_requests_in_flight (1 + b % 8)
//            u32 the server's max_frame_payload (folded into [64 KiB, 16 MiB])
//            u8 the newest version the server speaks (kMinVersion + b % kMaxVersion, capped)
//   action   u8 opcode (Op, modulo kOps), then its operands:
//     client_send   u8 type (kClientTypes) | stream | message     the client, through its state
//     client_bad    u8 type (kRequestTypes) | stream | bytes      a tracked request, raw payload
//     raw_bytes     bytes                                         any bytes on the wire (rogue)
//     raw_header    u16 type | u8 f (0xFF: u16 flags follow, else 0) | stream | u32 length | bytes
//                                                                 a header and what follows it
//     rogue_send    u8 type (all) | stream | message              a message past the client's state
//     deliver_c2s   u16 n (0: everything in flight)               the server reads n bytes
//     deliver_s2c   u16 n (0: everything in flight)               the client reads n bytes
//     server_send   u8 target | u8 type (kServerTypes) | message  the server answers
//     server_raw    bytes                                         any bytes to the client (rogue)
//     server_rogue_send  u8 type (all) | stream | message         a message past the server's state
//   stream   u8 b: b, or b = 0xFF: a u32 follows
//   target   u8 t: 0xFF: a u32 stream follows; 0xFE: stream 0; t & 0x80: stream t & 0x7F;
//            else the (t % n)-th of the n requests the server has in flight (stream t if none)
//   bytes    u16 n, then n bytes; n >= 0xF000: (n & 0xFFF) * 64 copies of the one next byte
//            (up to 256 KiB: frames past a peer's limit from a short input)
//   message  the fields of the type's struct in wire order (messages.h, at the newest
//            version), each as: u8/u16/u32/u64 raw LE (bool: u8 & 1; f32/f64: their bits;
//            enum8, status: u8), text as `bytes`, optional text as u8 (bit 0: present) and
//            text, a list as u8 count and texts
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"
#include "runtime/protocol/messages.h"
#include "runtime/protocol/types.h"

namespace llmsvc::fuzz {

namespace p = llmsvc::protocol;

enum class Op : uint8_t {
  client_send,
  client_bad,
  raw_bytes,
  raw_header,
  rogue_send,
  deliver_c2s,
  deliver_s2c,
  server_send,
  server_raw,
  server_rogue_send,
};
inline constexpr uint8_t kOps = 10;

// What the client sends (error and ack are the server's: its state must refuse them). Types a
// later version added go at the end, so the seeds' indices keep their meaning.
inline constexpr std::array kClientTypes = {
    p::MsgType::hello,         p::MsgType::ping,           p::MsgType::pong,         p::MsgType::context_new,
    p::MsgType::context_open,  p::MsgType::context_close,  p::MsgType::context_delete, p::MsgType::context_list,
    p::MsgType::context_info,  p::MsgType::call,           p::MsgType::cancel,       p::MsgType::stats,
    p::MsgType::error,         p::MsgType::ack,            p::MsgType::model_info,   p::MsgType::count_tokens,
    p::MsgType::context_append, p::MsgType::context_truncate, p::MsgType::context_messages, p::MsgType::context_fork,
};
inline constexpr std::array kRequestTypes = {
    p::MsgType::context_new,    p::MsgType::context_open, p::MsgType::context_close, p::MsgType::context_delete,
    p::MsgType::context_list,   p::MsgType::context_info, p::MsgType::call,          p::MsgType::stats,
    p::MsgType::model_info,     p::MsgType::count_tokens,
    p::MsgType::context_append, p::MsgType::context_truncate, p::MsgType::context_messages, p::MsgType::context_fork,
};
inline constexpr std::array kServerTypes = {
    p::MsgType::welcome,        p::MsgType::ping,           p::MsgType::pong,
    p::MsgType::error,          p::MsgType::ack,            p::MsgType::context_opened,
    p::MsgType::context_list_reply, p::MsgType::context_info_reply, p::MsgType::piece,
    p::MsgType::call_result,    p::MsgType::stats_reply,    p::MsgType::model_info_reply,
    p::MsgType::count_tokens_reply, p::MsgType::context_messages_reply,
};
// Every type, in the order of the Message variant (rogue_send's type index).
inline constexpr size_t kAllTypes = std::variant_size_v<p::Message>;

template <size_t N>
constexpr uint8_t index_in(const std::array<p::MsgType, N>& list, p::MsgType t) {
  for (size_t i = 0; i < N; ++i)
    if (list[i] == t) return static_cast<uint8_t>(i);
  return 0xFF;
}

// A `bytes` length from which on it means repeated bytes.
inline constexpr uint16_t kRepeat = 0xF000;

// Bounds-checked little-endian reader over the input.
class In {
 public:
  explicit In(std::span<const uint8_t> data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }
  uint8_t u8() { return pos_ < data_.size() ? data_[pos_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
  uint32_t u32() { return uint32_t{u16()} | uint32_t{u16()} << 16; }
  uint64_t u64() { return uint64_t{u32()} | uint64_t{u32()} << 32; }
  std::vector<uint8_t> bytes() {
    const uint16_t n = u16();
    if (n >= kRepeat) return std::vector<uint8_t>(size_t{n & 0xFFFu} * 64, u8());
    const size_t take = std::min<size_t>(n, data_.size() - pos_);
    std::vector<uint8_t> v(data_.begin() + static_cast<std::ptrdiff_t>(pos_),
                           data_.begin() + static_cast<std::ptrdiff_t>(pos_ + take));
    pos_ += take;
    return v;
  }
  std::string text() {
    auto b = bytes();
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());  // a memcpy
  }
  uint32_t stream() {
    const uint8_t b = u8();
    return b == 0xFF ? u32() : b;
  }

 private:
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

// The writer of the same format (seeds).
class Out {
 public:
  std::vector<uint8_t> data;
  void u8(uint8_t v) { data.push_back(v); }
  void u16(uint16_t v) {
    u8(static_cast<uint8_t>(v));
    u8(static_cast<uint8_t>(v >> 8));
  }
  void u32(uint32_t v) {
    u16(static_cast<uint16_t>(v));
    u16(static_cast<uint16_t>(v >> 16));
  }
  void u64(uint64_t v) {
    u32(static_cast<uint32_t>(v));
    u32(static_cast<uint32_t>(v >> 32));
  }
  void bytes(std::span<const uint8_t> b) {  // fewer than kRepeat
    u16(static_cast<uint16_t>(std::min<size_t>(b.size(), kRepeat - 1)));
    data.insert(data.end(), b.begin(), b.begin() + std::min<size_t>(b.size(), kRepeat - 1));
  }
  void repeat(uint8_t byte, size_t n) {  // n / 64 < 4096
    u16(static_cast<uint16_t>(kRepeat | (n / 64)));
    u8(byte);
  }
  void text(const std::string& s) { bytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()}); }
  void stream(uint32_t s) {
    if (s < 0xFF) return u8(static_cast<uint8_t>(s));
    u8(0xFF);
    u32(s);
  }
};

// Fills a message's fields from the input (the Decoder's signatures, no checks: the encoder
// refuses what it must).
class Fill {
 public:
  explicit Fill(In& in) : in_(in) {}
  uint16_t version() const { return p::kMaxVersion; }
  Status u16(const char*, uint16_t& v) { return v = in_.u16(), Status::Ok(); }
  Status u16_in(const char*, uint16_t& v, uint16_t, uint16_t) { return v = in_.u16(), Status::Ok(); }
  Status u32(const char*, uint32_t& v) { return v = in_.u32(), Status::Ok(); }
  Status u32_in(const char*, uint32_t& v, uint32_t, uint32_t) { return v = in_.u32(), Status::Ok(); }
  Status u64(const char*, uint64_t& v) { return v = in_.u64(), Status::Ok(); }
  Status i32(const char*, int32_t& v) { return v = static_cast<int32_t>(in_.u32()), Status::Ok(); }
  Status count(const char*, int32_t& v) { return v = static_cast<int32_t>(in_.u32()), Status::Ok(); }
  Status f32(const char*, float& v) { return v = std::bit_cast<float>(in_.u32()), Status::Ok(); }
  Status f64(const char*, double& v) { return v = std::bit_cast<double>(in_.u64()), Status::Ok(); }
  Status boolean(const char*, bool& v) { return v = (in_.u8() & 1) != 0, Status::Ok(); }
  Status enum8(const char*, int32_t& v, int32_t) { return v = in_.u8(), Status::Ok(); }
  Status status(const char*, uint32_t& v, bool) { return v = in_.u8(), Status::Ok(); }
  Status text(const char*, std::string& v, p::Bounds) { return v = in_.text(), Status::Ok(); }
  Status opt_text(const char*, std::optional<std::string>& v, p::Bounds) {
    if (in_.u8() & 1) v = in_.text();
    else v.reset();
    return Status::Ok();
  }
  Status text_list(const char*, std::vector<std::string>& v, size_t, p::Bounds) {
    v.resize(in_.u8());
    for (auto& s : v) s = in_.text();
    return Status::Ok();
  }
  // A list: a u8 count (kept small, as text_list's), then each entry.
  template <class T, class F>
  Status records(const char*, std::vector<T>& v, size_t, size_t, F&& each) {
    v.resize(in_.u8() % 32);
    for (T& entry : v) (void)each(entry);
    return Status::Ok();
  }
  // A rule between fields that does not hold: the rest keep their defaults.
  Status fail(const char* field, std::string_view) const { return Status(Code::invalid_argument, field); }

 private:
  In& in_;
};

// Writes a message's fields in Fill's format (the Encoder's signatures).
class Emit {
 public:
  explicit Emit(Out& out) : out_(out) {}
  uint16_t version() const { return p::kMaxVersion; }
  Status u16(const char*, uint16_t v) { return out_.u16(v), Status::Ok(); }
  Status u16_in(const char*, uint16_t v, uint16_t, uint16_t) { return out_.u16(v), Status::Ok(); }
  Status u32(const char*, uint32_t v) { return out_.u32(v), Status::Ok(); }
  Status u32_in(const char*, uint32_t v, uint32_t, uint32_t) { return out_.u32(v), Status::Ok(); }
  Status u64(const char*, uint64_t v) { return out_.u64(v), Status::Ok(); }
  Status i32(const char*, int32_t v) { return out_.u32(static_cast<uint32_t>(v)), Status::Ok(); }
  Status count(const char*, int32_t v) { return out_.u32(static_cast<uint32_t>(v)), Status::Ok(); }
  Status f32(const char*, float v) { return out_.u32(std::bit_cast<uint32_t>(v)), Status::Ok(); }
  Status f64(const char*, double v) { return out_.u64(std::bit_cast<uint64_t>(v)), Status::Ok(); }
  Status boolean(const char*, bool v) { return out_.u8(v ? 1 : 0), Status::Ok(); }
  Status enum8(const char*, int32_t v, int32_t) { return out_.u8(static_cast<uint8_t>(v)), Status::Ok(); }
  Status status(const char*, uint32_t v, bool) { return out_.u8(static_cast<uint8_t>(v)), Status::Ok(); }
  Status text(const char*, const std::string& v, p::Bounds) { return out_.text(v), Status::Ok(); }
  Status opt_text(const char*, const std::optional<std::string>& v, p::Bounds) {
    out_.u8(v ? 1 : 0);
    if (v) out_.text(*v);
    return Status::Ok();
  }
  Status text_list(const char*, const std::vector<std::string>& v, size_t, p::Bounds) {
    out_.u8(static_cast<uint8_t>(v.size()));
    for (const auto& s : v) out_.text(s);
    return Status::Ok();
  }
  template <class T, class F>
  Status records(const char*, const std::vector<T>& v, size_t, size_t, F&& each) {
    out_.u8(static_cast<uint8_t>(v.size()));
    for (const T& entry : v) (void)each(entry);
    return Status::Ok();
  }
  Status fail(const char* field, std::string_view) const { return Status(Code::invalid_argument, field); }

 private:
  Out& out_;
};

// The message of `type`, its fields from the input.
inline p::Message fill_message(p::MsgType type, In& in) {
  p::Message m;
  Fill f(in);
  [&]<size_t... I>(std::index_sequence<I...>) {
    (([&] {
       using M = std::variant_alternative_t<I, p::Message>;
       if (M::kType != type) return;
       M x;
       (void)M::fields(f, x);
       m = std::move(x);
     }()),
     ...);
  }(std::make_index_sequence<kAllTypes>{});
  return m;
}

// The message of variant index `i` (< kAllTypes).
inline p::MsgType type_at(size_t i) {
  p::MsgType t = p::MsgType::ping;
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((I == i ? (void)(t = std::variant_alternative_t<I, p::Message>::kType) : void()), ...);
  }(std::make_index_sequence<kAllTypes>{});
  return t;
}

inline void emit_message(const p::Message& m, Out& out) {
  Emit e(out);
  std::visit([&](const auto& x) { (void)std::decay_t<decltype(x)>::fields(e, x); }, m);
}

}  // namespace llmsvc::fuzz
