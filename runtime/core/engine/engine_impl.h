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
#include "policy/kv_chunk_store.h"
#include "policy/switch_cost.h"
#include "policy/swap_io.h"
#include "runtime/core/engine/context_state.h"
#include "runtime/core/engine/engine.h"
#include "runtime/core/engine/scope_disk_quotas.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"
#include "runtime/core/persist/state_dir.h"

namespace llmsvc {

class EngineImpl final : public Engine {
 public:
  EngineImpl(std::unique_ptr<hal::Device> device, std::unique_ptr<Model> model, const EngineOptions& options,
             int n_ctx, persist::StateDir state, std::unique_ptr<policy::SwapIo> swap_io);
  // Waits for the swap writes still queued (their callbacks reach the contexts).
  ~EngineImpl() override;

  Result<std::string> create_context(const ContextOptions& options) override;
  Status open_context(std::string_view id) override;
  void release_context(std::string_view id) override;
  Status delete_context(std::string_view id) override;
  Result<std::vector<std::string>> list_contexts() const override;
  Result<std::vector<std::string>> list_scope(std::string_view scope) const override;
  Result<ContextInfo> context_info(std::string_view id) const override;
  Status call(std::string_view id, std::string_view prompt, const CallParams& params, const PieceFn& on_piece,
              CallStats* stats) override;
  EngineStats stats() const override;
  void flush_swap() override;
  const Tokenizer& tokenizer() const override { return model_->tokenizer(); }
  int n_ctx() const override { return n_ctx_; }
  const std::string& state_root() const override { return state_.root(); }

 private:
  // Tokens that the prompt adds to `ctx` (template included; user text never parsed for specials).
  std::vector<int32_t> prompt_tokens(const ContextState& ctx, std::string_view prompt) const;
  Status generate(ContextState& ctx, const std::vector<int32_t>& prompt, const CallParams& params,
                  const PieceFn& on_piece, CallStats& st);
  Status eval_pending(ContextState& ctx, std::vector<float>& logits);
  // Brings back the chunks of evaluated positions that left memory: loads what the plan
  // (policy/switch_planner.h) loads, recomputes the rest and every chunk whose load failed.
  Status switch_in(ContextState& ctx, CallStats& st);
  // After a call whose history is durable: queues the chunks that changed since their files
  // were written, then the chunk table (ahead-of-time swap-out). Never fails the call.
  void swap_out(ContextState& ctx, CallStats& st);
  // A context read from storage: its chunk table and chunk files decide which chunks are
  // swapped (loaded at switch-in) and which dropped, and how much was evaluated.
  void restore_chunks(ContextState& ctx);
  // Bytes of the chunk files stored context `id` keeps (0 when none or unreadable).
  uint64_t stored_swap_bytes(const std::string& id) const;
  // Opens the context's chunk directory as its SwapStore (null, logged, if it cannot),
  // charged to its scope's disk quota, and, without ahead-of-time swap-out, gives its
  // sequence eviction's write-back.
  void open_swap(ContextState& ctx);
  void warn(const std::string& msg) const;
  // The state root, held open: every state file is reached beneath it (persist::layout's
  // relative paths), never through a symbolic link.
  const fileio::SafeDir& root() const { return *state_.dir(); }
  // After a call: compresses the context's full chunks by density (kv_ratio).
  Status compress(ContextState& ctx);
  // Loads a context from storage into contexts_ (mu_ held).
  Result<ContextState*> load_locked(std::string_view id);
  // Makes what `ctx` holds durable, or takes the unsaved tokens back (Code::io).
  Status persist(ContextState& ctx);
  // Charges a new context's KV to its scope's share of the budget, if shares are on (mu_ held).
  void assign_share_locked(ContextState& ctx);

  std::unique_ptr<hal::Device> device_;
  std::unique_ptr<Model> model_;
  int n_ctx_;
  policy::KvChunkStore store_;
  persist::StateDir state_;
  bool recompute_on_model_change_;
  // The switch-cost profile (<state root>/switch-profile.json, written by `llmsvc profile`):
  // with one, switch-in splits swapped chunks between loads and recompute and overlaps the
  // two; without one, every swapped chunk is loaded (exact, no guessing).
  std::optional<policy::SwitchCost> switch_cost_;
  double kv_ratio_;
  uint64_t kv_share_bytes_;  // each scope's share, 0: none
  std::map<std::string, uint64_t, std::less<>> kv_share_bytes_by_scope_;  // in its place for these
  bool aot_swap_out_;  // else chunks are written when evicted (a baseline's write-back)
  bool pipeline_;      // the swap/recompute split when there is a profile

  std::unique_ptr<policy::SwapIo> swap_io_;  // null: swap off
  // Written by the swap writer's callbacks.
  std::atomic<uint64_t> swap_out_chunks_{0}, swap_out_bytes_{0}, swap_out_failures_{0}, swap_out_deferred_{0};
  std::atomic<bool> swap_failing_{false};  // logs the first failure of a run, not every one

  mutable std::mutex mu_;  // contexts_, stats_, rng_
  std::map<std::string, std::unique_ptr<ContextState>, std::less<>> contexts_;
  std::map<std::string, std::shared_ptr<policy::KvShare>, std::less<>> shares_;  // by scope
  ScopeDiskQuotas disk_quotas_;  // each scope's swap files (under mu_)
  EngineStats stats_;
  std::mt19937_64 id_rng_;

  FairMutex compute_mu_;  // forward_ and the device: one evaluation at a time, turns in order of arrival
  Forward forward_;
};

}  // namespace llmsvc
