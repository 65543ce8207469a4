// SPDX-License-Identifier: Apache-2.0
// TraceTarget: what bench_trace replays a trace on. The engine in this process, or a real
// llmsvcd reached through llmsvc.h as an app reaches it, so one replay measures both and the
// daemon's switch-in figures can be set against the engine's own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "runtime/core/engine/engine.h"

namespace llmsvc::bench {

// One call's figures. Switch-in, prefill and decode are the engine's own timings (inside the
// daemon for llmsvcd); wall_ms is the caller's, from the call to its return.
struct TargetCall {
  double switch_in_ms = 0, prefill_ms = 0, decode_ms = 0, wall_ms = 0;
  int chunks_loaded = 0, chunks_recomputed = 0;
  int prompt_tokens = 0, generated_tokens = 0, context_tokens = 0;
  // Not carried by llmsvc.h: -1 through llmsvcd.
  int tokens_recomputed = -1, load_failures = -1, swapped_out = -1;
};

// Whole-run figures; -1 where llmsvc.h does not carry them.
struct TargetFigures {
  uint64_t kv_peak_bytes = 0, swap_out_bytes = 0;
  int64_t kv_evictions = -1, swap_out_deferred = -1;
};

class TraceTarget {
 public:
  virtual ~TraceTarget() = default;
  // A raw context `id` holding `text` (a prefill-only call; not measured).
  virtual Status start_context(const std::string& id, const std::string& text) = 0;
  virtual Status delete_context(const std::string& id) = 0;
  // A greedy call of at most max_tokens tokens.
  virtual Status call(const std::string& id, const std::string& prompt, int max_tokens, TargetCall* out) = 0;
  // Waits until the swap-out of what ran so far is on storage.
  virtual void settle() = 0;
  virtual TargetFigures figures() = 0;
};

std::unique_ptr<TraceTarget> engine_target(std::unique_ptr<Engine> engine);

// A fresh llmsvcd in `dir` (socket, state, log), with llmsvc's default policy over the
// given budget; `switch_profile` (may be empty) is placed where it reads its profile.
struct DaemonTargetOptions {
  std::string dir, model, switch_profile;
  std::string device;  // comma-separated, into the daemon's `devices` ("": its default)
  uint64_t kv_budget_bytes = 0;
  double kv_ratio = 0.5;
  int threads = 2, n_ctx = 2048;
};
Result<std::unique_ptr<TraceTarget>> daemon_target(const DaemonTargetOptions& o);

}  // namespace llmsvc::bench
