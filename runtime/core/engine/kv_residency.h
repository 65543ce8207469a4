// SPDX-License-Identifier: Apache-2.0
// KvResidency: where the contexts' KV lives between and during calls. It owns the chunk store
// (the budget, each app's share), the swap files (each app's disk quota) and the switch-cost
// profile, and makes the two moves: switch_in (load or recompute what a call needs, as the
// planner says) and swap_out (write what changed, then the chunk table). The engine decides
// when; this decides how. Not thread-safe beyond what each method says: the engine's lock
// guards attach, released and deleted; a context's own calls are serialised by its busy flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "policy/kv_chunk_store.h"
#include "policy/planning/switch_cost.h"
#include "policy/swap/swap_io.h"
#include "runtime/core/engine/context_state.h"
#include "runtime/core/engine/engine.h"
#include "runtime/core/engine/scope_disk_quotas.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"
#include "runtime/core/persist/state_dir.h"

namespace llmsvc {

class KvResidency {
 public:
  // Recomputes K/V of `tokens` at `positions` into the context's sequence (Forward::recompute,
  // with the engine's compute turn held and the context's adapter).
  using Recompute = std::function<Status(ContextState& ctx, std::span<const int32_t> tokens,
                                         std::span<const int32_t> positions, int n_valid,
                                         const Forward::LayerHook& before_layer)>;
  using Warn = std::function<void(const std::string&)>;

  // `model` and `state` must outlive it. swap_io null: no swap (evicted chunks are dropped).
  // kv_memory: the pool chunks live in (the attention device's memory).
  KvResidency(const Model& model, const EngineOptions& options, const persist::StateDir& state,
              std::unique_ptr<policy::SwapIo> swap_io, hal::MemoryPool* kv_memory, Recompute recompute, Warn warn);
  // Waits for the swap writes still queued (their callbacks reach the contexts).
  ~KvResidency();

  policy::KvChunkStore& store() { return store_; }
  const policy::KvChunkStore& store() const { return store_; }

  // A context joins (engine lock held): its KV charged to its scope's share, its chunk
  // directory opened as its swap store under its scope's disk quota, and, for one read from
  // storage, its chunk table and files deciding which chunks are swapped and how much was
  // evaluated.
  void attach(ContextState& ctx, bool from_storage);
  // Context `id` left memory (erased, its swap store closed) leaving `files` bytes of chunk
  // files on storage (its store's counted_bytes before it closed). Engine lock held.
  void released(const std::string& id, uint64_t files);
  // Deleted with its files (engine lock held).
  void deleted(const std::string& id);

  // Brings back the chunks of evaluated positions that left memory: loads what the plan
  // (policy/planning/switch_planner.h) loads, recomputes the rest and every chunk whose load failed.
  Status switch_in(ContextState& ctx, CallStats& st);
  // After a call whose history is durable: queues the chunks that changed since their files
  // were written, then the chunk table (ahead-of-time swap-out). Never fails the call.
  void swap_out(ContextState& ctx, CallStats& st);
  // After a call: compresses the context's full chunks by density (kv_ratio).
  Status compress(ContextState& ctx);
  // Waits for the swap writes and removals queued so far.
  void flush();
  // The store's and the swap writer's figures.
  void add_figures(EngineStats& s) const;

 private:
  void assign_share(ContextState& ctx);
  // Opens the context's chunk directory as its SwapStore (null, logged, if it cannot),
  // charged to its scope's disk quota, and, without ahead-of-time swap-out, gives its
  // sequence eviction's write-back.
  void open_swap(ContextState& ctx);
  // A context read from storage: its chunk table and chunk files decide which chunks are
  // swapped (loaded at switch-in) and which dropped, and how much was evaluated.
  void restore_chunks(ContextState& ctx);
  // Bytes of the chunk files stored context `id` keeps (0 when none or unreadable).
  uint64_t stored_swap_bytes(const std::string& id) const;
  const fileio::SafeDir& root() const { return *state_.dir(); }
  void warn(const std::string& msg) const { warn_(msg); }

  const Model& model_;
  const persist::StateDir& state_;
  policy::KvChunkStore store_;
  // The switch-cost profile (<state root>/switch-profile.json, written by `llmsvc profile`):
  // with one, switch-in splits swapped chunks between loads and recompute and overlaps the
  // two; without one, every swapped chunk is loaded (exact, no guessing).
  std::optional<policy::SwitchCost> switch_cost_;
  double kv_ratio_;
  uint64_t kv_share_bytes_;  // each scope's share, 0: none
  std::map<std::string, uint64_t, std::less<>> kv_share_bytes_by_scope_;  // in its place for these
  bool aot_swap_out_;  // else chunks are written when evicted (a baseline's write-back)
  bool swap_chunks_;   // chunk files (EngineOptions::kv_swap); the chunk table is written regardless
  bool pipeline_;      // the swap/recompute split when there is a profile
  Recompute recompute_;
  Warn warn_;
  std::unique_ptr<policy::SwapIo> swap_io_;  // null: no swap and no chunk table (SwapIo failed)
  // Written by the swap writer's callbacks.
  std::atomic<uint64_t> swap_out_chunks_{0}, swap_out_bytes_{0}, swap_out_failures_{0}, swap_out_deferred_{0};
  std::atomic<bool> swap_failing_{false};  // logs the first failure of a run, not every one
  std::map<std::string, std::shared_ptr<policy::KvShare>, std::less<>> shares_;  // by scope (engine lock)
  ScopeDiskQuotas disk_quotas_;  // each scope's swap files (engine lock)
};

}  // namespace llmsvc
