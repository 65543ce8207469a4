// SPDX-License-Identifier: Apache-2.0
// Transport: what a service handle (runtime/api) needs from wherever the engine runs:
// embedded (the engine in this process, runtime/api/embedded_transport.h) or the daemon
// client (unix:, runtime/client/unix_transport.h). Its own layer, below both, so neither
// includes the other's side: it speaks only the call types.
//
// Implementations are thread-safe: a service handle is shared by the app's threads.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/core/engine/call_types.h"
#include "runtime/core/engine/info_types.h"

namespace llmsvc {

class Transport {
 public:
  virtual ~Transport() = default;

  // A new context; returns its id (generated when options.id is empty). exists if taken.
  virtual Result<std::string> create_context(const ContextOptions& options) = 0;
  // not_found unless `id` names a context the service holds.
  virtual Status open_context(std::string_view id) = 0;
  // The app closed its last handle on `id` (a remote transport releases the daemon's).
  virtual void close_context(std::string_view /*id*/) {}
  // Deletes the context and its state. busy while it is in a call.
  virtual Status delete_context(std::string_view id) = 0;
  // Runs one call; params.cancel is the handle's flag, polled between tokens.
  virtual Status call(std::string_view id, std::string_view prompt, const CallParams& params, const PieceFn& on_piece,
                      CallStats* stats) = 0;
  // The handle's cancel flag is already set; a remote transport also tells the other
  // side, since it cannot see our flag. Must be safe from any thread.
  virtual void cancel(std::string_view id) = 0;
  virtual Result<EngineStats> stats() = 0;
  virtual Result<std::vector<std::string>> list_contexts() = 0;
  virtual Result<ContextInfo> context_info(std::string_view id) = 0;
  // The model and where it runs (a daemon too old to say: Code::unsupported).
  virtual Result<ModelInfo> model_info() { return Status(Code::unsupported, "this transport has no model information"); }
  // The LoRA adapters the service offers, by name (ModelInfo::adapters, where the far end
  // reports them: unsupported where it cannot).
  virtual Result<std::vector<std::string>> adapters() { return Status(Code::unsupported, "this transport lists no adapters"); }
  // A context's conversation (Engine::append_messages, truncate_messages, messages); a daemon
  // too old for them: Code::unsupported. A call with CallParams::reply_only generates a reply.
  virtual Status append_messages(std::string_view /*id*/, std::span<const ChatMessage> /*messages*/) {
    return Status(Code::unsupported, "this transport does not carry messages");
  }
  virtual Status truncate_messages(std::string_view /*id*/, size_t /*n*/) {
    return Status(Code::unsupported, "this transport does not carry messages");
  }
  virtual Result<std::vector<ChatMessage>> messages(std::string_view /*id*/, size_t /*first*/, size_t /*max*/) {
    return Status(Code::unsupported, "this transport does not carry messages");
  }
  // Forks `parent` into a new context (Engine::fork_context), returning its id; the new
  // context is open as create_context's is. A daemon too old for it: Code::unsupported.
  virtual Result<std::string> fork_context(std::string_view /*parent*/, std::string_view /*id*/) {
    return Status(Code::unsupported, "this transport does not fork contexts");
  }
  // The tokens `text` adds as a prompt (CountParams), with the first `max_ids` of their ids.
  virtual Result<TokenCount> count_tokens(std::string_view /*text*/, const CountParams& /*params*/, size_t /*max_ids*/) {
    return Status(Code::unsupported, "this transport does not count tokens");
  }
};

}  // namespace llmsvc
