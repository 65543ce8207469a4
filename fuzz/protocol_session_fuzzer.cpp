// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for whole llmsvcd sessions (docs/PROTOCOL.md sections 2 and 6): sequences of
// frames on one simulated connection, both ends, where protocol_fuzzer takes single streams.
// The input (fuzz/protocol_session_input.h) is a list of actions: the client sends a message
// through its ConnectionState, or a tracked request with a raw payload, or rogue bytes (raw
// bytes, headers with lying lengths, messages its state would refuse); bytes in flight are read
// by the other end at the points the input chooses; the server answers (final answers, PIECEs,
// CONTEXT_LIST_REPLY parts, ERRORs, and answers its state machine must refuse), or sends rogue
// bytes or messages to the client. The server end
// does what runtime/service/server.cpp does with each frame (decode_frame, on_receive or
// on_bad_request, WELCOME, PONG, ERROR for a refusal or a bad payload, ERROR on stream 0 and
// close for a connection error, at most max_requests_in_flight requests taken); the client end
// what runtime/client/client_connection.cpp does (check_welcome, PONG, close on a violation).
//
// Checked after every step (abort on violation):
//   - each FrameReader holds exactly the bytes it took and did not hand out as frames (one
//     header, what arrived of the current frame, the complete frames queued: buffered_bytes()),
//     and no allocation while it reads is larger than twice what it holds (plus a little for
//     its queue): a header's claimed length is never allocated before the bytes arrive;
//   - each end's ConnectionState agrees with a model of the rules of PROTOCOL.md section 6
//     (phase, version, max_calls, the requests in flight and their types, every verdict: what
//     on_send / on_receive / on_bad_request accept and refuse, CANCEL ignored, CALL refused
//     with QUOTA_EXCEEDED, ends_request): each request gets exactly one final answer;
//   - the server has at most max_requests_in_flight requests and max_calls calls in flight;
//   - while neither end has sent anything rogue, the two ends agree: what the server has in
//     flight the client has too, with the same type; with nothing in flight on the wire both
//     have the same requests in flight, the same phase, and the server's final answers equal
//     the client's; the honest client never sees a bad frame or a violation;
//   - after an ERROR on stream 0 the server's state is closed and accepts nothing more;
//   - the server's own ERRORs always encode (else the client would never learn why).
// The allocation watch uses the sanitizer's malloc hooks (the fuzz preset builds with ASan).
// To see a reproducer's session: LLMSVC_FUZZ_TRACE=1 protocol_session_fuzzer FILE.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <span>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/allocator_interface.h>
#define LLMSVC_FUZZ_MALLOC_HOOKS 1
#endif
#endif

#include "fuzz/protocol_session_input.h"
#include "runtime/protocol/connection.h"
#include "runtime/protocol/engine_types.h"
#include "runtime/protocol/frame.h"
#include "runtime/protocol/handshake.h"
#include "runtime/protocol/messages.h"

namespace {

using namespace llmsvc;
namespace p = llmsvc::protocol;
using fuzz::In;

[[noreturn]] void violated(const char* what, int line) {
  std::fprintf(stderr, "protocol_session_fuzzer: invariant violated at line %d: %s\n", line, what);
  std::abort();
}
#define CHECK(c)                          \
  do {                                    \
    if (!(c)) violated(#c, __LINE__);     \
  } while (0)

// LLMSVC_FUZZ_TRACE=1 (running one input) prints what each end does.
bool g_trace = false;
#define TRACE(...)                                       \
  do {                                                   \
    if (g_trace) std::fprintf(stderr, __VA_ARGS__);      \
  } while (0)

const char* name(const p::Message& m) { return p::type_info(p::type_of(m)).name.data(); }

// ---------------------------------------------------------------- allocation watch

// The largest single allocation made by this thread while watching (a FrameReader's feed()).
thread_local bool t_watching = false;
thread_local size_t t_biggest = 0;

#ifdef LLMSVC_FUZZ_MALLOC_HOOKS
void on_malloc(const volatile void*, size_t size) {
  if (t_watching && size > t_biggest) t_biggest = size;
}
void on_free(const volatile void*) {}
#endif

// ---------------------------------------------------------------- the rules, as a model

bool is_request(p::MsgType t) {
  for (p::MsgType r : fuzz::kRequestTypes)
    if (r == t) return true;
  return false;
}

// PROTOCOL.md section 6.2: which answers each request takes.
bool answered_by(p::MsgType request, p::MsgType answer) {
  using T = p::MsgType;
  if (answer == T::error) return true;
  switch (request) {
    case T::context_new:
    case T::context_open:
    case T::context_fork: return answer == T::context_opened;
    case T::context_close:
    case T::context_delete:
    case T::context_append:
    case T::context_truncate: return answer == T::ack;
    case T::context_messages: return answer == T::context_messages_reply;
    case T::context_list: return answer == T::context_list_reply;
    case T::context_info: return answer == T::context_info_reply;
    case T::call: return answer == T::piece || answer == T::call_result;
    case T::stats: return answer == T::stats_reply;
    case T::model_info: return answer == T::model_info_reply;
    case T::count_tokens: return answer == T::count_tokens_reply;
    default: return false;
  }
}

bool final_answer(const p::Message& m) {
  if (const auto* l = std::get_if<p::ContextListReply>(&m)) return !l->more;
  return p::type_of(m) != p::MsgType::piece;
}

struct Verdict {
  bool ok = true;
  Code code = Code::invalid_argument;  // when refused
  bool ignore = false;                 // server: a CANCEL of no call in flight
  bool refuse = false;                 // server: a CALL beyond max_calls (QUOTA_EXCEEDED)
  bool ends = false;                   // client: the request's final answer
  p::MsgType request = p::MsgType::ping;
};

Verdict refused(Code code = Code::invalid_argument) {
  Verdict v;
  v.ok = false;
  v.code = code;
  return v;
}

// One end's view, kept apart from ConnectionState and compared with it after every step.
struct Model {
  p::Role self;
  p::Phase phase = p::Phase::handshake;
  bool hello_seen = false;
  uint16_t version = p::kMinVersion;
  uint32_t max_calls = 1;
  std::map<uint32_t, p::MsgType> streams;  // requests in flight

  explicit Model(p::Role r) : self(r) {}

  uint32_t calls() const {
    uint32_t n = 0;
    for (const auto& [s, t] : streams) n += t == p::MsgType::call;
    return n;
  }
  bool call_on(uint32_t stream) const {
    auto it = streams.find(stream);
    return it != streams.end() && it->second == p::MsgType::call;
  }

  // A type its version lacks is refused like a broken rule (PROTOCOL.md section 8).
  bool too_new(p::MsgType t) const { return p::type_info(t).since > version; }

  Verdict answer(uint32_t stream, const p::Message& m) {
    if (phase != p::Phase::ready || too_new(p::type_of(m))) return refused();
    auto it = streams.find(stream);
    if (it == streams.end() || !answered_by(it->second, p::type_of(m))) return refused();
    Verdict v;
    v.request = it->second;
    v.ends = final_answer(m);
    if (v.ends) streams.erase(it);
    return v;
  }
  Verdict request(uint32_t stream, p::MsgType t) {
    if (phase != p::Phase::ready || too_new(t) || stream == 0 || streams.count(stream)) return refused();
    streams.emplace(stream, t);
    Verdict v;
    v.request = t;
    return v;
  }
  void welcome(const p::Welcome& w) {
    phase = p::Phase::ready;
    version = w.version;
    max_calls = w.max_calls;
  }

  Verdict send(uint32_t stream, const p::Message& m) {
    using T = p::MsgType;
    const T t = p::type_of(m);
    if (phase == p::Phase::closed) return refused();
    if (t == T::ping || t == T::pong) return phase == p::Phase::ready ? Verdict{} : refused();
    if (self == p::Role::client) {
      if (t == T::hello) {
        if (hello_seen) return refused();
        hello_seen = true;
        return {};
      }
      if (t == T::cancel) return phase == p::Phase::ready ? Verdict{} : refused();
      if (!is_request(t)) return refused();
      if (t == T::call && phase == p::Phase::ready && calls() >= max_calls) return refused(Code::quota_exceeded);
      return request(stream, t);
    }
    if (t == T::welcome) {
      if (!hello_seen || phase != p::Phase::handshake) return refused();
      welcome(std::get<p::Welcome>(m));
      return {};
    }
    if (t == T::error && stream == 0) {
      phase = p::Phase::closed;
      return {};
    }
    return answer(stream, m);
  }

  Verdict receive(uint32_t stream, const p::Message& m) {
    using T = p::MsgType;
    const T t = p::type_of(m);
    if (phase == p::Phase::closed) return refused();
    if (self == p::Role::server) {
      if (phase == p::Phase::handshake) {
        if (t != T::hello || hello_seen) return refused();
        hello_seen = true;
        return {};
      }
      if (t == T::hello) return refused();
      if (t == T::ping || t == T::pong) return {};
      if (t == T::cancel) {
        Verdict v;
        v.ignore = !call_on(std::get<p::Cancel>(m).call);
        return v;
      }
      Verdict v = request(stream, t);
      if (v.ok && t == T::call && calls() > max_calls) v.refuse = true;
      return v;
    }
    if (t == T::welcome) {
      if (!hello_seen || phase != p::Phase::handshake) return refused();
      welcome(std::get<p::Welcome>(m));
      return {};
    }
    if (t == T::error && stream == 0) {
      phase = p::Phase::closed;
      return {};
    }
    if (t == T::ping || t == T::pong) return phase == p::Phase::ready ? Verdict{} : refused();
    return answer(stream, m);
  }

  Verdict bad_request(uint32_t stream, p::MsgType t) {
    if (self != p::Role::server || !is_request(t)) return refused();
    return request(stream, t);
  }
};

void check_agrees(const p::ConnectionState& s, const Model& m) {
  CHECK(s.phase() == m.phase);
  CHECK(s.version() == m.version);
  CHECK(s.max_calls() == m.max_calls);
  CHECK(s.in_flight() == m.streams.size());
  CHECK(s.calls_in_flight() == m.calls());
  for (const auto& [stream, type] : m.streams) {
    CHECK(s.in_flight(stream));
    CHECK(s.call_in_flight(stream) == (type == p::MsgType::call));
  }
}

void check_verdict(const Status& st, const Verdict& v) {
  CHECK(st.ok() == v.ok);
  if (!v.ok) CHECK(st.code() == v.code);
}

void check_received(const Result<p::Received>& r, const Verdict& v, p::Role self) {
  check_verdict(r.status(), v);
  if (!r.ok()) return;
  if (self == p::Role::server) {
    CHECK(r->ignore == v.ignore);
    CHECK(r->refuse.ok() == !v.refuse);
    if (v.refuse) CHECK(r->refuse.code() == Code::quota_exceeded);
  } else {
    CHECK(r->ends_request == v.ends);
    if (v.ok && v.request != p::MsgType::ping) CHECK(r->request == v.request);
  }
}

// The state after an ERROR on stream 0 accepts nothing (tried on a copy).
void check_closed(const p::ConnectionState& state) {
  CHECK(state.phase() == p::Phase::closed);
  p::ConnectionState s = state;
  CHECK(!s.on_receive(0, p::Ping{}).ok());
  CHECK(!s.on_receive(0, p::Hello{}).ok());
  CHECK(!s.on_receive(1, p::ContextList{}).ok());
  CHECK(!s.on_receive(1, p::Call{}).ok());
  CHECK(!s.on_bad_request(1, p::MsgType::call).ok());
  CHECK(!s.on_send(0, p::Pong{}).ok());
  CHECK(!s.on_send(0, p::Error{}).ok());
  CHECK(!s.on_send(1, p::Error{}).ok());
  CHECK(s.phase() == p::Phase::closed && s.in_flight() == state.in_flight());
}

// ---------------------------------------------------------------- a reader, accounted

struct Reader {
  p::FrameReader r;
  p::Role role;
  size_t fed = 0;     // bytes given to feed()
  size_t taken = 0;   // bytes of the frames next() handed out
  bool broken = false;  // a bad header: how much of its read was taken is unknown
  uint32_t widest;      // the largest limit it has had

  explicit Reader(p::Role role) : r(role), role(role), widest(r.max_payload()) {}

  void set_max_payload(uint32_t m) {
    r.set_max_payload(m);
    widest = std::max(widest, m);
  }

  void check_holds() const {
    const size_t held = fed - taken;
    if (broken) CHECK(r.buffered_bytes() <= held);
    else CHECK(r.buffered_bytes() == held);
    if (r.queued() == 0) CHECK(r.mid_frame() == (r.buffered_bytes() > 0));
  }

  void feed(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return;
    // An exact-size heap copy: ASan sees any read past it.
    std::vector<uint8_t> copy(bytes.begin(), bytes.end());
    const bool was_broken = !r.error().ok();
    t_biggest = 0;
    t_watching = true;
    const Status st = r.feed(copy);
    t_watching = false;
    // The payload grows as bytes arrive (doubling at most); the queue's blocks and the error's
    // text are small. A buffer sized by a header's claim would be far larger.
    CHECK(t_biggest <= 2 * r.buffered_bytes() + 1024);
    if (!was_broken) fed += bytes.size();  // a stopped reader takes nothing
    if (!st.ok()) {
      broken = true;
      CHECK(st.code() == Code::invalid_argument && st.message().rfind("frame: ", 0) == 0);
      CHECK(r.error().message() == st.message());
    }
    check_holds();
  }

  std::optional<p::Frame> next() {
    auto f = r.next();
    if (!f) return f;
    taken += p::kHeaderBytes + f->payload.size();
    const p::TypeInfo* info = p::find_type(static_cast<uint16_t>(f->type));
    CHECK(info != nullptr && p::receivable(*info, role));
    CHECK(p::check_stream(*info, f->stream).ok());
    CHECK(f->payload.size() <= widest);
    check_holds();
    return f;
  }
};

// ---------------------------------------------------------------- the session

struct Config {
  uint32_t max_calls = 1;
  size_t max_requests_in_flight = 1;
  uint32_t max_frame_payload = p::kDefaultMaxPayload;
  uint16_t max_version = p::kMaxVersion;
};

std::vector<uint8_t> header(uint16_t type, uint16_t flags, uint32_t stream, uint32_t length) {
  std::vector<uint8_t> h(p::kMagic, p::kMagic + 4);
  auto put = [&](uint32_t v, int n) {
    for (int i = 0; i < n; ++i) h.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(type, 2);
  put(flags, 2);
  put(stream, 4);
  put(length, 4);
  return h;
}

// One direction of the connection: the bytes already out of the sender's writer (rogue bytes
// among them), then what the writer holds.
struct Wire {
  p::FrameWriter writer;
  std::vector<uint8_t> out;

  explicit Wire(p::Role sender) : writer(sender) {}
  size_t size() const { return out.size() + writer.pending_bytes(); }
  // Bytes after what the writer holds.
  void put(const std::vector<uint8_t>& bytes) {
    auto pending = writer.pending();
    out.insert(out.end(), pending.begin(), pending.end());
    writer.consume(pending.size());
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  // The next n bytes (0: all), as the peer reads them.
  std::vector<uint8_t> take(size_t n) {
    n = n == 0 ? size() : std::min(n, size());
    const size_t from_out = std::min(n, out.size());
    std::vector<uint8_t> bytes(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(from_out));
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(from_out));
    if (n > from_out) {
      auto pending = writer.pending();
      const size_t before = pending.size();
      bytes.insert(bytes.end(), pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(n - from_out));
      writer.consume(n - from_out);
      CHECK(writer.pending_bytes() == before - (n - from_out));
    }
    return bytes;
  }
};

class Session {
 public:
  explicit Session(const Config& c) : cfg_(c) {}

  void run(In& in) {
    for (int steps = 0; steps < 4096 && !in.done(); ++steps) {
      step(in);
      check();
    }
    // Everything still on the wire arrives (a PONG may answer a PING meanwhile).
    for (int round = 0; round < 4; ++round) {
      deliver_c2s(0);
      check();
      deliver_s2c(0);
      check();
    }
  }

 private:
  void step(In& in) {
    switch (static_cast<fuzz::Op>(in.u8() % fuzz::kOps)) {
      case fuzz::Op::client_send: {
        const p::MsgType t = fuzz::kClientTypes[in.u8() % fuzz::kClientTypes.size()];
        const uint32_t stream = in.stream();
        client_send(stream, fuzz::fill_message(t, in));
        break;
      }
      case fuzz::Op::client_bad: {
        const p::MsgType t = fuzz::kRequestTypes[in.u8() % fuzz::kRequestTypes.size()];
        const uint32_t stream = in.stream();
        client_bad(t, stream, in.bytes());
        break;
      }
      case fuzz::Op::raw_bytes:
        rogue_c2s(in.bytes());
        break;
      case fuzz::Op::raw_header: {
        const uint16_t type = in.u16();
        const uint16_t flags = in.u8() == 0xFF ? in.u16() : 0;
        const uint32_t stream = in.stream();
        const uint32_t length = in.u32();
        auto bytes = header(type, flags, stream, length);
        auto tail = in.bytes();
        bytes.insert(bytes.end(), tail.begin(), tail.end());
        rogue_c2s(bytes);
        break;
      }
      case fuzz::Op::rogue_send: {
        const p::MsgType t = fuzz::type_at(in.u8() % fuzz::kAllTypes);
        const uint32_t stream = in.stream();
        rogue_c2s(rogue_frame(p::Role::client, stream, fuzz::fill_message(t, in), cs_.version()));
        break;
      }
      case fuzz::Op::server_raw:
        rogue_s2c(in.bytes());
        break;
      case fuzz::Op::server_rogue_send: {
        const p::MsgType t = fuzz::type_at(in.u8() % fuzz::kAllTypes);
        const uint32_t stream = in.stream();
        rogue_s2c(rogue_frame(p::Role::server, stream, fuzz::fill_message(t, in), ss_.version()));
        break;
      }
      case fuzz::Op::deliver_c2s:
        deliver_c2s(in.u16());
        break;
      case fuzz::Op::deliver_s2c:
        deliver_s2c(in.u16());
        break;
      case fuzz::Op::server_send: {
        const uint32_t stream = target(in);
        const p::MsgType t = fuzz::kServerTypes[in.u8() % fuzz::kServerTypes.size()];
        p::Message m = fuzz::fill_message(t, in);
        // The daemon sends the stream-0 types on stream 0 (the writer would refuse others).
        server_send(p::type_info(t).stream == p::StreamRule::zero ? 0 : stream, m);
        break;
      }
    }
  }

  uint32_t target(In& in) {
    const uint8_t t = in.u8();
    if (t == 0xFF) return in.u32();
    if (t == 0xFE) return 0;
    if (t & 0x80) return t & 0x7F;
    if (sm_.streams.empty()) return t;
    auto it = sm_.streams.begin();
    std::advance(it, t % sm_.streams.size());
    return it->first;
  }

  // ------------------------------------------------------------ the client

  // An honest client: what its state refuses, or its writer cannot encode, is neither sent nor
  // recorded (its state is tried on a copy first).
  void client_send(uint32_t stream, const p::Message& m) {
    if (client_lost_) return;
    if (p::type_info(p::type_of(m)).stream == p::StreamRule::zero) stream = 0;
    Model model = cm_;
    const Verdict v = model.send(stream, m);
    p::ConnectionState state = cs_;
    const Status st = state.on_send(stream, m);
    check_verdict(st, v);
    const bool written = st.ok() && c2s_.writer.write(stream, m).ok();
    TRACE("client sends %s on %u: %s\n", name(m), stream,
          !st.ok() ? st.message().c_str() : written ? "sent" : "cannot encode");
    if (!written) return;
    commit_client(std::move(state), std::move(model), m);
  }

  void commit_client(p::ConnectionState state, Model model, const p::Message& m) {
    const size_t before = cm_.streams.size();
    cs_ = std::move(state);
    cm_ = std::move(model);
    if (cm_.streams.size() > before) ++requests_sent_;
    if (const auto* h = std::get_if<p::Hello>(&m)) hello_ = *h;
  }

  // A request the client tracks, with a payload of any bytes (the server may find it malformed).
  void client_bad(p::MsgType type, uint32_t stream, const std::vector<uint8_t>& payload) {
    if (client_lost_ || payload.size() > cw_max_) return;
    const p::Message placeholder = fuzz::fill_message(type, empty_in_);
    Model model = cm_;
    const Verdict v = model.send(stream, placeholder);
    p::ConnectionState state = cs_;
    const Status st = state.on_send(stream, placeholder);
    check_verdict(st, v);
    TRACE("client sends %s on %u, a payload of %zu bytes: %s\n", name(placeholder), stream, payload.size(),
          st.ok() ? "sent" : st.message().c_str());
    if (!v.ok) return;
    auto bytes = header(static_cast<uint16_t>(type), 0, stream, static_cast<uint32_t>(payload.size()));
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    c2s_.put(bytes);
    commit_client(std::move(state), std::move(model), placeholder);
  }

  // Bytes past an end's state: from now on the ends may disagree.
  void rogue_c2s(const std::vector<uint8_t>& bytes) {
    if (bytes.empty()) return;
    TRACE("client sends %zu rogue bytes\n", bytes.size());
    tainted_ = true;
    c2s_.put(bytes);
  }
  void rogue_s2c(const std::vector<uint8_t>& bytes) {
    if (bytes.empty()) return;
    TRACE("server sends %zu rogue bytes\n", bytes.size());
    tainted_ = true;
    s2c_.put(bytes);
  }

  // `m` framed as `sender` would, whatever its state; by hand where the writer refuses the
  // type or the stream.
  static std::vector<uint8_t> rogue_frame(p::Role sender, uint32_t stream, const p::Message& m, uint16_t version) {
    std::vector<uint8_t> out;
    if (p::append_frame(out, sender, stream, m, p::kMaxMaxPayload, version).ok()) return out;
    std::vector<uint8_t> payload;
    (void)p::encode_payload(m, payload, version);
    out = header(static_cast<uint16_t>(p::type_of(m)), 0, stream, static_cast<uint32_t>(payload.size()));
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
  }

  void deliver_s2c(uint16_t n) {
    const std::vector<uint8_t> bytes = s2c_.take(n);
    if (bytes.empty()) return;
    TRACE("  %zu bytes to the client%s\n", bytes.size(), client_lost_ ? ", which has closed" : "");
    if (client_lost_) return;  // the client has closed: the bytes go nowhere
    cr_.feed(bytes);
    while (!client_lost_) {
      auto f = cr_.next();
      if (!f) break;
      client_frame(*f);
    }
    if (!client_lost_ && cr_.r.queued() == 0 && !cr_.r.error().ok()) {
      TRACE("  client: bad frame: %s\n", cr_.r.error().message().c_str());
      CHECK(tainted_);  // the server's writer never writes a bad header, nor a frame past the limit
      client_lost_ = true;
    }
  }

  void client_frame(const p::Frame& f) {
    auto m = p::decode_frame(f, cs_.version());
    if (!m.ok()) {
      TRACE("  client receives a bad %s on %u: %s\n", p::type_info(f.type).name.data(), f.stream,
            m.status().message().c_str());
      CHECK(tainted_);  // the server's writer lays out what the client reads
      client_lost_ = true;
      return;
    }
    const Verdict v = cm_.receive(f.stream, *m);
    auto r = cs_.on_receive(f.stream, *m);
    check_received(r, v, p::Role::client);
    TRACE("  client receives %s on %u: %s\n", name(*m), f.stream, r.ok() ? "ok" : r.status().message().c_str());
    if (!r.ok()) {
      CHECK(tainted_);  // an honest client never sees a violation
      client_lost_ = true;
      return;
    }
    if (r->ends_request) ++finals_received_;
    if (const auto* w = std::get_if<p::Welcome>(&*m)) {
      if (!p::check_welcome(hello_, *w).ok()) {
        CHECK(tainted_);
        client_lost_ = true;
        return;
      }
      cr_.set_max_payload(hello_.max_frame_payload);
      c2s_.writer.set_max_payload(w->max_frame_payload);
      cw_max_ = w->max_frame_payload;
      c2s_.writer.set_version(w->version);
      return;
    }
    if (f.stream == 0 && std::holds_alternative<p::Error>(*m)) {
      check_closed(cs_);
      client_lost_ = true;
      return;
    }
    if (const auto* ping = std::get_if<p::Ping>(&*m)) client_send(0, p::Pong{ping->nonce});
  }

  // ------------------------------------------------------------ the server

  void deliver_c2s(uint16_t n) {
    const std::vector<uint8_t> bytes = c2s_.take(n);
    if (bytes.empty()) {
      server_frames();  // frames held at the in-flight bound may go now
      return;
    }
    TRACE("  %zu bytes to the server\n", bytes.size());
    sr_.feed(bytes);
    server_frames();
  }

  void server_frames() {
    while (closing_ || ss_.in_flight() < cfg_.max_requests_in_flight) {
      auto f = sr_.next();
      if (!f) break;
      if (closing_) {
        closed_frame(*f);
      } else {
        server_frame(*f);
      }
    }
    if (!closing_ && sr_.r.queued() == 0 && !sr_.r.error().ok()) connection_error(sr_.r.error());
  }

  // After the connection error the daemon reads nothing more; whatever came would be refused.
  void closed_frame(const p::Frame& f) {
    auto m = p::decode_frame(f, ss_.version());
    if (m.ok()) {
      p::ConnectionState s = ss_;
      CHECK(!s.on_receive(f.stream, *m).ok());
    }
    p::ConnectionState s = ss_;
    CHECK(!s.on_bad_request(f.stream, f.type).ok());
  }

  void server_frame(const p::Frame& f) {
    auto m = p::decode_frame(f, ss_.version());
    if (!m.ok()) {
      TRACE("  server receives a bad %s on %u: %s\n", p::type_info(f.type).name.data(), f.stream,
            m.status().message().c_str());
      if (f.stream != 0 && ss_.phase() == p::Phase::ready) {
        const Verdict v = sm_.bad_request(f.stream, f.type);
        const Status tracked = ss_.on_bad_request(f.stream, f.type);
        check_verdict(tracked, v);
        if (!tracked.ok()) return connection_error(tracked);
        ++requests_admitted_;
        return send_error(f.stream, m.status());
      }
      return connection_error(m.status());
    }
    const Verdict v = sm_.receive(f.stream, *m);
    auto r = ss_.on_receive(f.stream, *m);
    check_received(r, v, p::Role::server);
    TRACE("  server receives %s on %u: %s\n", name(*m), f.stream, r.ok() ? "ok" : r.status().message().c_str());
    if (!r.ok()) return connection_error(r.status());
    if (const auto* hello = std::get_if<p::Hello>(&*m)) {
      auto version = p::negotiate(*hello, p::kMinVersion, cfg_.max_version);
      if (!version.ok()) return connection_error(version.status());
      p::Welcome w;
      w.version = *version;
      w.max_frame_payload = cfg_.max_frame_payload;
      w.max_prompt_bytes = 1u << 20;
      w.max_context_tokens = 4096;
      w.max_calls = cfg_.max_calls;
      w.server = "llmsvcd (fuzz)";
      w.model = "none";
      s2c_.writer.set_max_payload(hello->max_frame_payload);
      CHECK(server_send(0, w));
      CHECK(ss_.phase() == p::Phase::ready && ss_.version() == *version);
      s2c_.writer.set_version(ss_.version());
      sr_.set_max_payload(cfg_.max_frame_payload);
      return;
    }
    if (const auto* ping = std::get_if<p::Ping>(&*m)) {
      CHECK(server_send(0, p::Pong{ping->nonce}));
      return;
    }
    if (std::holds_alternative<p::Pong>(*m) || std::holds_alternative<p::Cancel>(*m)) return;
    ++requests_admitted_;
    if (!r->refuse.ok()) send_error(f.stream, r->refuse);
    // Else the request waits for the input's answers (server_send).
  }

  void connection_error(const Status& st) {
    if (closing_) return;
    TRACE("  server: connection error: %s\n", st.message().c_str());
    // Its own ERROR must go out, or the client never learns why the connection closed.
    CHECK(server_send(0, p::error_message(st)));
  }

  void send_error(uint32_t stream, const Status& st) {
    const bool sent = server_send(stream, p::error_message(st));
    CHECK(sent || closing_);
  }

  // What Server::send does: the state first, then the writer; a final answer that cannot be
  // encoded goes out as an ERROR. True if `m` itself was queued.
  bool server_send(uint32_t stream, const p::Message& m) {
    Model model = sm_;
    const Verdict v = model.send(stream, m);
    const Status st = ss_.on_send(stream, m);
    check_verdict(st, v);
    if (!st.ok()) TRACE("server sends %s on %u: %s\n", name(m), stream, st.message().c_str());
    if (!st.ok()) return false;
    sm_ = std::move(model);
    if (v.ends) ++finals_sent_;
    const Status written = s2c_.writer.write(stream, m);
    TRACE("server sends %s on %u: %s\n", name(m), stream, written.ok() ? "sent" : written.message().c_str());
    if (!written.ok() && stream != 0 && p::is_final_answer(m))
      CHECK(s2c_.writer.write(stream, p::error_message(Status(Code::internal, written.message()))).ok());
    if (ss_.phase() == p::Phase::closed && !closing_) {
      closing_ = true;
      hung_up_ = !written.ok();  // no ERROR went out: the client sees only the end of the stream
      check_closed(ss_);
    }
    return written.ok();
  }

  // ------------------------------------------------------------ the invariants

  bool quiet() const {
    return c2s_.size() == 0 && s2c_.size() == 0 && sr_.r.queued() == 0 &&
           !sr_.r.mid_frame() && cr_.r.queued() == 0 && !cr_.r.mid_frame();
  }

  void check() {
    check_agrees(cs_, cm_);
    check_agrees(ss_, sm_);
    CHECK(ss_.in_flight() <= cfg_.max_requests_in_flight);
    CHECK(ss_.calls_in_flight() <= ss_.max_calls());
    CHECK(cs_.calls_in_flight() <= cs_.max_calls());
    CHECK(requests_admitted_ == finals_sent_ + sm_.streams.size());
    CHECK(requests_sent_ == finals_received_ + cm_.streams.size());
    sr_.check_holds();
    cr_.check_holds();
    if (tainted_ || client_lost_ || hung_up_) return;
    // What the server has in flight the client sent and has had no final answer to.
    for (const auto& [stream, type] : sm_.streams) {
      auto it = cm_.streams.find(stream);
      CHECK(it != cm_.streams.end() && it->second == type);
    }
    if (!quiet()) return;
    CHECK(!closing_);  // its ERROR on stream 0 has arrived: the client would be lost
    CHECK(ss_.phase() == cs_.phase());
    CHECK(ss_.version() == cs_.version());
    CHECK(sm_.streams == cm_.streams);
    CHECK(requests_admitted_ == requests_sent_);
    CHECK(finals_sent_ == finals_received_);
  }

  Config cfg_;
  p::ConnectionState cs_{p::Role::client}, ss_{p::Role::server};
  Model cm_{p::Role::client}, sm_{p::Role::server};
  Wire c2s_{p::Role::client}, s2c_{p::Role::server};
  uint32_t cw_max_ = p::kHandshakeMaxPayload;  // the client writer's limit
  Reader sr_{p::Role::server}, cr_{p::Role::client};
  p::Hello hello_;            // the HELLO the client sent
  bool tainted_ = false;      // an end sent something past its state
  bool client_lost_ = false;  // the client closed (a violation, a bad frame, ERROR on stream 0)
  bool closing_ = false;      // the server sent ERROR on stream 0
  bool hung_up_ = false;      // ... or tried to, with fields its writer refused (the input's)
  size_t requests_sent_ = 0, finals_received_ = 0;     // by the client
  size_t requests_admitted_ = 0, finals_sent_ = 0;     // by the server
  In empty_in_{{}};
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_trace = std::getenv("LLMSVC_FUZZ_TRACE") != nullptr;
#ifdef LLMSVC_FUZZ_MALLOC_HOOKS
  CHECK(__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0);
#endif
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  In in({data, size});
  Config c;
  c.max_calls = 1 + in.u8() % 8;
  c.max_requests_in_flight = 1 + in.u8() % 8;
  c.max_frame_payload = p::kMinMaxPayload + in.u32() % (p::kMaxMaxPayload - p::kMinMaxPayload + 1);
  c.max_version = static_cast<uint16_t>(std::min<int>(p::kMaxVersion, p::kMinVersion + in.u8() % p::kMaxVersion));
  Session s(c);
  s.run(in);
  return 0;
}
