// SPDX-License-Identifier: Apache-2.0
// Writes the seed corpus of protocol_session_fuzzer (fuzz/corpus/protocol_session/): realistic
// sessions in its input format (fuzz/protocol_session_input.h): the handshake, PING / PONG both
// ways, contexts, CALLs with PIECEs and a RESULT, CANCEL, CONTEXT_LIST in parts, every
// version, requests held at the in-flight bound, and the bad: malformed payloads, lying
// lengths, bad magic, requests on a stream in flight, more CALLs than allowed, answers the
// server's state must refuse, ERROR on stream 0 mid-session.
// Usage: make_protocol_session_seeds OUT_DIR     (fuzz preset: build/fuzz/fuzz/make_protocol_session_seeds)
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/protocol_session_input.h"

using namespace llmsvc;
namespace p = llmsvc::protocol;
using fuzz::Op;

namespace {

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

class Seed {
 public:
  explicit Seed(uint32_t max_calls = 1, uint32_t max_requests_in_flight = 8,
                uint32_t max_payload = p::kDefaultMaxPayload, uint16_t max_version = p::kMaxVersion) {
    o_.u8(static_cast<uint8_t>(max_calls - 1));
    o_.u8(static_cast<uint8_t>(max_requests_in_flight - 1));
    o_.u32(max_payload - p::kMinMaxPayload);
    o_.u8(static_cast<uint8_t>(max_version - p::kMinVersion));
  }

  Seed& send(uint32_t stream, const p::Message& m) {
    op(Op::client_send);
    o_.u8(fuzz::index_in(fuzz::kClientTypes, p::type_of(m)));
    o_.stream(stream);
    fuzz::emit_message(m, o_);
    return *this;
  }
  Seed& bad(p::MsgType type, uint32_t stream, const std::vector<uint8_t>& payload) {
    op(Op::client_bad);
    o_.u8(fuzz::index_in(fuzz::kRequestTypes, type));
    o_.stream(stream);
    o_.bytes(payload);
    return *this;
  }
  Seed& raw(const std::vector<uint8_t>& b) {
    op(Op::raw_bytes);
    o_.bytes(b);
    return *this;
  }
  Seed& raw_header(uint16_t type, uint32_t stream, uint32_t length, const std::vector<uint8_t>& tail,
                   uint16_t flags = 0) {
    op(Op::raw_header);
    o_.u16(type);
    if (flags) {
      o_.u8(0xFF);
      o_.u16(flags);
    } else {
      o_.u8(0);
    }
    o_.stream(stream);
    o_.u32(length);
    o_.bytes(tail);
    return *this;
  }
  Seed& rogue(uint32_t stream, const p::Message& m) {
    op(Op::rogue_send);
    o_.u8(static_cast<uint8_t>(m.index()));
    o_.stream(stream);
    fuzz::emit_message(m, o_);
    return *this;
  }
  Seed& server_raw(const std::vector<uint8_t>& b) {
    op(Op::server_raw);
    o_.bytes(b);
    return *this;
  }
  Seed& server_rogue(uint32_t stream, const p::Message& m) {
    op(Op::server_rogue_send);
    o_.u8(static_cast<uint8_t>(m.index()));
    o_.stream(stream);
    fuzz::emit_message(m, o_);
    return *this;
  }
  Seed& c2s(uint16_t n = 0) {
    op(Op::deliver_c2s);
    o_.u16(n);
    return *this;
  }
  Seed& s2c(uint16_t n = 0) {
    op(Op::deliver_s2c);
    o_.u16(n);
    return *this;
  }
  // Both ways, in reads of n bytes (0: whole).
  Seed& both(uint16_t n = 0) { return c2s(n).s2c(n); }
  Seed& answer(uint32_t stream, const p::Message& m) {
    op(Op::server_send);
    if (stream == 0) {
      o_.u8(0xFE);
    } else {
      o_.u8(0xFF);
      o_.u32(stream);
    }
    o_.u8(fuzz::index_in(fuzz::kServerTypes, p::type_of(m)));
    fuzz::emit_message(m, o_);
    return *this;
  }
  // A PIECE of n copies of `byte` (past the client's limit when n is near it).
  Seed& big_piece(uint32_t stream, size_t n, uint8_t byte = 'a') {
    op(Op::server_send);
    o_.u8(0xFF);
    o_.u32(stream);
    o_.u8(fuzz::index_in(fuzz::kServerTypes, p::MsgType::piece));
    o_.u32(1);  // token
    o_.repeat(byte, n);
    o_.u8(0);  // no ids (version 4)
    o_.u8(0);  // no log-probabilities
    return *this;
  }
  // A tracked request whose payload is n copies of `byte`.
  Seed& big_bad(p::MsgType type, uint32_t stream, size_t n, uint8_t byte = 'x') {
    op(Op::client_bad);
    o_.u8(fuzz::index_in(fuzz::kRequestTypes, type));
    o_.stream(stream);
    o_.repeat(byte, n);
    return *this;
  }
  Seed& handshake(uint16_t min_version = p::kMinVersion, uint16_t max_version = p::kMaxVersion,
                  uint32_t max_payload = p::kDefaultMaxPayload) {
    p::Hello h;
    h.min_version = min_version;
    h.max_version = max_version;
    h.max_frame_payload = max_payload;
    h.client_name = "seed";
    return send(0, h).both();
  }

  const std::vector<uint8_t>& data() const { return o_.data; }

 private:
  void op(Op o) { o_.u8(static_cast<uint8_t>(o)); }
  fuzz::Out o_;
};

p::Call call(uint32_t handle, const std::string& prompt) {
  p::Call c;
  c.handle = handle;
  c.prompt = prompt;
  c.options.max_tokens = 8;
  c.options.stop = {"\n\n"};
  return c;
}

p::CallResult result(Code code = Code::ok, int32_t generated = 3) {
  p::CallResult r;
  r.status = p::code_to_wire(code);
  if (code != Code::ok) r.message = "cancelled";
  r.finish_reason = code == Code::ok ? 1 : 3;
  r.stats.prompt_tokens = 5;
  r.stats.generated_tokens = generated;
  r.stats.context_tokens = 5 + generated;
  r.stats.ttft_ms = 12.5;
  r.stats.decode_ms = 30;
  r.stats.chunks_loaded = 2;
  return r;
}

p::Error error(Code code, const std::string& message) {
  p::Error e;
  e.status = p::code_to_wire(code);
  e.message = message;
  return e;
}

p::ContextListReply list_part(bool more, std::vector<std::string> ids) {
  p::ContextListReply r;
  r.more = more;
  r.ids = std::move(ids);
  return r;
}

p::ContextInfoReply info(const std::string& id) {
  p::ContextInfoReply r;
  r.id = id;
  r.tokens = 42;
  r.turns = 2;
  r.chunks_total = 3;
  r.chunks_resident = 2;
  r.chunks_swapped = 1;
  r.kv_resident_bytes = 1 << 16;
  r.chunks_q8 = 1;
  r.chunks_q3 = 1;
  return r;
}

p::StatsReply stats() {
  p::StatsReply r;
  r.open_contexts = 1;
  r.known_contexts = 2;
  r.calls = 3;
  r.kv_bytes = 1 << 20;
  r.kv_peak_bytes = 1 << 21;
  r.swap_out_chunks = 4;
  return r;
}

p::ContextNew context_new(const std::string& id) {
  p::ContextNew c;
  c.id = id;
  c.system_prompt = "You are terse.";
  return c;
}

std::vector<std::pair<std::string, Seed>> sessions() {
  std::vector<std::pair<std::string, Seed>> v;
  v.emplace_back("handshake_ping", Seed().handshake().send(0, p::Ping{7}).both().answer(0, p::Ping{8}).s2c().c2s());
  v.emplace_back("context_call",
                 Seed()
                     .handshake()
                     .send(1, context_new("chat"))
                     .c2s()
                     .answer(1, p::ContextOpened{7, "chat"})
                     .s2c()
                     .send(2, call(7, "Hello there"))
                     .c2s(5)
                     .c2s()
                     .answer(2, p::Piece{101, "Hi", {}, {}})
                     .answer(2, p::Piece{102, ", ", {}, {}})
                     .answer(2, p::Piece{103, "you", {}, {}})
                     .answer(2, result())
                     .s2c(5).s2c(11).s2c(3).s2c()
                     .send(3, p::ContextClose{7})
                     .c2s()
                     .answer(3, p::Ack{})
                     .s2c()
                     .send(4, p::ContextDelete{"chat"})
                     .c2s()
                     .answer(4, p::Ack{})
                     .s2c());
  v.emplace_back("open_info_cancel",
                 Seed(2)
                     .handshake()
                     .send(1, p::ContextOpen{"notes"})
                     .both()
                     .answer(1, p::ContextOpened{3, "notes"})
                     .s2c()
                     .send(2, call(3, "Tell a long story"))
                     .c2s()
                     .answer(2, p::Piece{5, "Once", {}, {}})
                     .s2c()
                     .send(0, p::Cancel{2})
                     .send(0, p::Cancel{9})  // no such call: ignored
                     .c2s()
                     .answer(2, result(Code::cancelled, 1))
                     .s2c()
                     .send(0, p::Cancel{2})  // ended meanwhile: ignored
                     .send(3, p::ContextInfo{"notes"})
                     .c2s()
                     .answer(3, info("notes"))
                     .s2c());
  v.emplace_back("list_in_parts",
                 Seed()
                     .handshake()
                     .send(1, p::ContextList{})
                     .c2s()
                     .answer(1, list_part(true, {"a", "b"}))
                     .s2c(9)
                     .answer(1, list_part(true, {"c"}))
                     .answer(1, list_part(false, {}))
                     .s2c()
                     .send(1, p::ContextList{})  // the id is free again
                     .c2s()
                     .answer(1, list_part(false, {"a", "b", "c"}))
                     .s2c()
                     .send(2, p::Stats{})
                     .c2s()
                     .answer(2, stats())
                     .s2c());
  v.emplace_back("concurrent_calls",
                 [] {
                   Seed s(2, 8);
                   s.handshake().send(1, context_new("x")).both().answer(1, p::ContextOpened{1, "x"}).s2c();
                   s.send(2, call(1, "first")).send(3, call(1, "second")).send(4, p::Stats{});
                   for (int i = 0; i < 24; ++i) s.c2s(1);
                   s.c2s();
                   s.answer(3, p::Piece{1, "b", {}, {}}).answer(2, p::Piece{2, "a", {}, {}}).answer(4, stats());
                   s.s2c(7).answer(3, result()).s2c(7).answer(2, result(Code::ok, 1)).s2c();
                   s.send(0, p::Ping{1}).both();
                   return s;
                 }());
  v.emplace_back("bad_payload_mid_session",
                 Seed()
                     .handshake()
                     .bad(p::MsgType::call, 5, {1, 0, 0, 0, 0xFF, 0xFF})  // CALL cut short
                     .bad(p::MsgType::stats, 6, {0})                      // STATS with a trailing byte
                     .bad(p::MsgType::context_open, 7, bytes_of(std::string("\x02\x00\x00\x00ok", 6)))  // well-formed
                     .both()
                     .answer(7, p::ContextOpened{2, "ok"})
                     .s2c()
                     .send(8, call(2, "still fine"))
                     .c2s()
                     .answer(8, result())
                     .s2c()
                     .raw(bytes_of("GET / HTTP/1.1\r\n\r\n"))  // bad magic: ERROR on stream 0
                     .both()
                     .send(9, p::Stats{}));
  v.emplace_back("lying_lengths",
                 Seed()
                     .raw_header(static_cast<uint16_t>(p::MsgType::hello), 0, 4096, {1, 0, 3})  // claims the most
                     .c2s(8)
                     .c2s()
                     .raw_header(static_cast<uint16_t>(p::MsgType::call), 3, 16u << 20, {0, 0})
                     .both());
  v.emplace_back("lying_length_after_handshake",
                 Seed(1, 8, p::kMaxMaxPayload)
                     .handshake()
                     .raw_header(static_cast<uint16_t>(p::MsgType::call), 3, p::kMaxMaxPayload, {1, 0, 0, 0})
                     .c2s()
                     .raw_header(static_cast<uint16_t>(p::MsgType::call), 4, 20, {1, 2})
                     .both());
  v.emplace_back("version_1",
                 Seed()
                     .handshake(1, 1)
                     .send(1, call(9, "v1"))
                     .send(2, p::ContextInfo{"old"})
                     .send(3, p::Stats{})
                     .c2s()
                     .answer(1, result())
                     .answer(2, info("old"))
                     .answer(3, stats())
                     .s2c());
  v.emplace_back("version_4_info_count_ids",
                 [] {
                   p::ModelInfoReply mi;
                   mi.info.ready = true;
                   mi.info.architecture = "llama";
                   mi.info.n_ctx = mi.info.n_ctx_train = 8192;
                   mi.info.weight_types = {{"Q4_1", 210, 80u << 20}};
                   mi.info.eos = {2, "<|im_end|>"};
                   mi.info.devices = {"cpu"};
                   p::Call c = call(1, "ids please");
                   c.options.token_ids = c.options.logprobs = true;
                   Seed s;
                   s.handshake().send(1, p::ModelInfoRequest{}).send(2, p::CountTokens{"count me", {true, true, "", {}}, 0, 8});
                   s.send(3, context_new("ids")).c2s().answer(1, mi).answer(2, p::CountTokensReply{4, {1, 2, 3, 4}});
                   s.answer(3, p::ContextOpened{1, "ids"}).s2c().send(4, c).c2s();
                   s.answer(4, p::Piece{116, "\xE6\x97\xA5", {23274, 115, 116}, {-1.5f, -0.25f, 0.0f}});
                   s.answer(4, p::Piece{-1, "", {2}, {-0.125f}}).answer(4, result()).s2c();
                   s.answer(5, p::CountTokensReply{});  // no request on stream 5: refused by the state
                   return s;
                 }());
  v.emplace_back("version_3_server_new_types",
                 Seed(1, 8, p::kDefaultMaxPayload, 3)
                     .handshake()
                     .send(1, p::ModelInfoRequest{})  // the client's state refuses it at version 3
                     .rogue(2, p::CountTokens{"x", {}, 0, 1})  // sent anyway: a connection error
                     .both());
  v.emplace_back("version_6_conversation_fork",
                 Seed()
                     .handshake()
                     .send(1, p::ContextAppend{"notes", {llmsvc::ChatMessage{llmsvc::MessageRole::user, "Hi"}}})
                     .send(2, p::ContextTruncate{"notes", 0})
                     .send(3, p::ContextMessages{"notes", 0, 64})
                     .send(4, p::ContextFork{"notes", std::nullopt})
                     .c2s()
                     .answer(1, p::Ack{})
                     .answer(2, p::Ack{})
                     .answer(3, p::ContextMessagesReply{false, {}})
                     .answer(4, p::ContextOpened{2, "notes-b"})
                     .answer(4, p::Ack{})  // a second final answer: refused
                     .s2c());
  v.emplace_back("version_5_server_fork",
                 Seed(1, 8, p::kDefaultMaxPayload, 5)
                     .handshake()
                     .send(1, p::ContextFork{"notes", "b"})  // the client's state refuses it at version 5
                     .rogue(2, p::ContextFork{"notes", std::nullopt})  // sent anyway: a connection error
                     .both());
  v.emplace_back("version_7_level",
                 [] {
                   p::Call c = call(7, "small");
                   c.options.level_percent = 20;
                   p::CallResult r = result();
                   r.stats.level_percent = 20;
                   Seed s;
                   s.handshake().send(1, context_new("lv")).c2s().answer(1, p::ContextOpened{7, "lv"}).s2c();
                   s.send(2, c).c2s().answer(2, p::Piece{101, "Hi", {}, {}}).answer(2, r).s2c();
                   return s;
                 }());
  v.emplace_back("version_2_server",
                 Seed(1, 8, p::kDefaultMaxPayload, 2)
                     .handshake()
                     .send(1, p::ContextInfo{"mid"})
                     .c2s()
                     .answer(1, info("mid"))
                     .s2c());
  v.emplace_back("answers_refused",
                 Seed()
                     .handshake()
                     .answer(0, p::Welcome{})  // a second WELCOME
                     .send(1, call(4, "x"))
                     .c2s()
                     .answer(1, p::Ack{})           // does not answer a CALL
                     .answer(2, result())           // no request on stream 2
                     .answer(1, list_part(true, {}))
                     .answer(1, result())
                     .answer(1, result())           // a second final answer
                     .answer(1, p::Piece{1, "late", {}, {}})
                     .answer(1, error(Code::internal, "late"))
                     .s2c());
  v.emplace_back("in_flight_bound",
                 Seed(1, 1)
                     .handshake()
                     .send(1, p::ContextList{})
                     .send(2, p::Stats{})
                     .send(3, p::ContextInfo{"a"})
                     .c2s()
                     .answer(1, list_part(false, {"a"}))
                     .c2s()
                     .answer(2, stats())
                     .c2s()
                     .answer(3, error(Code::not_found, "no context a"))
                     .s2c());
  v.emplace_back("too_many_calls",
                 Seed(1)
                     .handshake()
                     .send(1, call(1, "one"))
                     .send(2, call(1, "two"))  // refused by the client: max_calls 1
                     .rogue(2, call(1, "two"))  // the server refuses it: QUOTA_EXCEEDED
                     .both()
                     .answer(1, result())
                     .s2c());
  v.emplace_back("stream_in_flight",
                 Seed().handshake().send(1, p::Stats{}).rogue(1, p::ContextList{}).both().answer(1, stats()).s2c());
  v.emplace_back("no_common_version", Seed().handshake(8, 9).send(1, p::Stats{}).both());
  v.emplace_back("before_handshake",
                 Seed()
                     .send(1, p::Stats{})  // refused by the client
                     .rogue(1, p::Stats{})
                     .send(0, p::Hello{})
                     .both());
  v.emplace_back("server_error_stream_0",
                 Seed()
                     .handshake()
                     .send(1, call(1, "x"))
                     .c2s()
                     .answer(1, p::Piece{1, "y", {}, {}})
                     .answer(0, error(Code::unavailable, "llmsvcd is stopping"))
                     .answer(1, result())
                     .send(2, p::Stats{})
                     .both());
  v.emplace_back("rogue_types",
                 Seed()
                     .handshake()
                     .rogue(1, result())                // a server type from the client
                     .both());
  v.emplace_back("big_frames",
                 Seed(2, 8, 128u << 10)
                     .handshake(p::kMinVersion, p::kMaxVersion, p::kMinMaxPayload)
                     .send(1, call(1, "go"))
                     .c2s()
                     .big_piece(1, 60000)  // fits the client's 64 KiB
                     .big_piece(1, 65536)  // does not: not sent
                     .answer(1, error(Code::internal, std::string(5000, 'e')))  // too long: ERROR(internal) instead
                     .s2c(4000)
                     .s2c()
                     .big_bad(p::MsgType::stats, 2, 100000)    // within the server's 128 KiB: a bad STATS
                     .big_bad(p::MsgType::stats, 3, 200000)    // past it: the client does not send it
                     .c2s(1000)
                     .c2s()
                     .s2c());
  v.emplace_back("server_ping_before_welcome",
                 Seed().send(0, p::Hello{}).server_rogue(0, p::Ping{1}).both());
  v.emplace_back("server_answers_nothing",
                 Seed().handshake().server_rogue(4, result()).s2c().send(1, p::Stats{}).both());
  v.emplace_back("server_lying_length",
                 [] {
                   Seed s;
                   s.handshake().send(1, call(1, "x")).c2s();
                   s.answer(1, p::Piece{1, "ok", {}, {}});
                   // A PIECE header claiming the client's whole limit, then a few bytes.
                   std::vector<uint8_t> h = {'L', 'L', 'M', 'S', 0xA0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0x10, 0, 1, 0};
                   s.server_raw(h).s2c(3).s2c();
                   return s;
                 }());
  v.emplace_back("client_sends_server_types",
                 Seed().handshake().send(1, error(Code::internal, "no")).send(2, p::Ack{}).send(3, p::Stats{}).both()
                     .answer(3, stats()).s2c());
  v.emplace_back("bad_flags",
                 Seed().handshake().raw_header(static_cast<uint16_t>(p::MsgType::ping), 0, 8, {0, 0, 0, 0, 0, 0, 0, 0},
                                               1).both());
  v.emplace_back("server_ping_small_reads",
                 [] {
                   Seed s;
                   s.handshake().answer(0, p::Ping{42}).answer(0, p::Ping{43});
                   for (int i = 0; i < 40; ++i) s.s2c(1);
                   for (int i = 0; i < 40; ++i) s.c2s(1);
                   return s;
                 }());
  return v;
}

bool write_seed(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out.flush());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  for (const auto& [name, seed] : sessions())
    if (!write_seed(dir + "/" + name + ".session", seed.data())) {
      std::fprintf(stderr, "cannot write %s/%s.session\n", dir.c_str(), name.c_str());
      return 1;
    }
  return 0;
}
