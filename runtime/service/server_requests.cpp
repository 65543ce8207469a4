// SPDX-License-Identifier: Apache-2.0
// Server, request dispatch: a decoded frame to the handshake, a context operation on the
// ops pool, or a call on the call workers; handles and calls begun and ended.
#include "runtime/service/server.h"

#include "runtime/protocol/engine_types.h"
#include "runtime/protocol/handshake.h"
#include "runtime/service/log.h"

namespace llmsvc::service {
namespace {

namespace p = protocol;

// Splits `text` (valid UTF-8) into parts of at most kPieceSplitBytes, at code point starts.
std::vector<std::string_view> split_piece(std::string_view text) {
  std::vector<std::string_view> parts;
  while (text.size() > kPieceSplitBytes) {
    size_t cut = kPieceSplitBytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    parts.push_back(text.substr(0, cut));
    text.remove_prefix(cut);
  }
  parts.push_back(text);
  return parts;
}

// A token piece as PIECE frames: its text in parts of at most kPieceSplitBytes, its ids in
// parts of at most kMaxPieceIds, the extra id parts first without text (the client joins them
// to the next piece), the last part of both in the last frame.
std::vector<p::Piece> piece_frames(const TokenPiece& piece) {
  std::vector<p::Piece> frames;
  const std::vector<std::string_view> parts = split_piece(piece.text);
  for (size_t k = 0; k + 1 < parts.size(); ++k) frames.push_back(p::Piece{piece.token, std::string(parts[k]), {}, {}});
  size_t from = 0;
  do {
    const size_t n = std::min(piece.ids.size() - from, p::kMaxPieceIds);
    const bool last = from + n == piece.ids.size();
    p::Piece f{piece.token, last ? std::string(parts.back()) : std::string(), {}, {}};
    f.ids.assign(piece.ids.begin() + static_cast<std::ptrdiff_t>(from), piece.ids.begin() + static_cast<std::ptrdiff_t>(from + n));
    if (!piece.logprobs.empty())
      f.logprobs.assign(piece.logprobs.begin() + static_cast<std::ptrdiff_t>(from),
                        piece.logprobs.begin() + static_cast<std::ptrdiff_t>(from + n));
    frames.push_back(std::move(f));
    from += n;
  } while (from < piece.ids.size());
  return frames;
}

}  // namespace

void Server::handle_frame(const SessionPtr& s, const p::Frame& frame) {
  auto m = p::decode_frame(frame, s->state.version());
  if (!m.ok()) {
    if (frame.stream != 0 && s->state.phase() == p::Phase::ready) {
      Status tracked = s->state.on_bad_request(frame.stream, frame.type);
      if (!tracked.ok()) return connection_error(s, tracked);
      return send_error(s, frame.stream, m.status());
    }
    return connection_error(s, m.status());
  }
  auto r = s->state.on_receive(frame.stream, *m);
  if (!r.ok()) return connection_error(s, r.status());
  if (const auto* hello = std::get_if<p::Hello>(&*m)) {
    auto version = p::negotiate(*hello);
    if (!version.ok()) return connection_error(s, version.status());
    p::Welcome w;
    w.version = *version;
    w.max_frame_payload = opt_.max_frame_payload;
    w.max_prompt_bytes = opt_.max_prompt_bytes;
    w.max_context_tokens = static_cast<uint32_t>(apps_.engine().n_ctx());
    w.max_calls = opt_.max_calls;
    w.idle_timeout_ms = opt_.idle_timeout_ms;
    w.server = opt_.server_name;
    w.model = opt_.model_name.substr(0, p::kMaxNameBytes);
    {
      std::lock_guard wlock(s->wmu);
      s->writer.set_max_payload(hello->max_frame_payload);
    }
    s->peer_max_payload = hello->max_frame_payload;
    send(s, 0, w);
    {
      std::lock_guard wlock(s->wmu);
      s->writer.set_version(s->state.version());  // what follows is laid out as the agreed version
    }
    s->reader.set_max_payload(opt_.max_frame_payload);
    return;
  }
  if (const auto* ping = std::get_if<p::Ping>(&*m)) return send(s, 0, p::Pong{ping->nonce});
  if (std::holds_alternative<p::Pong>(*m)) return;
  if (const auto* cancel = std::get_if<p::Cancel>(&*m)) {
    if (r->ignore) return;
    if (auto it = s->cancel_flags.find(cancel->call); it != s->cancel_flags.end()) it->second->store(true);
    return;
  }
  if (!r->refuse.ok()) return send_error(s, frame.stream, r->refuse);
  if (stopping_) return send_error(s, frame.stream, Status(Code::unavailable, "llmsvcd is stopping"));
  handle_request(s, frame.stream, *m);
}

void Server::handle_request(const SessionPtr& s, uint32_t stream, const p::Message& m) {
  const AppIdentity app = s->app;
  if (const auto* req = std::get_if<p::ContextClose>(&m)) return close_handle(s, stream, req->handle);
  if (const auto* req = std::get_if<p::Call>(&m)) return start_call(s, stream, *req);
  // The rest are context operations, run on the ops pool; each holds one of the connection's
  // max_ops_in_flight places until its answer is taken (take_outbox).
  auto answer = [this, s, stream](p::Message msg, bool assign = false) {
    post(s, Outgoing{stream, std::move(msg), assign, false, true, nullptr});
  };
  auto fail = [this, s, stream](const Status& st) {
    post(s, Outgoing{stream, p::error_message(st), false, false, true, nullptr});
  };
  const bool opens = std::holds_alternative<p::ContextNew>(m) || std::holds_alternative<p::ContextOpen>(m) ||
                     std::holds_alternative<p::ContextFork>(m);
  if (opens && s->handles.size() + s->ops_in_flight >= opt_.max_handles)
    return send_error(s, stream, Status(Code::quota_exceeded, "this connection has " + std::to_string(s->handles.size()) +
                                                                  " contexts open, its limit; close one first"));
  if (const auto* req = std::get_if<p::ContextNew>(&m)) {
    if (req->system_prompt && req->system_prompt->size() > opt_.max_prompt_bytes)
      return send_error(s, stream, Status(Code::invalid_argument, "system prompt longer than the daemon's " +
                                                                      std::to_string(opt_.max_prompt_bytes) + " bytes"));
    ContextOptions o;
    o.id = req->id.value_or("");
    o.system_prompt = req->system_prompt.value_or("");
    o.raw = req->raw;
    o.tools = req->tools;
    o.adapter = req->adapter;
    ++s->ops_in_flight;
    ops_->post([this, app, o, answer, fail] {
      auto id = apps_.create(app, o);
      if (!id.ok()) return fail(id.status());
      answer(p::ContextOpened{0, *id}, true);
    }, app.scope());
    return;
  }
  if (const auto* req = std::get_if<p::ContextFork>(&m)) {
    ++s->ops_in_flight;
    ops_->post([this, app, parent = req->parent, id = req->id.value_or(""), answer, fail] {
      auto made = apps_.fork(app, parent, id);
      if (!made.ok()) return fail(made.status());
      answer(p::ContextOpened{0, *made}, true);
    }, app.scope());
    return;
  }
  if (const auto* req = std::get_if<p::ContextOpen>(&m)) {
    ++s->ops_in_flight;
    ops_->post([this, app, id = req->id, answer, fail] {
      if (Status st = apps_.open(app, id); !st.ok()) return fail(st);
      answer(p::ContextOpened{0, id}, true);
    }, app.scope());
    return;
  }
  if (const auto* req = std::get_if<p::ContextDelete>(&m)) {
    ++s->ops_in_flight;
    ops_->post([this, app, id = req->id, answer, fail] {
      if (Status st = apps_.remove(app, id); !st.ok()) return fail(st);
      answer(p::Ack{});
    }, app.scope());
    return;
  }
  if (std::holds_alternative<p::ContextList>(m)) {
    ++s->ops_in_flight;
    ops_->post([this, s, stream, app, fail] {
      auto ids = apps_.list(app);
      if (!ids.ok()) return fail(ids.status());
      // Encoded by the loop, part by part, as the client reads (produce_lists).
      post(s, Outgoing{stream, p::ContextListReply{}, false, false, true,
                       std::make_shared<std::vector<std::string>>(std::move(ids).value())});
    }, app.scope());
    return;
  }
  if (const auto* req = std::get_if<p::ContextInfo>(&m)) {
    ++s->ops_in_flight;
    ops_->post([this, app, id = req->id, answer, fail] {
      auto info = apps_.info(app, id);
      if (!info.ok()) return fail(info.status());
      answer(p::to_wire(*info));
    }, app.scope());
    return;
  }
  if (std::holds_alternative<p::ModelInfoRequest>(m)) {
    // Immutable once the engine exists, and cheap: answered by the loop.
    return send(s, stream, p::ModelInfoReply{apps_.engine().model_info()});
  }
  if (const auto* req = std::get_if<p::CountTokens>(&m)) {
    // A text longer than a prompt may be is not counted: the work and the ids it makes stay
    // within what a CALL may cost (docs/memory-bound.md).
    size_t bytes = req->text.size() + req->params.system_prompt.size();
    for (const ChatMessage& msg : req->params.messages) bytes += msg.content.size();
    if (bytes > opt_.max_prompt_bytes)
      return send_error(s, stream, Status(Code::context_overflow, "text of " + std::to_string(bytes) +
                                                                      " bytes is longer than a prompt may be (at most " +
                                                                      std::to_string(opt_.max_prompt_bytes) + " bytes)"));
    ++s->ops_in_flight;
    ops_->post([this, req = *req, answer, fail] {
      std::vector<int32_t> ids;
      if (req.params.messages.empty()) {
        ids = apps_.engine().prompt_ids(req.text, req.params);
      } else {
        auto counted = apps_.engine().message_ids(req.params);
        if (!counted.ok()) return fail(counted.status());
        ids = std::move(counted).value();
      }
      p::CountTokensReply r;
      r.count = static_cast<int32_t>(ids.size());
      const size_t from = std::min<size_t>(req.ids_offset, ids.size());
      const size_t n = std::min<size_t>(req.max_ids, ids.size() - from);
      r.ids.assign(ids.begin() + static_cast<std::ptrdiff_t>(from), ids.begin() + static_cast<std::ptrdiff_t>(from + n));
      answer(std::move(r));
    }, app.scope());
    return;
  }
  if (const auto* req = std::get_if<p::ContextAppend>(&m)) {
    // No more text at once than a prompt may bring (docs/memory-bound.md).
    size_t bytes = 0;
    for (const ChatMessage& msg : req->messages) bytes += msg.content.size() + msg.tool_calls.size();
    if (bytes > opt_.max_prompt_bytes)
      return send_error(s, stream, Status(Code::context_overflow, "messages of " + std::to_string(bytes) +
                                                                      " bytes are more than the daemon takes at once (" +
                                                                      std::to_string(opt_.max_prompt_bytes) + " bytes)"));
    ++s->ops_in_flight;
    ops_->post([this, app, req = *req, answer, fail] {
      if (Status st = apps_.append_messages(app, req.id, req.messages); !st.ok()) return fail(st);
      answer(p::Ack{});
    }, app.scope());
    return;
  }
  if (const auto* req = std::get_if<p::ContextTruncate>(&m)) {
    ++s->ops_in_flight;
    ops_->post([this, app, req = *req, answer, fail] {
      if (Status st = apps_.truncate_messages(app, req.id, req.n_messages); !st.ok()) return fail(st);
      answer(p::Ack{});
    }, app.scope());
    return;
  }
  if (const auto* req = std::get_if<p::ContextMessages>(&m)) {
    // Within the client's frame limit and a prompt's size: what an operation's answer may hold
    // (docs/memory-bound.md).
    const uint32_t room = std::min<uint32_t>(s->peer_max_payload, opt_.max_prompt_bytes);
    ++s->ops_in_flight;
    ops_->post([this, app, req = *req, room, answer, fail] {
      // One more than asked tells whether the conversation goes on.
      auto got = apps_.messages(app, req.id, req.first, size_t{req.max} + 1);
      if (!got.ok()) return fail(got.status());
      p::ContextMessagesReply r;
      r.more = got->size() > req.max;
      // As many as fit the client's frame limit: each takes its text and a few bytes of framing.
      size_t bytes = 64;
      for (size_t i = 0; i < std::min<size_t>(got->size(), req.max); ++i) {
        bytes += (*got)[i].content.size() + (*got)[i].tool_calls.size() + 20;
        if (bytes > room) {
          if (i == 0)
            return fail(Status(Code::unsupported, "message " + std::to_string(req.first) + " (" +
                                                      std::to_string((*got)[i].content.size() + (*got)[i].tool_calls.size()) +
                                                      " bytes) is larger than an answer may be (" +
                                                      std::to_string(room) + " bytes)"));
          r.more = true;
          break;
        }
        r.messages.push_back(std::move((*got)[i]));
      }
      answer(std::move(r));
    }, app.scope());
    return;
  }
  if (std::holds_alternative<p::Stats>(m)) {
    const int32_t open = static_cast<int32_t>(s->handles.size());
    ++s->ops_in_flight;
    ops_->post([this, app, open, answer, fail] {
      auto st = apps_.stats(app);
      if (!st.ok()) return fail(st.status());
      answer(p::to_wire(*st, open));
    }, app.scope());
    return;
  }
  send_error(s, stream, Status(Code::internal, "unhandled request"));
}

void Server::release_handle(const AppIdentity& app, const std::string& id) {
  // A closed context stays known to the engine, its chunks under the memory policy like any
  // other's: an app that restarts or reconnects switches back in without reading storage.
  // The contexts quota and the KV budget bound what closed contexts hold.
  (void)apps_.close(app, id);
}

void Server::close_handle(const SessionPtr& s, uint32_t stream, uint32_t handle) {
  auto it = s->handles.find(handle);
  if (it == s->handles.end())
    return send_error(s, stream, Status(Code::invalid_argument, "no context handle " + std::to_string(handle)));
  if (it->second.call != 0) {
    // Its call is cancelled; the ACK follows the call's RESULT (call_finished).
    if (auto f = s->cancel_flags.find(it->second.call); f != s->cancel_flags.end()) f->second->store(true);
    it->second.close_streams.push_back(stream);
    return;
  }
  release_handle(s->app, it->second.id);
  s->handles.erase(it);
  send(s, stream, p::Ack{});
}

void Server::start_call(const SessionPtr& s, uint32_t stream, const p::Call& call) {
  auto it = s->handles.find(call.handle);
  if (it == s->handles.end())
    return send_error(s, stream, Status(Code::invalid_argument, "no context handle " + std::to_string(call.handle)));
  if (it->second.call != 0 || !it->second.close_streams.empty())
    return send_error(s, stream, Status(Code::busy, "context '" + it->second.id + "' is inside another call"));
  if (call.prompt.size() > opt_.max_prompt_bytes)
    return send_error(s, stream, Status(Code::context_overflow, "prompt of " + std::to_string(call.prompt.size()) +
                                                                    " bytes is longer than any context holds (at most " +
                                                                    std::to_string(opt_.max_prompt_bytes) + " bytes)"));
  CallParams params = p::from_wire(call.options);
  if (Status checked = check_call_params(params); !checked.ok()) return send_error(s, stream, checked);
  {
    std::lock_guard lock(app_calls_mu_);
    uint32_t& n = app_calls_[s->app.uid];
    if (const uint32_t quota = opt_.quotas.of(s->app.uid).concurrent_calls; quota > 0 && n >= quota)
      return send_error(s, stream, Status(Code::quota_exceeded, "this app has " + std::to_string(n) +
                                                                    " calls in flight, its quota; wait for one to end"));
    ++n;
  }
  auto flag = std::make_shared<std::atomic<bool>>(false);
  it->second.call = stream;
  s->call_handle[stream] = call.handle;
  s->cancel_flags[stream] = flag;
  ++calls_running_;
  const bool token_ids = call.options.token_ids;
  auto task = [this, s, stream, flag, token_ids, app = s->app, id = it->second.id, prompt = call.prompt,
               params = std::move(params)]() mutable {
    params.cancel = flag.get();
    PieceFn on_piece = [&](std::string_view text, int32_t token) {
      for (std::string_view part : split_piece(text)) {
        if (!send_piece(s, stream, p::Piece{token, std::string(part), {}, {}})) return false;
      }
      return wait_for_room(s);
    };
    // Asked for token ids (version 4): every piece goes this way, ids and all, instead.
    if (token_ids) {
      params.on_tokens = [&](const TokenPiece& piece) {
        for (p::Piece& frame : piece_frames(piece))
          if (!send_piece(s, stream, std::move(frame))) return false;
        return wait_for_room(s);
      };
      on_piece = nullptr;
    }
    CallStats stats;
    Status st = apps_.call(app, id, prompt, params, on_piece, &stats);
    {
      // Out of the app's count before its answer goes: the app may send its next call the
      // moment it has this one's answer.
      std::lock_guard lock(app_calls_mu_);
      if (--app_calls_[app.uid] == 0) app_calls_.erase(app.uid);
    }
    // Before the answer, whose kick wakes the loop to see it. A loop that stops meanwhile
    // still sends the answer: it joins the workers, then takes the outboxes.
    --calls_running_;
    bool delivered = false;
    if (st.ok() || st.code() == Code::cancelled) {
      delivered = send_result(s, stream, p::to_wire(st, stats));
    } else {
      // The daemon's own failures are logged; an app's mistakes (bad input, quotas, busy
      // contexts) are its to see, and would let it fill the log.
      const Code c = st.code();
      if (c == Code::internal || c == Code::io || c == Code::out_of_memory)
        log_event(LogLevel::error, "call of " + app.label() + " failed: " + st.message(), {&app, id, stream});
      delivered = send_result(s, stream, p::error_message(st));
    }
    if (!delivered) {  // no kick: wake the loop for calls_running_ anyway
      uint64_t one = 1;
      ssize_t w = ::write(evfd_, &one, sizeof(one));
      (void)w;
    }
  };
  started_.push_back({std::move(task), s->app.scope()});  // lead() runs or queues it
}

void Server::call_finished(const SessionPtr& s, uint32_t stream) {
  s->cancel_flags.erase(stream);
  auto ch = s->call_handle.find(stream);
  if (ch == s->call_handle.end()) return;
  const uint32_t handle = ch->second;
  s->call_handle.erase(ch);
  auto it = s->handles.find(handle);
  if (it == s->handles.end()) return;
  it->second.call = 0;
  if (it->second.close_streams.empty()) return;
  const std::vector<uint32_t> closes = std::move(it->second.close_streams);
  release_handle(s->app, it->second.id);
  s->handles.erase(it);
  for (uint32_t c : closes) send(s, c, p::Ack{});
}

// ------------------------------------------------------------------ sending

}  // namespace llmsvc::service
