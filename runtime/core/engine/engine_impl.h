// SPDX-License-Identifier: Apache-2.0
// EngineImpl: the in-process Engine — one Model on one HAL device, contexts in memory.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include "base/fair_mutex.h"
#include "hal/device.h"
#include "policy/swap/swap_io.h"
#include "runtime/core/engine/adapter_set.h"
#include "runtime/core/engine/context_state.h"
#include "runtime/core/engine/engine.h"
#include "runtime/core/engine/kv_residency.h"
#include "runtime/core/engine/level_selector.h"
#include "runtime/core/constrain/constraint.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"
#include "runtime/core/model/weight_residency.h"
#include "runtime/core/persist/state_dir.h"

namespace llmsvc {

class EngineImpl final : public Engine {
 public:
  EngineImpl(std::vector<std::unique_ptr<hal::Device>> devices, std::unique_ptr<Model> model,
             std::unique_ptr<Forward> forward, AdapterSet adapters, const EngineOptions& options, int n_ctx,
             persist::StateDir state, std::unique_ptr<policy::SwapIo> swap_io);
  // Waits for the swap writes still queued (their callbacks reach the contexts).
  ~EngineImpl() override;

  Result<std::string> create_context(const ContextOptions& options) override;
  Status open_context(std::string_view id) override;
  void release_context(std::string_view id) override;
  Status delete_context(std::string_view id) override;
  Result<std::string> fork_context(std::string_view parent, std::string_view child_id) override;
  Result<std::vector<std::string>> list_contexts() const override;
  Result<std::vector<std::string>> list_scope(std::string_view scope) const override;
  Result<ContextInfo> context_info(std::string_view id) const override;
  Status call(std::string_view id, std::string_view prompt, const CallParams& params, const PieceFn& on_piece,
              CallStats* stats) override;
  Status append_messages(std::string_view id, std::span<const ChatMessage> messages, int32_t max_context_tokens) override;
  Status truncate_messages(std::string_view id, size_t n) override;
  Result<std::vector<ChatMessage>> messages(std::string_view id, size_t first, size_t max) const override;
  ModelInfo model_info() const override;
  std::vector<int32_t> prompt_ids(std::string_view text, const CountParams& params) const override;
  Result<std::vector<int32_t>> message_ids(const CountParams& params) const override;
  EngineStats stats() const override;
  uint64_t kv_resident_bytes_in(std::string_view scope) const override;
  void flush_swap() override;
  const Tokenizer& tokenizer() const override { return model_->tokenizer(); }
  size_t max_piece_bytes() const override;
  int n_ctx() const override { return n_ctx_; }
  const std::string& state_root() const override { return state_.root(); }
  uint64_t trim_weights() override;
  bool devices_need_ioctl() const override {
    for (const auto& d : devices_)
      if (d->caps().driver_ioctl) return true;
    return false;
  }
  std::vector<std::string> device_names() const override {
    std::vector<std::string> names;
    for (const auto& d : devices_) names.push_back(d->name());
    return names;
  }

 private:
  // Tokens that the prompt adds to `ctx` (template included; user text never parsed for specials).
  std::vector<int32_t> prompt_tokens(const ContextState& ctx, std::string_view prompt) const;
  // The same for a context of the kind given: raw or chat (its template `chat`), at its start
  // (BOS), its first turn (chat: the system turn opens it), with system prompt `sys`.
  std::vector<int32_t> turn_tokens(const ChatTemplate& chat, bool raw, bool at_start, bool first_turn,
                                   const std::string& sys, std::string_view prompt) const;
  // The tokens an assistant message adds to the history (its text, then the turn's end).
  std::vector<int32_t> reply_tokens(const ChatTemplate& chat, std::string_view content) const;
  // The tokens of a reply's tool results (tool messages), up to the generation prompt; `reply`
  // the text of the reply whose calls they answer.
  Result<std::vector<int32_t>> tool_result_tokens(const ChatTemplate& chat, std::string_view reply,
                                                  std::span<const ChatMessage> results) const;
  // What `messages` add to a conversation of template `chat` and tools `tools`: at its start
  // or not, after `turns` user messages, expecting `next`, with system prompt `sys`, after the
  // reply `last_reply` (its text, the conversation's last message; "" for none); `base` tokens
  // precede them (the messages' token_end count from it). Errors: the turn order, system
  // messages, tool messages where no reply called a tool.
  struct AddedMessages {
    std::vector<int32_t> ids;
    std::vector<persist::LoggedMessage> logged;
    int users = 0;
  };
  Result<AddedMessages> tokenize_messages(const ChatTemplate& chat, const std::string& tools,
                                          std::span<const ChatMessage> messages, bool at_start, int turns,
                                          MessageRole next, const std::string& sys, std::string_view last_reply,
                                          size_t base) const;
  // The role a conversation takes next, from its last message (empty: user; a reply that
  // called tools: tool; tool results: assistant).
  MessageRole next_role(const ContextState& ctx) const;
  // A context's template (its tools rendered where it has some).
  const ChatTemplate& chat_of(const ContextState& ctx) const { return ctx.chat ? *ctx.chat : model_->chat_template(); }
  // The model's template with `tools` (normalized) rendered: made once per distinct tools.
  Result<std::shared_ptr<const ChatTemplate>> tools_template(const std::string& tools);
  // A message as the conversation reads it back: a reply of a context with tools split into
  // its text and its calls.
  ChatMessage read_message(const persist::LoggedMessage& m, const std::string& tools) const;
  // Marks `id` busy (loading it if needed); the caller's BusyGuard clears it.
  Result<ContextState*> enter(std::string_view id);
  // Why `ctx` has no messages to work on (raw, or made before they were kept), or Ok.
  Status check_keeps_messages(const ContextState& ctx) const;
  // The elastic level a call of `prompt` runs at, and the share of the prompt to keep
  // (LevelSelector: what it asks for, else the SLO's choice), checked against what the Forward can run
  // (Forward::check_level's unsupported: an asked level fails the call, an SLO's choice falls
  // back to the full model with the SLO missed).
  Result<LevelSelector::Choice> call_level(const CallParams& params, policy::PromptShape prompt);
  // The context's evaluated tokens by the level that computed their KV (PromptShape::context_levels).
  static std::vector<std::pair<int, int>> context_levels(const ContextState& ctx);
  // The per cent of Forward level index `level` (-1: the full model, 100).
  int level_percent(int level) const;
  // What every evaluation of a call runs: the Forward's elastic level index (-1: full) and
  // adapter index (-1: none), set again at each compute turn.
  struct EvalVariant {
    int level = -1;
    int adapter = -1;
  };
  // The adapter a call runs with: its own, else its context's (AdapterSet::find's errors; a
  // context whose adapter the service no longer offers cannot be called).
  Result<int> call_adapter(const ContextState& ctx, const CallParams& params) const;
  // `variant`: what every evaluation of the call runs (call_level, call_adapter).
  Status generate(ContextState& ctx, const std::vector<int32_t>& prompt, const CallParams& params, EvalVariant variant,
                  constrain::Constraint* constraint, const PieceFn& on_piece, CallStats& st, std::string* reply);
  // The call's structured-output constraint (null without one): its schema or grammar
  // compiled once per text (engine_constrain.cpp), over the model's vocabulary; one that a
  // finished call gave back (recycle_constraint) is reused with its mask caches warm.
  Result<std::unique_ptr<constrain::Constraint>> make_constraint(const CallParams& params);
  void recycle_constraint(const CallParams& params, std::unique_ptr<constrain::Constraint> c);
  // Evaluates the context's tokens not yet evaluated with `variant`, one micro-batch per turn
  // at the compute lock.
  Status eval_pending(ContextState& ctx, EvalVariant variant, std::vector<float>& logits);
  void warn(const std::string& msg) const;
  // The state root, held open: every state file is reached beneath it (persist::layout's
  // relative paths), never through a symbolic link.
  const fileio::SafeDir& root() const { return *state_.dir(); }
  // A new context's files and state (mu_ held; `o` validated by create_context's checks, its
  // tools normalized and rendered by `chat`, null without tools).
  Result<ContextState*> new_context_locked(const ContextOptions& o, std::shared_ptr<const ChatTemplate> chat);
  // Loads a context from storage into contexts_ (mu_ held).
  Result<ContextState*> load_locked(std::string_view id);
  // Makes what `ctx` holds durable, or takes the unsaved tokens back (Code::io).
  Status persist(ContextState& ctx);
  // A turn's level (compute_mu_ held): a pending trim first, then the weights the level reads
  // made resident, then Forward::set_level (engine_levels.cpp).
  Status enter_level(int level);

  std::vector<std::unique_ptr<hal::Device>> devices_;  // the embedder's order; the weights load on the first
  std::unique_ptr<Model> model_;
  std::unique_ptr<Forward> forward_;  // guarded by compute_mu_
  AdapterSet adapters_;               // the LoRA adapters offered (forward_'s adapter choices)
  int n_ctx_;
  persist::StateDir state_;
  bool recompute_on_model_change_;
  KvResidency kv_;  // the chunk store, swap files, switch-in and swap-out
  LevelSelector levels_;  // elastic models: each call's level
  WeightResidency weights_;  // which weight rows are in memory (guarded by compute_mu_)
  std::atomic<bool> trim_pending_{false};  // trim_weights came while a call computed

  mutable std::mutex mu_;  // contexts_, stats_, rng_
  std::map<std::string, std::unique_ptr<ContextState>, std::less<>> contexts_;
  EngineStats stats_;
  std::mt19937_64 id_rng_;

  // Structured output: the vocabulary as constraints read it (built at the first constrained
  // call) and compiled schemas and grammars by their text, the least recently used dropped
  // past kMaxCompiled.
  // Templates with a context's tools rendered, by the tools' JSON (at most kMaxToolTemplates;
  // past that a template is made for its context alone).
  static constexpr size_t kMaxToolTemplates = 16;
  std::mutex tools_mu_;
  std::map<std::string, std::shared_ptr<const ChatTemplate>, std::less<>> tool_templates_;

  std::mutex constrain_mu_;
  std::shared_ptr<const constrain::TokenVocab> vocab_;
  struct Compiled {
    constrain::CompiledGrammar grammar;
    uint64_t used = 0;                             // compiled_clock_ at the last use
    std::unique_ptr<constrain::Constraint> idle;   // given back by a finished call
  };
  std::map<std::string, Compiled, std::less<>> compiled_;
  uint64_t compiled_clock_ = 0;

  // forward_ and the devices: one evaluation at a time, turns in order of arrival. forward_'s
  // elastic level is state every turn sets again (Forward::set_level, a pointer move) before
  // it evaluates: concurrent calls at different levels interleave per micro-batch and token.
  FairMutex compute_mu_;
};

}  // namespace llmsvc
