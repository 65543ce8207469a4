// SPDX-License-Identifier: Apache-2.0
// Every message: round trip, every truncation refused, trailing bytes, lengths and counts past
// their limits, invalid UTF-8 in every text field, out-of-range values; errors name the field.
// Versions: a later version only appends; a version-1 payload decodes with the later fields 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "runtime/protocol/messages.h"
#include "tests/protocol/samples.h"

namespace llmsvc::protocol {
namespace {

std::vector<uint8_t> payload_of(const Message& m, uint16_t version = kMaxVersion) {
  std::vector<uint8_t> out;
  Status s = encode_payload(m, out, version);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

// `m` as a peer speaking `version` sees it: the fields a later version appended are 0. Written
// out field by field, apart from messages.h, so that a field put under the wrong version shows.
Message as_of_version(Message m, uint16_t version) {
  if (version < kVersionPromptKeep) {
    if (auto* call = std::get_if<Call>(&m)) call->options.prompt_keep = 0;
    if (auto* result = std::get_if<CallResult>(&m)) result->stats.prompt_kept = 0;
  }
  if (version < kVersionAdapters) {
    if (auto* call = std::get_if<Call>(&m)) call->options.adapter.clear();
    if (auto* made = std::get_if<ContextNew>(&m)) made->adapter.clear();
    if (auto* info = std::get_if<ModelInfoReply>(&m)) info->info.adapters.clear();
  }
  if (version < kVersionLevels) {
    if (auto* call = std::get_if<Call>(&m)) call->options.level_percent = 0;
    if (auto* result = std::get_if<CallResult>(&m)) result->stats.level_percent = 0;
  }
  if (version < kVersionFork) {
    if (auto* info = std::get_if<ContextInfoReply>(&m)) info->chunks_shared = 0;
    if (auto* made = std::get_if<ContextNew>(&m)) made->tools.clear();
    if (auto* page = std::get_if<ContextMessagesReply>(&m))
      for (auto& msg : page->messages) msg.tool_calls.clear();
    if (auto* append = std::get_if<ContextAppend>(&m))
      for (auto& msg : append->messages) msg.tool_calls.clear();
    if (auto* result = std::get_if<CallResult>(&m)) result->stats.tool_calls = result->stats.tool_call_errors = 0;
  }
  if (version < kVersionMessages) {
    if (auto* call = std::get_if<Call>(&m)) {
      call->options.reply_only = false;
      call->options.json_schema.clear();
      call->options.grammar.clear();
    }
    if (auto* result = std::get_if<CallResult>(&m)) result->stats.constrain_ms = 0;
    if (auto* count = std::get_if<CountTokens>(&m)) count->params.messages.clear();
  }
  if (version < kVersionModelInfo) {
    if (auto* call = std::get_if<Call>(&m)) call->options.token_ids = call->options.logprobs = false;
    if (auto* piece = std::get_if<Piece>(&m)) piece->ids.clear(), piece->logprobs.clear();
  }
  if (version < kVersionQ3Chunks) {
    if (auto* info = std::get_if<ContextInfoReply>(&m)) info->chunks_q3 = 0;
  }
  if (version >= kVersionPolicyFigures) return m;
  if (auto* info = std::get_if<ContextInfoReply>(&m)) {
    info->chunks_f16 = info->chunks_q8 = info->chunks_q4 = info->chunks_q2 = 0;
  } else if (auto* result = std::get_if<CallResult>(&m)) {
    CallStats& s = result->stats;
    s.chunks_loaded = s.chunks_recomputed = s.chunk_load_failures = s.tokens_recomputed = s.chunks_swapped_out = 0;
    s.swap_out_ms = 0;
  } else if (auto* stats = std::get_if<StatsReply>(&m)) {
    stats->kv_peak_bytes = stats->kv_evictions = stats->chunks_loaded = stats->chunks_recomputed = 0;
    stats->chunk_load_failures = stats->tokens_recomputed = 0;
    stats->switch_in_ms = 0;
    stats->swap_out_chunks = stats->swap_out_bytes = stats->swap_out_failures = stats->swap_out_deferred = 0;
  }
  return m;
}

std::string name_of(const Message& m) { return std::string(type_info(type_of(m)).name); }

// The payload refused with `code`, naming `field` ("CALL.options.stop[1]").
void expect_refused(MsgType type, const std::vector<uint8_t>& payload, std::string_view field,
                    Code code = Code::invalid_argument) {
  auto r = decode_message(type, payload);
  ASSERT_FALSE(r.ok()) << field;
  EXPECT_EQ(r.status().code(), code) << r.status().message();
  EXPECT_EQ(r.status().message().rfind(std::string(field), 0), 0u)
      << "'" << r.status().message() << "' does not start with '" << field << "'";
}

TEST(ProtocolMessages, EveryTypeHasASample) {
  std::set<MsgType> seen;
  for (const auto& s : test::protocol_samples()) seen.insert(type_of(s.message));
  size_t known = 0;
  for (uint32_t raw = 0; raw <= 0xFFFF; ++raw)
    if (const TypeInfo* t = find_type(static_cast<uint16_t>(raw))) {
      ++known;
      EXPECT_TRUE(seen.count(t->type)) << t->name;
      EXPECT_EQ(static_cast<uint16_t>(t->type), raw);
      EXPECT_EQ(&type_info(t->type), t);
    }
  EXPECT_EQ(known, std::variant_size_v<Message>);
  EXPECT_EQ(seen.size(), known);
}

TEST(ProtocolMessages, RoundTripIsExact) {
  for (uint16_t v = kMinVersion; v <= kMaxVersion; ++v) {
    for (const auto& s : test::protocol_samples()) {
      const auto bytes = payload_of(s.message, v);
      auto back = decode_message(type_of(s.message), bytes, v);
      ASSERT_TRUE(back.ok()) << name_of(s.message) << " v" << v << ": " << back.status().message();
      EXPECT_TRUE(*back == as_of_version(s.message, v)) << name_of(s.message) << " v" << v;
      EXPECT_EQ(payload_of(*back, v), bytes) << name_of(s.message) << " v" << v;
    }
  }
}

// The extension rule (docs/PROTOCOL.md section 8): each version's payload is the previous
// version's with fields appended, and the version-2 and -3 samples do carry something new.
TEST(ProtocolMessages, LaterVersionsOnlyAppend) {
  std::set<MsgType> grew;
  for (const auto& s : test::protocol_samples()) {
    for (uint16_t v = kMinVersion; v < kMaxVersion; ++v) {
      const auto older = payload_of(s.message, v), newer = payload_of(s.message, static_cast<uint16_t>(v + 1));
      ASSERT_LE(older.size(), newer.size()) << name_of(s.message);
      EXPECT_TRUE(std::equal(older.begin(), older.end(), newer.begin())) << name_of(s.message) << " v" << v;
      if (older.size() < newer.size()) grew.insert(type_of(s.message));
    }
  }
  EXPECT_EQ(grew, (std::set<MsgType>{MsgType::context_info_reply, MsgType::call_result, MsgType::stats_reply,
                                     MsgType::call, MsgType::piece, MsgType::count_tokens, MsgType::context_new,
                                     MsgType::context_messages_reply, MsgType::context_append,
                                     MsgType::model_info_reply}));
}

TEST(ProtocolMessages, DecodedAsAnotherTypeFailsOrDiffers) {
  // Payloads carry no type of their own; the frame's type decides. A payload read as another
  // type must not crash (it may decode: PING and PONG share a layout).
  for (const auto& s : test::protocol_samples()) {
    const auto bytes = payload_of(s.message);
    for (const auto& other : test::protocol_samples()) (void)decode_message(type_of(other.message), bytes);
  }
}

TEST(ProtocolMessages, EveryTruncationIsRefused) {
  for (uint16_t v = kMinVersion; v <= kMaxVersion; ++v) {
    for (const auto& s : test::protocol_samples()) {
      const auto bytes = payload_of(s.message, v);
      for (size_t n = 0; n < bytes.size(); ++n) {
        // An exact-size heap copy: ASan sees any read past the cut.
        std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
        cut.shrink_to_fit();
        auto r = decode_message(type_of(s.message), cut, v);
        ASSERT_FALSE(r.ok()) << name_of(s.message) << " v" << v << " cut to " << n << " of " << bytes.size();
        EXPECT_EQ(r.status().message().rfind(name_of(s.message) + ".", 0), 0u) << r.status().message();
      }
    }
  }
}

TEST(ProtocolMessages, TrailingBytesRefusedExceptInTheHandshake) {
  for (uint16_t v = kMinVersion; v <= kMaxVersion; ++v) {
    for (const auto& s : test::protocol_samples()) {
      auto bytes = payload_of(s.message, v);
      bytes.insert(bytes.end(), {0x01, 0x02, 0x03});
      const MsgType t = type_of(s.message);
      auto r = decode_message(t, bytes, v);
      if (t == MsgType::hello || t == MsgType::welcome) {
        ASSERT_TRUE(r.ok()) << r.status().message();
        EXPECT_TRUE(*r == s.message);
      } else {
        ASSERT_FALSE(r.ok()) << name_of(s.message);
        EXPECT_EQ(r.status().message(), name_of(s.message) + ": 3 trailing bytes after the last field");
      }
    }
  }
}

// Raw payloads built field by field (the Encoder writes what it is given).
struct Raw {
  std::vector<uint8_t> b;
  Raw& u8(uint8_t v) {
    b.push_back(v);
    return *this;
  }
  Raw& u16(uint16_t v) { return u8(v & 0xFF).u8(static_cast<uint8_t>(v >> 8)); }
  Raw& u32(uint32_t v) { return u16(v & 0xFFFF).u16(static_cast<uint16_t>(v >> 16)); }
  Raw& u64(uint64_t v) { return u32(v & 0xFFFFFFFF).u32(static_cast<uint32_t>(v >> 32)); }
  Raw& f32(float v) {
    uint32_t x;
    std::memcpy(&x, &v, 4);
    return u32(x);
  }
  Raw& str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
};

// A CALL payload up to (not including) options.stop.
Raw call_head(float temperature = 0.0f) {
  Raw r;
  r.u32(1).str("hi").u64(0).f32(temperature).u32(0).f32(1).f32(0).f32(1).u32(64).u32(256);
  return r;
}

TEST(ProtocolMessages, LengthsPastTheirLimits) {
  expect_refused(MsgType::context_open, Raw().str(std::string(65, 'a')).b, "CONTEXT_OPEN.id: 65 bytes, at most 64");
  expect_refused(MsgType::context_open, Raw().str("").b, "CONTEXT_OPEN.id: is empty");
  // A length the field allows but the payload does not hold.
  expect_refused(MsgType::context_open, Raw().u32(64).u8('a').b, "CONTEXT_OPEN.id: truncated");
  // Huge lengths are refused without allocating (ASan would report a failed allocation).
  expect_refused(MsgType::call, Raw().u32(1).u32(0xFFFFFFFE).b, "CALL.prompt: 4294967294 bytes, at most");
  expect_refused(MsgType::call, Raw().u32(1).u32(kMaxMaxPayload).b, "CALL.prompt: truncated");
  expect_refused(MsgType::piece, Raw().u32(1).str(std::string(kMaxPieceBytes + 1, 'p')).b, "PIECE.text: 65537 bytes");
  expect_refused(MsgType::error, Raw().u32(1).str(std::string(kMaxMessageBytes + 1, 'e')).b, "ERROR.message: 4097");
  expect_refused(MsgType::hello, Raw().u16(1).u16(1).u32(kDefaultMaxPayload).str(std::string(257, 'n')).b,
                 "HELLO.client_name: 257 bytes");
  // Counts: more stop strings than allowed, a count the payload cannot hold, a stop too long.
  expect_refused(MsgType::call, call_head().u32(17).b, "CALL.options.stop: 17 entries, at most 16");
  expect_refused(MsgType::call, call_head().u32(16).str("a").b, "CALL.options.stop: 16 entries cannot fit");
  expect_refused(MsgType::call, call_head().u32(2).str("ok").str(std::string(257, 's')).b,
                 "CALL.options.stop[1]: 257 bytes, at most 256");
  expect_refused(MsgType::call, call_head().u32(1).str("").f32(0).f32(0).b, "CALL.options.stop[0]: is empty");
  expect_refused(MsgType::context_list_reply, Raw().u8(0).u32(1025).b, "CONTEXT_LIST_REPLY.ids: 1025 entries");
  expect_refused(MsgType::context_list_reply, Raw().u8(0).u32(0xFFFFFFFF).b, "CONTEXT_LIST_REPLY.ids: 4294967295");
  expect_refused(MsgType::context_list_reply, Raw().u8(0).u32(1000).str("a").b, "CONTEXT_LIST_REPLY.ids: 1000 entries cannot fit");
}

TEST(ProtocolMessages, InvalidUtf8InEveryTextField) {
  const std::string bad[] = {"\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80",
                             "\x80",     "\xE6\x97",     "a\xFF",        "\xC2"};
  // For each sample, replace a placeholder text of the same length with the bad bytes.
  for (const std::string& b : bad) {
    const std::string marker(b.size(), '#');
    CallOptions o;
    o.stop = {"ok", marker};
    const std::vector<std::pair<Message, std::string>> cases = {
        {Hello{1, 1, kDefaultMaxPayload, marker}, "HELLO.client_name"},
        {Welcome{1, kDefaultMaxPayload, 1, 1, 1, 0, marker, ""}, "WELCOME.server"},
        {Welcome{1, kDefaultMaxPayload, 1, 1, 1, 0, "", marker}, "WELCOME.model"},
        {Error{1, marker}, "ERROR.message"},
        {ContextNew{marker, std::nullopt, false}, "CONTEXT_NEW.id"},
        {ContextNew{std::nullopt, marker, false}, "CONTEXT_NEW.system_prompt"},
        {ContextOpen{{marker}}, "CONTEXT_OPEN.id"},
        {ContextDelete{{marker}}, "CONTEXT_DELETE.id"},
        {ContextInfo{{marker}}, "CONTEXT_INFO.id"},
        {ContextOpened{1, marker}, "CONTEXT_OPENED.id"},
        {ContextListReply{false, {"a", marker}}, "CONTEXT_LIST_REPLY.ids[1]"},
        {ContextInfoReply{marker, false, 0, 0, 0, 0, 0, 0, 0}, "CONTEXT_INFO_REPLY.id"},
        {Call{1, marker, {}}, "CALL.prompt"},
        {Call{1, "", o}, "CALL.options.stop[1]"},
        {Piece{1, marker, {}, {}}, "PIECE.text"},
        {CallResult{1, marker, 0, {}}, "RESULT.message"},
    };
    for (const auto& [m, field] : cases) {
      auto bytes = payload_of(m);
      auto at = std::search(bytes.begin(), bytes.end(), marker.begin(), marker.end());
      ASSERT_NE(at, bytes.end()) << field;
      std::copy(b.begin(), b.end(), at);
      expect_refused(type_of(m), bytes, field + ": is not valid UTF-8", Code::invalid_utf8);
    }
  }
  // The encoder refuses such text too.
  std::vector<uint8_t> out;
  Status s = encode_payload(ContextOpen{{"\xC0\x80"}}, out);
  EXPECT_EQ(s.code(), Code::invalid_utf8);
  EXPECT_EQ(s.message(), "CONTEXT_OPEN.id: is not valid UTF-8");
}

TEST(ProtocolMessages, ValuesOutOfRange) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  expect_refused(MsgType::context_new, Raw().u32(kAbsent).u32(kAbsent).u8(2).b, "CONTEXT_NEW.raw: 2 is outside [0, 1]");
  expect_refused(MsgType::context_close, Raw().u32(0).b, "CONTEXT_CLOSE.handle: 0 is outside [1, 4294967295]");
  expect_refused(MsgType::cancel, Raw().u32(0).b, "CANCEL.call: 0 is outside");
  expect_refused(MsgType::context_opened, Raw().u32(0).str("a").b, "CONTEXT_OPENED.handle: 0 is outside");
  expect_refused(MsgType::error, Raw().u32(0).str("x").b, "ERROR.status: is 0 (LLMSVC_OK)");
  expect_refused(MsgType::call, call_head(nan).u32(0).b, "CALL.options.temperature: is not a finite number");
  expect_refused(MsgType::call, call_head(inf).u32(0).b, "CALL.options.temperature: is not a finite number");
  expect_refused(MsgType::hello, Raw().u16(0).u16(1).u32(kDefaultMaxPayload).str("").b, "HELLO.min_version: 0 is outside");
  expect_refused(MsgType::hello, Raw().u16(2).u16(1).u32(kDefaultMaxPayload).str("").b,
                 "HELLO.max_version: is below min_version");
  expect_refused(MsgType::hello, Raw().u16(1).u16(1).u32(kMinMaxPayload - 1).str("").b,
                 "HELLO.max_frame_payload: 65535 is outside [65536, 16777216]");
  expect_refused(MsgType::welcome, Raw().u16(1).u32(kMaxMaxPayload + 1).b, "WELCOME.max_frame_payload: 16777217");
  expect_refused(MsgType::welcome, Raw().u16(1).u32(kDefaultMaxPayload).u32(0).u32(0).u32(0).b,
                 "WELCOME.max_calls: 0 is outside");
  Raw result;
  result.u32(0).str("").u8(6);
  expect_refused(MsgType::call_result, result.b, "RESULT.finish_reason: 6 is outside [0, 5]");
  expect_refused(MsgType::call_result, Raw().u32(0).str("").u8(1).u32(0xFFFFFFFF).b,
                 "RESULT.stats.prompt_tokens: -1 is negative");
  expect_refused(MsgType::stats_reply, Raw().u32(0).u32(0x80000000).b, "STATS_REPLY.known_contexts: -2147483648 is negative");
  expect_refused(MsgType::context_new, Raw().u32(kAbsent - 1).b, "CONTEXT_NEW.id: 4294967294 bytes, at most 64");

  // The encoder refuses what the decoder would.
  auto refuses = [](const Message& m, std::string_view want) {
    std::vector<uint8_t> out;
    Status s = encode_payload(m, out);
    EXPECT_FALSE(s.ok()) << want;
    EXPECT_EQ(s.message().rfind(std::string(want), 0), 0u) << s.message();
  };
  CallOptions o;
  o.top_p = nan;
  refuses(Call{1, "", o}, "CALL.options.top_p: is not a finite number");
  o = {};
  o.stop.assign(17, "s");
  refuses(Call{1, "", o}, "CALL.options.stop: 17 entries, at most 16");
  refuses(Call{0, "", {}}, "CALL.handle: 0 is outside");
  refuses(CallResult{0, "", 9, {}}, "RESULT.finish_reason: 9 is outside [0, 5]");
  refuses(CallResult{0, "", -1, {}}, "RESULT.finish_reason: -1 is outside [0, 5]");
  refuses(Error{0, ""}, "ERROR.status: is 0");
  refuses(ContextNew{"", std::nullopt, false}, "CONTEXT_NEW.id: is empty");
  refuses(ContextInfoReply{"a", false, -5, 0, 0, 0, 0, 0, 0}, "CONTEXT_INFO_REPLY.tokens: -5 is negative");
  refuses(Hello{3, 2, kDefaultMaxPayload, ""}, "HELLO.max_version: is below min_version");
  refuses(Piece{0, std::string(kMaxPieceBytes + 1, 'x'), {}, {}}, "PIECE.text: 65537 bytes");
  // Version 4's fields.
  refuses(Piece{1, "a", {1, 2}, {-0.5f}}, "PIECE.logprobs: not one per id");
  refuses(Piece{1, "a", {1}, {0.25f}}, "PIECE.logprobs: a log-probability above 0");
  refuses(Piece{1, "a", {1}, {-std::numeric_limits<float>::infinity()}}, "PIECE.logprobs: is not a finite number");
  refuses(Piece{1, "a", std::vector<int32_t>(kMaxPieceIds + 1, 7), {}}, "PIECE.ids: 1025 entries, at most 1024");
  refuses(CountTokens{"", {}, 0, static_cast<uint32_t>(kMaxCountIds) + 1}, "COUNT_TOKENS.max_ids: 16385 is outside");
  refuses(CountTokensReply{-1, {}}, "COUNT_TOKENS_REPLY.count: -1 is negative");
  llmsvc::ModelInfo mi;
  mi.weight_types.assign(kMaxWeightTypes + 1, {"F32", 1, 4});
  refuses(ModelInfoReply{mi}, "MODEL_INFO_REPLY.weight_types: 17 entries, at most 16");
  mi = {};
  mi.eot.id = -2;
  refuses(ModelInfoReply{mi}, "MODEL_INFO_REPLY.eot.id: is below -1");
  mi = {};
  mi.devices = {""};
  refuses(ModelInfoReply{mi}, "MODEL_INFO_REPLY.devices[0]: is empty");
  mi.devices = {"cpu"};
  mi.adapters = {std::string(65, 'a')};
  refuses(ModelInfoReply{mi}, "MODEL_INFO_REPLY.adapters[0]: ");
  mi = {};
  mi.weight_types = {{"", 1, 4}};
  refuses(ModelInfoReply{mi}, "MODEL_INFO_REPLY.weight_types.type: is empty");
  // A count the rest of the payload cannot hold is refused before anything is made.
  expect_refused(MsgType::count_tokens_reply, Raw().u32(3).u32(10000).u32(1).b,
                 "COUNT_TOKENS_REPLY.ids: 10000 entries cannot fit");
}

TEST(ProtocolMessages, UnknownStatusFromANewerPeer) {
  auto r = decode_payload<CallResult>(Raw().u32(99).str("quota of a kind we do not know").u8(0).u32(0).u32(0).u32(0)
                                          .u64(0).u64(0).u64(0).u64(0).u64(0).b,
                                      1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 99u);
  EXPECT_EQ(code_from_wire(r->status), Code::internal);
  Status s = r->to_status();
  EXPECT_EQ(s.code(), Code::internal);
  EXPECT_EQ(s.message(), "status 99 (unknown to this version): quota of a kind we do not know");
  // Known ones map one to one.
  for (uint32_t v = 1; v <= kMaxKnownStatus; ++v) {
    EXPECT_EQ(code_from_wire(v), static_cast<Code>(v));
    EXPECT_EQ(code_to_wire(static_cast<Code>(v)), v);
    EXPECT_EQ((Error{v, "m"}.to_status().message()), "m");
  }
  EXPECT_TRUE(CallResult{}.to_status().ok());
}

// What a version-1 daemon sends (built field by field, not by the encoder): on a connection that
// agreed on version 1 it decodes, and the figures version 2 appended read 0. The same bytes on a
// version-2 connection are refused (truncated, naming the first field version 1 lacks), and a
// version-2 payload on a version-1 connection has trailing bytes: a field is never misread.
TEST(ProtocolMessages, VersionOnePayloadsDecodeWithTheLaterFieldsZero) {
  Raw result;
  result.u32(0).str("").u8(2).u32(40).u32(16).u32(756);
  for (double ms : {31.5, 60.25, 20.5, 150.0, 10.0}) {
    uint64_t bits;
    std::memcpy(&bits, &ms, 8);
    result.u64(bits);
  }
  auto r = decode_payload<CallResult>(result.b, 1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->finish_reason, 2);
  EXPECT_EQ(r->stats.context_tokens, 756);
  EXPECT_EQ(r->stats.tpot_ms, 10.0);
  EXPECT_EQ(r->stats, (CallStats{40, 16, 756, 31.5, 60.25, 20.5, 150.0, 10.0}));
  EXPECT_EQ(r->stats.chunks_loaded, 0);
  EXPECT_EQ(r->stats.chunks_recomputed, 0);
  EXPECT_EQ(r->stats.swap_out_ms, 0.0);
  auto r2 = decode_payload<CallResult>(result.b, 2);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().message(), "RESULT.stats.chunks_loaded: truncated (4 bytes needed, 0 left)");

  Raw stats;
  stats.u32(1).u32(3).u64(9).u64(400).u64(144).u64(3u << 20).u64(90u << 20);
  auto s = decode_payload<StatsReply>(stats.b, 1);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(*s, (StatsReply{1, 3, 9, 400, 144, 3u << 20, 90u << 20}));
  EXPECT_EQ(s->kv_peak_bytes, 0u);
  EXPECT_EQ(s->swap_out_bytes, 0u);
  EXPECT_EQ(decode_payload<StatsReply>(stats.b, 2).status().message(),
            "STATS_REPLY.kv_peak_bytes: truncated (8 bytes needed, 0 left)");

  Raw info;
  info.str("notes").u8(0).u32(700).u32(4).u32(44).u32(30).u32(10).u32(4).u64(5u << 20);
  auto i = decode_payload<ContextInfoReply>(info.b, 1);
  ASSERT_TRUE(i.ok()) << i.status().message();
  EXPECT_EQ(*i, (ContextInfoReply{"notes", false, 700, 4, 44, 30, 10, 4, 5u << 20}));
  EXPECT_EQ(i->chunks_f16 + i->chunks_q8 + i->chunks_q4 + i->chunks_q3 + i->chunks_q2, 0);
  EXPECT_EQ(decode_payload<ContextInfoReply>(info.b, 2).status().message(),
            "CONTEXT_INFO_REPLY.chunks_f16: truncated (4 bytes needed, 0 left)");

  // Version 2's layout read as version 1: the appended figures are trailing bytes.
  const auto v2 = payload_of(as_of_version(ContextInfoReply{"notes", false, 700, 4, 44, 30, 10, 4, 5u << 20}, 2), 2);
  EXPECT_EQ(decode_payload<ContextInfoReply>(v2, 1).status().message(),
            "CONTEXT_INFO_REPLY: 16 trailing bytes after the last field");
}

TEST(ProtocolMessages, FloatsKeepTheirBits) {
  CallOptions o;
  o.temperature = -0.0f;
  o.top_p = std::numeric_limits<float>::denorm_min();
  o.min_p = std::nextafter(1.0f, 2.0f);
  auto bytes = payload_of(Call{1, "", o});
  auto r = decode_payload<Call>(bytes);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(std::signbit(r->options.temperature));
  EXPECT_EQ(r->options.top_p, o.top_p);
  EXPECT_EQ(r->options.min_p, o.min_p);
  EXPECT_EQ(payload_of(*r), bytes);
}

}  // namespace
}  // namespace llmsvc::protocol
