// SPDX-License-Identifier: Apache-2.0
// Frames: the header layout (the hex examples of docs/PROTOCOL.md), reassembly from reads of
// any size, refusals (bad magic, flags, unknown type, direction, stream rule, oversize),
// garbage streams, the writer's queue, and the committed fuzz seeds.
#include <gtest/gtest.h>

#include <dirent.h>
#include <malloc.h>

#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "runtime/protocol/frame.h"
#include "tests/protocol/fuzz_input.h"
#include "tests/protocol/samples.h"

namespace llmsvc::protocol {
namespace {

Role peer(Role r) { return r == Role::server ? Role::client : Role::server; }

std::vector<uint8_t> frame_of(Role sender, uint32_t stream, const Message& m, uint16_t version = kMaxVersion,
                              uint32_t max = kDefaultMaxPayload) {
  std::vector<uint8_t> out;
  Status s = append_frame(out, sender, stream, m, max, version);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

std::vector<uint8_t> unhex(std::string_view h) {
  std::vector<uint8_t> v;
  int hi = -1;
  for (char c : h) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) continue;
    if (hi < 0) {
      hi = d;
    } else {
      v.push_back(static_cast<uint8_t>(hi << 4 | d));
      hi = -1;
    }
  }
  return v;
}

// The hex examples of docs/PROTOCOL.md, byte for byte.
TEST(ProtocolFrame, HexExamplesOfTheSpec) {
  EXPECT_EQ(frame_of(Role::client, 0, Hello{1, 2, kDefaultMaxPayload, "cli"}),
            unhex("4c4c4d53 0100 0000 00000000 0f000000"
                  "0100 0200 00001000 03000000 636c69"));
  EXPECT_EQ(frame_of(Role::server, 0, Welcome{2, kDefaultMaxPayload, 262144, 4096, 4, 30000, "llmsvcd", "m"}),
            unhex("4c4c4d53 0200 0000 00000000 26000000"
                  "0200 00001000 00000400 00100000 04000000 30750000 07000000 6c6c6d73766364 01000000 6d"));
  EXPECT_EQ(frame_of(Role::client, 1, ContextNew{"notes", std::nullopt, false}, 7),
            unhex("4c4c4d53 1000 0000 01000000 12000000"
                  "05000000 6e6f746573 ffffffff 00 00000000"));
  // Version 8 appends the adapter ("": none).
  EXPECT_EQ(frame_of(Role::client, 1, ContextNew{"notes", std::nullopt, false}),
            unhex("4c4c4d53 1000 0000 01000000 16000000"
                  "05000000 6e6f746573 ffffffff 00 00000000 00000000"));
  EXPECT_EQ(frame_of(Role::server, 1, ContextOpened{1, "notes"}),
            unhex("4c4c4d53 9000 0000 01000000 0d000000"
                  "01000000 05000000 6e6f746573"));
  CallOptions o;
  o.stop = {"\n"};
  EXPECT_EQ(frame_of(Role::client, 2, Call{1, "Hi", o}, 3),
            unhex("4c4c4d53 2000 0000 02000000 3f000000"
                  "01000000 02000000 4869"
                  "0000000000000000 00000000 00000000 0000803f 00000000 0000803f 40000000 00010000"
                  "01000000 01000000 0a"
                  "00000000 00000000"));
  EXPECT_EQ(frame_of(Role::server, 2, Piece{9906, "Hello", {}, {}}, 1),
            unhex("4c4c4d53 a000 0000 02000000 0d000000"
                  "b2260000 05000000 48656c6c6f"));
  EXPECT_EQ(frame_of(Role::client, 0, Cancel{2}), unhex("4c4c4d53 2100 0000 00000000 04000000 02000000"));
  EXPECT_EQ(frame_of(Role::server, 2, CallResult{10, "cancelled", 4, CallStats{5, 1, 6, 0, 1.5, 1.5, 0, 0}}, 1),
            unhex("4c4c4d53 a100 0000 02000000 46000000"
                  "0a000000 09000000 63616e63656c6c6564 04 05000000 01000000 06000000"
                  "0000000000000000 000000000000f83f 000000000000f83f 0000000000000000 0000000000000000"));
  CallStats cs{5, 8, 120, 12.5, 20.0, 7.5, 35.0, 5.0};
  cs.chunks_loaded = 6;
  cs.chunks_recomputed = 1;
  cs.tokens_recomputed = 16;
  cs.chunks_swapped_out = 2;
  cs.swap_out_ms = 0.25;
  const std::string v1_part =
      "00000000 00000000 02 05000000 08000000 78000000"
      "0000000000002940 0000000000003440 0000000000001e40 0000000000804140 0000000000001440";
  EXPECT_EQ(frame_of(Role::server, 5, CallResult{0, "", 2, cs}, 4),
            unhex("4c4c4d53 a100 0000 05000000 59000000" + v1_part +
                  "06000000 01000000 00000000 10000000 02000000 000000000000d03f"));
  EXPECT_EQ(frame_of(Role::server, 5, CallResult{0, "", 2, cs}, 1), unhex("4c4c4d53 a100 0000 05000000 3d000000" + v1_part));
  EXPECT_EQ(frame_of(Role::server, 3, Error{8, "no context 'x'"}),
            unhex("4c4c4d53 0500 0000 03000000 16000000 08000000 0e000000 6e6f20636f6e7465787420277827"));
  EXPECT_EQ(frame_of(Role::server, 4, Ack{}), unhex("4c4c4d53 0600 0000 04000000 00000000"));
  // Version 4: the CALL asks for token ids and log-probabilities, a PIECE carries them, and a
  // token count with its ids.
  o.token_ids = o.logprobs = true;
  EXPECT_EQ(frame_of(Role::client, 2, Call{1, "Hi", o}, 4),
            unhex("4c4c4d53 2000 0000 02000000 41000000"
                  "01000000 02000000 4869"
                  "0000000000000000 00000000 00000000 0000803f 00000000 0000803f 40000000 00010000"
                  "01000000 01000000 0a"
                  "00000000 00000000 01 01"));
  EXPECT_EQ(frame_of(Role::server, 2, Piece{116, "\xE6\x97\xA5", {23274, 115, 116}, {-1.5f, -0.25f, 0.0f}}),
            unhex("4c4c4d53 a000 0000 02000000 2b000000"
                  "74000000 03000000 e697a5"
                  "03000000 ea5a0000 73000000 74000000"
                  "03000000 0000c0bf 000080be 00000000"));
  EXPECT_EQ(frame_of(Role::client, 3, CountTokens{"Hi", {true, true, "", {}}, 0, 16}, 4),
            unhex("4c4c4d53 3200 0000 03000000 14000000 02000000 4869 01 01 00000000 00000000 10000000"));
  EXPECT_EQ(frame_of(Role::server, 3, CountTokensReply{3, {1, 9690, 198}}),
            unhex("4c4c4d53 b200 0000 03000000 14000000 03000000 03000000 01000000 da250000 c6000000"));
  // Version 5: a CALL that only replies, and a context's conversation.
  o.reply_only = true;
  EXPECT_EQ(frame_of(Role::client, 2, Call{1, "", o}, 5),
            unhex("4c4c4d53 2000 0000 02000000 48000000"
                  "01000000 00000000"
                  "0000000000000000 00000000 00000000 0000803f 00000000 0000803f 40000000 00010000"
                  "01000000 01000000 0a"
                  "00000000 00000000 01 01 01 00000000 00000000"));
  EXPECT_EQ(frame_of(Role::client, 4, ContextAppend{"notes", {{MessageRole::user, "Hi"}, {MessageRole::assistant, ""}}}, 5),
            unhex("4c4c4d53 1600 0000 04000000 19000000 05000000 6e6f746573 02000000 01 02000000 4869 02 00000000"));
  EXPECT_EQ(frame_of(Role::client, 5, ContextTruncate{"notes", 2}),
            unhex("4c4c4d53 1700 0000 05000000 0d000000 05000000 6e6f746573 02000000"));
  EXPECT_EQ(frame_of(Role::client, 6, ContextMessages{"notes", 1, 64}),
            unhex("4c4c4d53 1800 0000 06000000 11000000 05000000 6e6f746573 01000000 40000000"));
  EXPECT_EQ(frame_of(Role::server, 6, ContextMessagesReply{true, {{MessageRole::assistant, "Oui."}}}, 5),
            unhex("4c4c4d53 9600 0000 06000000 0e000000 01 01000000 02 04000000 4f75692e"));
  // Version 6: a fork and its answer.
  EXPECT_EQ(frame_of(Role::client, 7, ContextFork{"notes", "notes-b"}),
            unhex("4c4c4d53 1900 0000 07000000 14000000 05000000 6e6f746573 07000000 6e6f7465732d62"));
  EXPECT_EQ(frame_of(Role::server, 7, ContextOpened{2, "notes-b"}),
            unhex("4c4c4d53 9000 0000 07000000 0f000000 02000000 07000000 6e6f7465732d62"));
  // Version 7: the reply-only CALL above at elastic level 20, and a RESULT reporting it (the
  // version-2 RESULT above, with the figures of versions 5 and 6 as 0, the SLO not missed).
  o.level_percent = 20;
  EXPECT_EQ(frame_of(Role::client, 2, Call{1, "", o}, 7),
            unhex("4c4c4d53 2000 0000 02000000 4c000000"
                  "01000000 00000000"
                  "0000000000000000 00000000 00000000 0000803f 00000000 0000803f 40000000 00010000"
                  "01000000 01000000 0a"
                  "00000000 00000000 01 01 01 00000000 00000000 14000000"));
  EXPECT_EQ(frame_of(Role::client, 2, Call{1, "", o}, 6), frame_of(Role::client, 2, Call{1, "", o}, 5));
  cs.level_percent = 20;
  EXPECT_EQ(frame_of(Role::server, 5, CallResult{0, "", 2, cs}, 8),
            unhex("4c4c4d53 a100 0000 05000000 71000000" + v1_part +
                  "06000000 01000000 00000000 10000000 02000000 000000000000d03f"
                  "0000000000000000 00000000 00000000 14000000 00000000"));
  // Version 9: the CALL above keeping half its prompt (after version 8's empty adapter), and
  // the RESULT above reporting 0.75 of it kept.
  o.prompt_keep = 0.5f;
  EXPECT_EQ(frame_of(Role::client, 2, Call{1, "", o}, 9),
            unhex("4c4c4d53 2000 0000 02000000 54000000"
                  "01000000 00000000"
                  "0000000000000000 00000000 00000000 0000803f 00000000 0000803f 40000000 00010000"
                  "01000000 01000000 0a"
                  "00000000 00000000 01 01 01 00000000 00000000 14000000 00000000 0000003f"));
  cs.prompt_kept = 0.75;
  EXPECT_EQ(frame_of(Role::server, 5, CallResult{0, "", 2, cs}, 9),
            unhex("4c4c4d53 a100 0000 05000000 79000000" + v1_part +
                  "06000000 01000000 00000000 10000000 02000000 000000000000d03f"
                  "0000000000000000 00000000 00000000 14000000 00000000 000000000000e83f"));
}

// Every sample frame one side sends, back to back.
std::vector<uint8_t> stream_from(Role sender, std::vector<test::Sample>* sent) {
  std::vector<uint8_t> bytes;
  for (const auto& s : test::protocol_samples()) {
    if (s.sender != sender) continue;
    auto f = frame_of(sender, s.stream, s.message);
    bytes.insert(bytes.end(), f.begin(), f.end());
    sent->push_back(s);
  }
  return bytes;
}

void expect_frames(FrameReader& r, const std::vector<test::Sample>& sent) {
  ASSERT_EQ(r.queued(), sent.size());
  for (const auto& s : sent) {
    auto f = r.next();
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->type, type_of(s.message));
    EXPECT_EQ(f->stream, s.stream);
    auto m = decode_frame(*f, kMaxVersion);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_TRUE(*m == s.message) << type_info(f->type).name;
  }
  EXPECT_FALSE(r.next().has_value());
  EXPECT_FALSE(r.mid_frame());
}

TEST(ProtocolFrame, ReassemblesOneByteAtATime) {
  for (Role sender : {Role::client, Role::server}) {
    std::vector<test::Sample> sent;
    const auto bytes = stream_from(sender, &sent);
    FrameReader r(peer(sender), kDefaultMaxPayload);
    for (size_t i = 0; i < bytes.size(); ++i) {
      ASSERT_TRUE(r.feed(std::span<const uint8_t>(&bytes[i], 1)).ok());
      if (i + 1 < bytes.size()) {
        EXPECT_TRUE(r.mid_frame() || r.queued() > 0);
      }
    }
    expect_frames(r, sent);
  }
}

TEST(ProtocolFrame, ReassemblesRandomSplits) {
  std::mt19937 rng(1234);
  for (Role sender : {Role::client, Role::server}) {
    std::vector<test::Sample> sent;
    const auto bytes = stream_from(sender, &sent);
    for (int trial = 0; trial < 300; ++trial) {
      FrameReader r(peer(sender), kDefaultMaxPayload);
      size_t i = 0;
      while (i < bytes.size()) {
        const size_t n = std::min<size_t>(bytes.size() - i, rng() % (trial % 3 == 0 ? 8 : 700));
        ASSERT_TRUE(r.feed(std::span<const uint8_t>(bytes).subspan(i, n)).ok());
        i += n;
      }
      expect_frames(r, sent);
    }
    FrameReader all(peer(sender), kDefaultMaxPayload);
    ASSERT_TRUE(all.feed(bytes).ok());
    expect_frames(all, sent);
  }
}

// The reader's verdict on one frame header (plus `payload_bytes` of payload).
Status verdict(Role receiver, std::vector<uint8_t> frame, uint32_t max = kDefaultMaxPayload) {
  FrameReader r(receiver, max);
  Status s = r.feed(frame);
  EXPECT_EQ(s.code(), r.error().code());
  return s;
}

std::vector<uint8_t> header(uint16_t type, uint16_t flags, uint32_t stream, uint32_t length) {
  std::vector<uint8_t> h = {'L', 'L', 'M', 'S'};
  for (uint32_t v : {uint32_t{type} | uint32_t{flags} << 16, stream, length})
    for (int i = 0; i < 4; ++i) h.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return h;
}

TEST(ProtocolFrame, HeaderRefusals) {
  auto expect = [](Status s, std::string_view want) {
    EXPECT_EQ(s.code(), Code::invalid_argument);
    EXPECT_EQ(s.message(), want);
  };
  auto h = header(0x0003, 0, 0, 8);
  h[0] = 'G';
  expect(verdict(Role::server, h), "frame: bad magic 0x534d4c47 (not an llmsvc protocol stream)");
  expect(verdict(Role::server, header(0x0003, 1, 0, 8)), "frame: flags 0x0001 set (no flag is defined)");
  expect(verdict(Role::server, header(0x0007, 0, 0, 0)), "frame: unknown message type 0x0007");
  expect(verdict(Role::server, header(0xFFFF, 0, 0, 0)), "frame: unknown message type 0xffff");
  expect(verdict(Role::server, header(0x0002, 0, 0, 0)), "frame: WELCOME is not sent by a client");
  expect(verdict(Role::client, header(0x0020, 0, 1, 0)), "frame: CALL is not sent by a server");
  expect(verdict(Role::server, header(0x0001, 0, 3, 0)), "frame: HELLO on stream 3 (it belongs on stream 0)");
  expect(verdict(Role::server, header(0x0020, 0, 0, 0)), "frame: CALL on stream 0 (it needs a request's stream id)");
  expect(verdict(Role::client, header(0x00a2, 0, 0, 0)), "frame: unknown message type 0x00a2");
  // Oversize: refused as soon as the header is complete, before any payload arrives.
  expect(verdict(Role::server, header(0x0020, 0, 1, kDefaultMaxPayload + 1)),
         "frame: CALL payload of 1048577 bytes exceeds the limit of 1048576");
  expect(verdict(Role::server, header(0x0020, 0, 1, 0xFFFFFFFF)),
         "frame: CALL payload of 4294967295 bytes exceeds the limit of 1048576");
  expect(verdict(Role::server, header(0x0001, 0, 0, kHandshakeMaxPayload + 1), kHandshakeMaxPayload),
         "frame: HELLO payload of 4097 bytes exceeds the limit of 4096");
  EXPECT_TRUE(verdict(Role::server, header(0x0020, 0, 1, kDefaultMaxPayload)).ok());
  // ERROR may use any stream; a client may receive PING and send PONG.
  EXPECT_TRUE(verdict(Role::client, header(0x0005, 0, 0, 0)).ok());
  EXPECT_TRUE(verdict(Role::client, header(0x0005, 0, 9, 0)).ok());
  EXPECT_TRUE(verdict(Role::client, header(0x0003, 0, 0, 0)).ok());
  EXPECT_TRUE(verdict(Role::server, header(0x0004, 0, 0, 0)).ok());
}

TEST(ProtocolFrame, AnErrorIsFinalAndKeepsEarlierFrames) {
  auto good = frame_of(Role::client, 0, Ping{1});
  auto bytes = good;
  bytes.insert(bytes.end(), {'x', 'x', 'x', 'x', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  bytes.insert(bytes.end(), good.begin(), good.end());
  FrameReader r(Role::server, kDefaultMaxPayload);
  Status s = r.feed(bytes);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(r.queued(), 1u);  // the PING before the garbage
  EXPECT_EQ(r.feed(good).message(), s.message());
  EXPECT_EQ(r.queued(), 1u);
  ASSERT_TRUE(r.next().has_value());
  EXPECT_FALSE(r.next().has_value());
}

TEST(ProtocolFrame, MidFrameAndLimits) {
  FrameReader r(Role::server);
  EXPECT_EQ(r.max_payload(), kHandshakeMaxPayload);
  auto f = frame_of(Role::client, 7, Call{1, std::string(5000, 'a'), {}});
  EXPECT_FALSE(r.feed(std::span<const uint8_t>(f).first(16)).ok());  // 5000+ bytes > the handshake limit
  FrameReader r2(Role::server);
  r2.set_max_payload(kDefaultMaxPayload);
  ASSERT_TRUE(r2.feed(std::span<const uint8_t>(f).first(10)).ok());
  EXPECT_TRUE(r2.mid_frame());
  ASSERT_TRUE(r2.feed(std::span<const uint8_t>(f).subspan(10, 100)).ok());
  EXPECT_TRUE(r2.mid_frame());
  EXPECT_EQ(r2.queued(), 0u);
  ASSERT_TRUE(r2.feed(std::span<const uint8_t>(f).subspan(110)).ok());
  EXPECT_FALSE(r2.mid_frame());
  EXPECT_EQ(r2.queued(), 1u);
  ASSERT_TRUE(r2.feed({}).ok());
}

// A header claiming a long payload takes no memory for it: the buffer grows with what arrives
// (a peer sending headers alone holds nothing), and buffered_bytes() counts what is held.
TEST(ProtocolFrame, AClaimedLengthIsNotAllocatedBeforeItsBytesArrive) {
  FrameReader r(Role::server, kDefaultMaxPayload);
  auto f = frame_of(Role::client, 7, Call{1, std::string(200000, 'a'), {}});
  const size_t heap_before = mallinfo2().uordblks;
  ASSERT_TRUE(r.feed(std::span<const uint8_t>(f).first(kHeaderBytes)).ok());
  EXPECT_TRUE(r.mid_frame());
  EXPECT_EQ(r.buffered_bytes(), kHeaderBytes);
  EXPECT_LT(mallinfo2().uordblks - heap_before, 4096u);  // (0 under sanitizers: their allocator is not counted)
  ASSERT_TRUE(r.feed(std::span<const uint8_t>(f).subspan(kHeaderBytes, 1000)).ok());
  EXPECT_EQ(r.buffered_bytes(), kHeaderBytes + 1000);
  ASSERT_TRUE(r.feed(std::span<const uint8_t>(f).subspan(kHeaderBytes + 1000)).ok());
  EXPECT_EQ(r.queued(), 1u);
  EXPECT_EQ(r.buffered_bytes(), f.size());
  auto got = r.next();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->payload.size(), f.size() - kHeaderBytes);
  EXPECT_EQ(r.buffered_bytes(), 0u);
}

TEST(ProtocolFrame, GarbageStreamsFailCleanly) {
  std::mt19937 rng(99);
  std::vector<test::Sample> sent;
  const auto valid = stream_from(Role::client, &sent);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> bytes;
    if (trial % 2 == 0) {
      bytes.resize(rng() % 300);
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      if (trial % 4 == 0 && bytes.size() >= 4) std::copy(kMagic, kMagic + 4, bytes.begin());  // past the magic
    } else {
      bytes = valid;  // a valid stream with a few bytes flipped
      for (int k = 0; k < 1 + trial % 5; ++k) bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    }
    FrameReader r(Role::server, kDefaultMaxPayload);
    const size_t chunk = 1 + rng() % 64;
    for (size_t i = 0; i < bytes.size() && r.error().ok(); i += chunk)
      (void)r.feed(std::span<const uint8_t>(bytes).subspan(i, std::min(chunk, bytes.size() - i)));
    while (auto f = r.next()) {
      auto m = decode_frame(*f, static_cast<uint16_t>(kMinVersion + trial % kMaxVersion));
      if (!m.ok()) {
        EXPECT_TRUE(m.status().code() == Code::invalid_argument || m.status().code() == Code::invalid_utf8);
        EXPECT_EQ(m.status().message().rfind(std::string(type_info(f->type).name), 0), 0u) << m.status().message();
      }
    }
    if (!r.error().ok()) {
      EXPECT_EQ(r.error().message().rfind("frame: ", 0), 0u);
    }
  }
}

TEST(ProtocolFrame, WriterQueuesAndRefuses) {
  FrameWriter w(Role::client);
  ASSERT_TRUE(w.write(0, Hello{}).ok());
  const size_t hello = w.pending_bytes();
  EXPECT_EQ(w.write(0, Welcome{}).message(), "frame: WELCOME is not sent by a client");
  EXPECT_EQ(w.write(0, Call{1, "x", {}}).message(), "frame: CALL on stream 0 (it needs a request's stream id)");
  EXPECT_EQ(w.write(5, Ping{}).message(), "frame: PING on stream 5 (it belongs on stream 0)");
  EXPECT_EQ(w.write(1, Call{0, "x", {}}).message(), "CALL.handle: 0 is outside [1, 4294967295]");
  // The peer's limit: the handshake's until set.
  EXPECT_EQ(w.write(1, Call{1, std::string(5000, 'a'), {}}).message(),
            "frame: CALL payload of 5056 bytes exceeds the peer's limit of 4096");
  EXPECT_EQ(w.pending_bytes(), hello);  // nothing of the refused frames
  w.set_max_payload(kDefaultMaxPayload);
  ASSERT_TRUE(w.write(1, Message{Call{1, std::string(5000, 'a'), {}}}).ok());
  std::vector<uint8_t> sent(w.pending().begin(), w.pending().end());
  w.consume(3);
  EXPECT_EQ(w.pending_bytes(), sent.size() - 3);
  EXPECT_EQ(w.pending()[0], sent[3]);
  w.consume(sent.size());
  EXPECT_EQ(w.pending_bytes(), 0u);

  FrameReader r(Role::server, kDefaultMaxPayload);
  ASSERT_TRUE(r.feed(sent).ok());
  EXPECT_EQ(r.queued(), 2u);
}

// The writer lays payloads out as version 1 until its owner sets the agreed version.
TEST(ProtocolFrame, WriterUsesTheAgreedVersion) {
  CallStats cs;
  cs.chunks_loaded = 3;
  const CallResult r{0, "", 1, cs};
  FrameWriter w(Role::server, kDefaultMaxPayload);
  EXPECT_EQ(w.version(), kMinVersion);
  ASSERT_TRUE(w.write(5, r).ok());
  std::vector<uint8_t> got(w.pending().begin(), w.pending().end());
  EXPECT_EQ(got, frame_of(Role::server, 5, r, 1));
  w.consume(got.size());
  w.set_version(2);
  ASSERT_TRUE(w.write(5, r).ok());
  got.assign(w.pending().begin(), w.pending().end());
  EXPECT_EQ(got, frame_of(Role::server, 5, r, 2));
  auto m = decode_frame(Frame{MsgType::call_result, 5, std::vector<uint8_t>(got.begin() + kHeaderBytes, got.end())}, 2);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(std::get<CallResult>(*m).stats.chunks_loaded, 3);
}

TEST(ProtocolFrame, WriterCompactsLongQueues) {
  FrameWriter w(Role::server, kDefaultMaxPayload);
  std::vector<uint8_t> all;
  for (int i = 0; i < 4000; ++i) {
    Piece p{i, "piece " + std::to_string(i), {}, {}};
    ASSERT_TRUE(w.write(1, p).ok());
    auto f = frame_of(Role::server, 1, p, w.version());
    all.insert(all.end(), f.begin(), f.end());
  }
  std::vector<uint8_t> got;
  std::mt19937 rng(5);
  while (w.pending_bytes() > 0) {
    const size_t n = std::min<size_t>(w.pending_bytes(), 1 + rng() % 5000);
    got.insert(got.end(), w.pending().begin(), w.pending().begin() + static_cast<std::ptrdiff_t>(n));
    w.consume(n);
  }
  EXPECT_EQ(got, all);
}

// The committed seed corpus of fuzz/protocol_fuzzer (written by fuzz/make_protocol_seeds)
// still decodes, each seed at the version its name gives (NAME.vN.*; none: the newest): it
// pins every version's layouts.
TEST(ProtocolFrame, CommittedFuzzSeedsDecode) {
  DIR* dir = opendir(LLMSVC_FUZZ_CORPUS);
  ASSERT_NE(dir, nullptr) << LLMSVC_FUZZ_CORPUS;
  int files = 0;
  std::set<uint16_t> versions;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    uint16_t version = kMaxVersion;
    for (uint16_t v = kMinVersion; v < kMaxVersion; ++v)
      if (std::string(e->d_name).find(".v" + std::to_string(v) + ".") != std::string::npos) version = v;
    versions.insert(version);
    std::ifstream in(std::string(LLMSVC_FUZZ_CORPUS) + "/" + e->d_name, std::ios::binary);
    std::vector<uint8_t> seed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(seed.empty()) << e->d_name;
    ++files;
    const std::span<const uint8_t> rest = std::span<const uint8_t>(seed).subspan(1);
    if (seed[0] & test::kFuzzPayloadMode) {
      ASSERT_GE(rest.size(), 2u);
      auto m = decode_message(static_cast<MsgType>(rest[0] | rest[1] << 8), rest.subspan(2), version);
      EXPECT_TRUE(m.ok()) << e->d_name << ": " << m.status().message();
      continue;
    }
    FrameReader r(test::fuzz_receiver(seed[0]), kDefaultMaxPayload);
    ASSERT_TRUE(r.feed(rest).ok()) << e->d_name << ": " << r.error().message();
    EXPECT_FALSE(r.mid_frame()) << e->d_name;
    EXPECT_GT(r.queued(), 0u) << e->d_name;
    while (auto f = r.next()) {
      auto m = decode_frame(*f, version);
      EXPECT_TRUE(m.ok()) << e->d_name << ": " << m.status().message();
    }
  }
  closedir(dir);
  EXPECT_GT(files, 30);
  EXPECT_EQ(versions.size(), static_cast<size_t>(kMaxVersion - kMinVersion + 1)) << "a version without seeds";
}

}  // namespace
}  // namespace llmsvc::protocol
