// SPDX-License-Identifier: Apache-2.0
// ContextState: one context inside the engine — its token history (the source of truth,
// mirrored on storage by its HistoryLog) and the KV sequence computed from it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "policy/kv_chunk_store.h"
#include "policy/swap/swap_store.h"
#include "runtime/core/persist/history_log.h"
#include "runtime/core/tokenizer/chat_template.h"

namespace llmsvc {

struct ContextState {
  ContextState(std::string id_, policy::KvChunkStore& store) : id(std::move(id_)), kv(store) {}
  // Eviction's write-back (if any) uses `swap` and `tokens`: cleared before they go.
  ~ContextState() { kv.set_write_back(nullptr); }
  ContextState(const ContextState&) = delete;
  ContextState& operator=(const ContextState&) = delete;

  std::string id;
  std::string system_prompt;
  // Its tools (normalized JSON, "" for none) and the model's template rendering them (null
  // without tools: the model's own).
  std::string tools;
  std::shared_ptr<const ChatTemplate> chat;
  std::string adapter;              // its LoRA adapter's name ("": none)
  bool raw = false;
  bool busy = false;                // inside a call
  std::vector<int32_t> tokens;      // every token of the context, in order
  int n_evaluated = 0;              // tokens[0, n_evaluated) have K/V in `kv`
  int call_level = -1;              // the elastic level (Forward's index) of its current or last call
  int turns = 0;                    // completed user turns
  // The conversation (chat contexts whose log keeps messages), each with the history's length
  // after it. messages_mu guards it against readers outside the context's call.
  bool keeps_messages = false;
  std::vector<persist::LoggedMessage> messages;
  size_t n_persisted_messages = 0;
  mutable std::mutex messages_mu;
  std::unique_ptr<persist::HistoryLog> log;  // holds tokens[0, n_persisted) durably
  // Atomic: a context's description reads them while a call on it runs.
  std::atomic<size_t> n_persisted{0};
  std::atomic<int> persisted_turns{0};
  policy::KvSequence kv;
  // Its chunk files (contexts/<id>/chunks/); null when swap is off or the directory is unusable.
  std::unique_ptr<policy::SwapStore> swap;
};

// Clears a context's busy flag and unpins its KV when a call (or another operation that
// entered the context) ends, however it ends.
struct BusyGuard {
  std::mutex& mu;
  ContextState& ctx;
  policy::KvChunkStore& store;
  ~BusyGuard() {
    store.unpin(ctx.kv);
    std::lock_guard<std::mutex> lock(mu);
    ctx.busy = false;
  }
};

}  // namespace llmsvc
