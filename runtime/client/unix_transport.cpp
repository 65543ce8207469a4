// SPDX-License-Identifier: Apache-2.0
// UnixTransport: the C API's operations as protocol requests, with reconnection.
#include "runtime/client/unix_transport.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "runtime/client/client_connection.h"
#include "runtime/client/piece_joiner.h"
#include "runtime/protocol/engine_types.h"

namespace llmsvc::client {
namespace {

namespace p = protocol;

constexpr int kCancelPollMs = 50;  // a call checks its cancel flag this often while waiting

// What a daemon older than protocol version `v` cannot do: refused here, before anything is
// sent (it would take a newer message as a protocol violation and close the connection).
Status need_version(const ClientConnection& conn, uint16_t v, const char* what) {
  if (conn.welcome().version >= v) return Status::Ok();
  return Status(Code::unsupported, std::string(what) + " needs protocol version " + std::to_string(v) +
                                       "; llmsvcd speaks " + std::to_string(conn.welcome().version) + " (update llmsvcd)");
}
Status need_version_4(const ClientConnection& conn, const char* what) {
  return need_version(conn, p::kVersionModelInfo, what);
}

template <class M>
Result<M> single(Result<std::vector<p::Message>> answers) {
  if (!answers.ok()) return answers.status();
  if (answers->size() != 1 || !std::holds_alternative<M>(answers->back()))
    return Status(Code::unavailable, "llmsvcd answered with an unexpected message");
  return std::get<M>(std::move(answers->back()));
}

class UnixTransport final : public Transport {
 public:
  UnixTransport(std::string path, std::shared_ptr<ClientConnection> conn)
      : path_(std::move(path)), conn_(std::move(conn)) {}

  Result<std::string> create_context(const ContextOptions& options) override {
    std::lock_guard lock(mu_);
    auto conn = connection_locked();
    if (!conn.ok()) return conn.status();
    p::ContextNew req;
    if (!options.id.empty()) req.id = options.id;
    if (!options.system_prompt.empty()) req.system_prompt = options.system_prompt;
    req.raw = options.raw;
    if (!options.tools.empty()) {
      LLMSVC_RETURN_IF_ERROR(need_version(**conn, p::kVersionFork, "tools"));
      if (options.tools.size() > p::kMaxToolsBytes)
        return Status(Code::invalid_argument, "tools: more than the daemon's " + std::to_string(p::kMaxToolsBytes) +
                                                  " bytes");
      req.tools = options.tools;
    }
    if (!options.adapter.empty()) {
      LLMSVC_RETURN_IF_ERROR(need_version(**conn, p::kVersionAdapters, "a LoRA adapter"));
      req.adapter = options.adapter;
    }
    auto opened = single<p::ContextOpened>((*conn)->round_trip(req));
    if (!opened.ok()) return opened.status();
    open_[opened->id].handle = opened->handle;
    return opened->id;
  }

  Result<std::string> fork_context(std::string_view parent, std::string_view id) override {
    std::lock_guard lock(mu_);
    auto conn = connection_locked();
    if (!conn.ok()) return conn.status();
    LLMSVC_RETURN_IF_ERROR(need_version(**conn, p::kVersionFork, "forking a context"));
    p::ContextFork req;
    req.parent = std::string(parent);
    if (!id.empty()) req.id = std::string(id);
    auto opened = single<p::ContextOpened>((*conn)->round_trip(req));
    if (!opened.ok()) return opened.status();
    open_[opened->id].handle = opened->handle;
    return opened->id;
  }

  Status open_context(std::string_view id) override {
    std::lock_guard lock(mu_);
    auto conn = connection_locked();
    if (!conn.ok()) return conn.status();
    auto it = open_.find(id);
    if (it != open_.end() && it->second.handle != 0) return Status::Ok();
    auto opened = single<p::ContextOpened>((*conn)->round_trip(p::ContextOpen{std::string(id)}));
    if (!opened.ok()) return opened.status();
    open_[std::string(id)].handle = opened->handle;
    return Status::Ok();
  }

  // Called once, when the app closes its last handle on `id` (api::Service counts them): one
  // daemon handle per id, whatever the number of app handles.
  void close_context(std::string_view id) override {
    std::lock_guard lock(mu_);
    auto it = open_.find(id);
    if (it == open_.end()) return;
    const uint32_t handle = it->second.handle;
    open_.erase(it);
    if (handle != 0 && conn_ && conn_->alive()) (void)conn_->round_trip(p::ContextClose{handle});
  }

  Status delete_context(std::string_view id) override {
    std::lock_guard lock(mu_);
    auto conn = connection_locked();
    if (!conn.ok()) return conn.status();
    return single<p::Ack>((*conn)->round_trip(p::ContextDelete{std::string(id)})).status();
  }

  Status call(std::string_view id, std::string_view prompt, const CallParams& params, const PieceFn& on_piece,
              CallStats* stats) override {
    std::shared_ptr<ClientConnection> conn;
    uint32_t handle = 0;
    {
      std::lock_guard lock(mu_);
      auto c = connection_locked();
      if (!c.ok()) return c.status();
      conn = *c;
      auto it = open_.find(id);
      if (it == open_.end()) return Status(Code::invalid_argument, "context '" + std::string(id) + "' is not open");
      if (it->second.handle == 0) {  // its reopen after a reconnect failed: try again, for its error
        auto opened = single<p::ContextOpened>(conn->round_trip(p::ContextOpen{std::string(id)}));
        if (!opened.ok()) return opened.status();
        it->second.handle = opened->handle;
      }
      handle = it->second.handle;
    }
    // Longer than the daemon takes is longer than any of its contexts holds (a token is a few
    // bytes): CONTEXT_OVERFLOW, as embedded, without sending it.
    if (prompt.size() > conn->welcome().max_prompt_bytes)
      return Status(Code::context_overflow, "prompt of " + std::to_string(prompt.size()) +
                                                " bytes is longer than any context holds (the daemon takes at most " +
                                                std::to_string(conn->welcome().max_prompt_bytes) + " bytes)");
    if (params.on_tokens) LLMSVC_RETURN_IF_ERROR(need_version_4(*conn, "streaming token ids"));
    if (params.reply_only) LLMSVC_RETURN_IF_ERROR(need_version(*conn, p::kVersionMessages, "generating a reply"));
    if (!params.json_schema.empty() || !params.grammar.empty())
      LLMSVC_RETURN_IF_ERROR(need_version(*conn, p::kVersionMessages, "structured output"));
    // An older daemon would not hear the level and run the call at whatever level it runs.
    if (params.level_percent != 0) LLMSVC_RETURN_IF_ERROR(need_version(*conn, p::kVersionLevels, "an elastic level"));
    if (!params.adapter.empty()) LLMSVC_RETURN_IF_ERROR(need_version(*conn, p::kVersionAdapters, "a LoRA adapter"));
    if (params.prompt_keep != 0) LLMSVC_RETURN_IF_ERROR(need_version(*conn, p::kVersionPromptKeep, "prompt compression"));
    p::Call req;
    req.handle = handle;
    req.prompt = std::string(prompt);
    req.options = p::to_wire(params);
    auto started = conn->start(req);
    if (!started.ok()) return started.status();
    ClientConnection::Request& r = **started;
    {
      std::lock_guard lock(mu_);
      calls_[std::string(id)] = {conn, r.stream};
    }
    struct Unregister {
      UnixTransport* t;
      std::string id;
      ~Unregister() {
        std::lock_guard lock(t->mu_);
        t->calls_.erase(id);
      }
    } unregister{this, std::string(id)};
    bool cancel_sent = false;
    PieceJoiner joiner(params.on_tokens);
    auto cancel = [&] {
      if (!cancel_sent) conn->cancel(r.stream);
      cancel_sent = true;
    };
    for (;;) {
      if (params.cancel && params.cancel->load(std::memory_order_relaxed)) cancel();
      auto m = conn->next(r, kCancelPollMs);
      if (!m.ok()) return m.status();
      if (!m->has_value()) continue;
      p::Message& msg = **m;
      if (auto* piece = std::get_if<p::Piece>(&msg)) {
        // Once the call is cancelled (the callback said stop, or the handle's flag) the
        // callback hears nothing more, as embedded; pieces the daemon made before the CANCEL
        // reached it are dropped (their tokens stay in the context; the result counts them).
        if (cancel_sent) continue;
        bool go = piece->text.empty() || !on_piece || on_piece(piece->text, piece->token);
        if (go && params.on_tokens) go = joiner.add(*piece);
        if (!go) cancel();
        continue;
      }
      if (auto* e = std::get_if<p::Error>(&msg)) return e->to_status();
      if (auto* res = std::get_if<p::CallResult>(&msg)) {
        if (stats) p::from_wire(*res, stats);
        // The ids whose text never streamed: the call's last piece, as embedded.
        if (params.on_tokens && !cancel_sent && !joiner.finish() && res->to_status().ok()) {
          if (stats) stats->finish = FinishReason::cancelled;
          return Status(Code::cancelled, "call cancelled");
        }
        return res->to_status();
      }
      return Status(Code::unavailable, "llmsvcd answered a call with an unexpected message");
    }
  }

  void cancel(std::string_view id) override {
    std::shared_ptr<ClientConnection> conn;
    uint32_t stream = 0;
    {
      std::lock_guard lock(mu_);
      auto it = calls_.find(id);
      if (it == calls_.end()) return;  // not in a call (or not yet sent: the call checks the flag)
      conn = it->second.conn;
      stream = it->second.stream;
    }
    conn->cancel(stream);
  }

  Result<EngineStats> stats() override {
    auto conn = connection();
    if (!conn.ok()) return conn.status();
    auto r = single<p::StatsReply>((*conn)->round_trip(p::Stats{}));
    if (!r.ok()) return r.status();
    return p::from_wire(*r);
  }

  Result<std::vector<std::string>> list_contexts() override {
    auto conn = connection();
    if (!conn.ok()) return conn.status();
    auto answers = (*conn)->round_trip(p::ContextList{});
    if (!answers.ok()) return answers.status();
    std::vector<std::string> ids;
    for (p::Message& m : *answers) {
      auto* part = std::get_if<p::ContextListReply>(&m);
      if (!part) return Status(Code::unavailable, "llmsvcd answered a list with an unexpected message");
      for (std::string& id : part->ids) ids.push_back(std::move(id));
    }
    return ids;
  }

  Result<ContextInfo> context_info(std::string_view id) override {
    auto conn = connection();
    if (!conn.ok()) return conn.status();
    auto r = single<p::ContextInfoReply>((*conn)->round_trip(p::ContextInfo{std::string(id)}));
    if (!r.ok()) return r.status();
    return p::from_wire(*r);
  }

  Result<ModelInfo> model_info() override {
    auto conn = connection();
    if (!conn.ok()) return conn.status();
    LLMSVC_RETURN_IF_ERROR(need_version_4(**conn, "model information"));
    auto r = single<p::ModelInfoReply>((*conn)->round_trip(p::ModelInfoRequest{}));
    if (!r.ok()) return r.status();
    return std::move(r->info);
  }

  Result<std::vector<std::string>> adapters() override {
    {
      auto conn = connection();
      if (!conn.ok()) return conn.status();
      LLMSVC_RETURN_IF_ERROR(need_version(**conn, p::kVersionAdapters, "listing adapters"));
    }
    auto info = model_info();
    if (!info.ok()) return info.status();
    return std::move(info->adapters);
  }

  Status append_messages(std::string_view id, std::span<const ChatMessage> messages) override {
    auto conn = connection();
    if (!conn.ok()) return conn.status();
    LLMSVC_RETURN_IF_ERROR(need_version(**conn, p::kVersionMessages, "appending messages"));
    // As a prompt: the daemon takes at most max_prompt_bytes of text in one request.
    const uint32_t limit = (*conn)->welcome().max_prompt_bytes;
    size_t bytes = 0;
    bool with_calls = false;
    for (const ChatMessage& m : messages) {
      bytes += m.content.size() + m.tool_calls.size();
      with_calls = with_calls || !m.tool_calls.empty();
    }
    if (with_calls) LLMSVC_RETURN_IF_ERROR(need_version(**conn, p::kVersionFork, "appending tool calls"));
    if (bytes > limit || messages.size() > p::kMaxAppendMessages)
      return Status(Code::context_overflow, "messages of " + std::to_string(bytes) + " bytes (" +
                                                std::to_string(messages.size()) + " of them) are more than llmsvcd takes at once (" +
                                                std::to_string(limit) + " bytes, " + std::to_string(p::kMaxAppendMessages) +
                                                " messages)");
    p::ContextAppend req;
    req.id = std::string(id);
    req.messages.assign(messages.begin(), messages.end());
    return single<p::Ack>((*conn)->round_trip(req)).status();
  }

  Status truncate_messages(std::string_view id, size_t n) override {
    auto conn = connection();
    if (!conn.ok()) return conn.status();
    LLMSVC_RETURN_IF_ERROR(need_version(**conn, p::kVersionMessages, "truncating a conversation"));
    if (n > p::kMaxU32) return Status(Code::invalid_argument, "no conversation holds " + std::to_string(n) + " messages");
    return single<p::Ack>((*conn)->round_trip(p::ContextTruncate{std::string(id), static_cast<uint32_t>(n)})).status();
  }

  // Page by page, as many as fit a reply each.
  Result<std::vector<ChatMessage>> messages(std::string_view id, size_t first, size_t max) override {
    auto conn = connection();
    if (!conn.ok()) return conn.status();
    LLMSVC_RETURN_IF_ERROR(need_version(**conn, p::kVersionMessages, "reading a conversation"));
    std::vector<ChatMessage> out;
    while (out.size() < max && first + out.size() <= p::kMaxU32) {
      p::ContextMessages req{std::string(id), static_cast<uint32_t>(first + out.size()),
                             static_cast<uint32_t>(std::min(max - out.size(), p::kMaxMessagesPage))};
      auto r = single<p::ContextMessagesReply>((*conn)->round_trip(req));
      if (!r.ok()) return r.status();
      if (r->messages.size() > req.max) return Status(Code::unavailable, "llmsvcd answered with more messages than asked");
      for (ChatMessage& m : r->messages) out.push_back(std::move(m));
      if (!r->more || r->messages.empty()) break;
    }
    return out;
  }

  // One request per window of kMaxCountIds ids (the count comes with the first).
  Result<TokenCount> count_tokens(std::string_view text, const CountParams& params, size_t max_ids) override {
    auto conn = connection();
    if (!conn.ok()) return conn.status();
    LLMSVC_RETURN_IF_ERROR(need_version_4(**conn, "token counting"));
    if (!params.messages.empty()) LLMSVC_RETURN_IF_ERROR(need_version(**conn, p::kVersionMessages, "counting messages"));
    const uint32_t limit = (*conn)->welcome().max_prompt_bytes;
    size_t bytes = text.size() + params.system_prompt.size();
    for (const ChatMessage& m : params.messages) bytes += m.content.size();
    if (bytes > limit || params.messages.size() > p::kMaxAppendMessages)
      return Status(Code::context_overflow, "text of " + std::to_string(text.size()) +
                                                " bytes is longer than llmsvcd counts (at most " + std::to_string(limit) +
                                                " bytes, as a prompt)");
    p::CountTokens req;
    req.text = std::string(text);
    req.params = params;
    TokenCount out;
    for (bool first = true;; first = false) {
      req.ids_offset = static_cast<uint32_t>(out.ids.size());
      req.max_ids = static_cast<uint32_t>(std::min(max_ids - out.ids.size(), p::kMaxCountIds));
      auto r = single<p::CountTokensReply>((*conn)->round_trip(req));
      if (!r.ok()) return r.status();
      if (first) out.count = r->count;
      if (r->count != out.count || r->ids.size() > req.max_ids)
        return Status(Code::unavailable, "llmsvcd answered a token count inconsistently");
      out.ids.insert(out.ids.end(), r->ids.begin(), r->ids.end());
      const size_t wanted = std::min(max_ids, static_cast<size_t>(out.count));
      if (out.ids.size() >= wanted || r->ids.empty()) break;
    }
    return out;
  }

 private:
  struct Open {
    uint32_t handle = 0;  // on conn_; 0 when its reopen failed
  };
  struct InCall {
    std::shared_ptr<ClientConnection> conn;
    uint32_t stream = 0;
  };

  Result<std::shared_ptr<ClientConnection>> connection() {
    std::lock_guard lock(mu_);
    return connection_locked();
  }

  // The live connection; after a loss, a new one with every open context reopened by id.
  Result<std::shared_ptr<ClientConnection>> connection_locked() {
    if (conn_ && conn_->alive()) return conn_;
    auto fresh = ClientConnection::connect(path_);
    if (!fresh.ok()) return fresh.status();
    conn_ = std::shared_ptr<ClientConnection>(std::move(fresh).value());
    for (auto& [id, o] : open_) {
      auto opened = single<p::ContextOpened>(conn_->round_trip(p::ContextOpen{id}));
      o.handle = opened.ok() ? opened->handle : 0;
    }
    return conn_;
  }

  const std::string path_;
  std::mutex mu_;  // conn_, open_, calls_
  std::shared_ptr<ClientConnection> conn_;
  std::map<std::string, Open, std::less<>> open_;
  std::map<std::string, InCall, std::less<>> calls_;
};

}  // namespace

Result<std::unique_ptr<Transport>> make_unix_transport(const std::string& socket_path) {
  auto conn = ClientConnection::connect(socket_path);
  if (!conn.ok()) return conn.status();
  return std::unique_ptr<Transport>(
      std::make_unique<UnixTransport>(socket_path, std::shared_ptr<ClientConnection>(std::move(conn).value())));
}

}  // namespace llmsvc::client
