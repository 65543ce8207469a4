// SPDX-License-Identifier: Apache-2.0
// The types a call and a context are described with, shared by the engine and by everything
// that carries them (the C API, the daemon's protocol): options, parameters and their rules,
// results and statistics. Plain data; no engine behind them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runtime/core/sampler/sampler.h"

namespace llmsvc {

// A context as the engine sees it (loaded or only on storage).
struct ContextInfo {
  std::string id;
  bool raw = false;
  bool loaded = false;        // in this engine's memory (else only on storage)
  int32_t tokens = 0;         // tokens in the history
  int32_t turns = 0;          // completed user turns
  std::string system_prompt;
  // KV chunks by state (a chunk holds chunk_tokens positions; the last may be partial).
  int32_t chunks_total = 0;
  int32_t chunks_resident = 0;   // in memory, any format: f16 + q8 + q4 + q3 + q2 below
  int32_t chunks_f16 = 0, chunks_q8 = 0, chunks_q4 = 0, chunks_q3 = 0, chunks_q2 = 0;
  int32_t chunks_swapped = 0;    // only on storage
  int32_t chunks_dropped = 0;    // nowhere: recomputed from the tokens when needed
  uint64_t kv_resident_bytes = 0;
};

struct ContextOptions {
  std::string id;             // empty: generate ("<scope>/": generate in that scope)
  std::string system_prompt;  // chat mode only; empty: the template's default
  bool raw = false;           // prompts go in as they are
};

struct CallParams {
  SamplerParams sampling;
  int32_t max_tokens = 256;
  std::vector<std::string> stop;
  const std::atomic<bool>* cancel = nullptr;  // polled between tokens
  // At most this many tokens in the context (a per-app quota; 0: the engine's n_ctx only): a
  // prompt that would pass it is QUOTA_EXCEEDED, and generation stops there (context_full).
  int32_t max_context_tokens = 0;
  // The call's service-level objective as ratios of the full model's TTFT and TPOT (0: none).
  float slo_ttft_ratio = 0.0f, slo_tpot_ratio = 0.0f;
};

// The rules every CallParams meets, wherever it comes from (the C API's struct, the daemon's
// CALL, the CLI's flags): finite sampling values in their ranges, max_tokens >= 0, SLO ratios
// >= 0, at most kMaxStopStrings stop strings of 1..kMaxStopBytes bytes. invalid_argument
// naming the field.
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 256;
Status check_call_params(const CallParams& params);

enum class FinishReason { none = 0, eos = 1, length = 2, stop = 3, cancelled = 4, context_full = 5 };

struct CallStats {
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  int32_t context_tokens = 0;
  FinishReason finish = FinishReason::none;
  double switch_in_ms = 0, ttft_ms = 0, prefill_ms = 0, decode_ms = 0, tpot_ms = 0;
  // Switch-in: chunks loaded from their swap files, chunks recomputed from their tokens (the
  // dropped ones, and those whose file was missing, damaged or stale), tokens recomputed.
  int32_t chunks_loaded = 0, chunks_recomputed = 0, chunk_load_failures = 0, tokens_recomputed = 0;
  // Swap-out at the end of the call (encoding on the call's thread; writes are asynchronous).
  int32_t chunks_swapped_out = 0;
  double swap_out_ms = 0;
  std::vector<int32_t> prompt_ids;     // what the prompt added (template included)
  std::vector<int32_t> generated_ids;  // what was generated
};

// Receives valid UTF-8 pieces as they complete; return false to cancel.
using PieceFn = std::function<bool(std::string_view piece, int32_t token)>;

struct EngineStats {
  int32_t known_contexts = 0;
  uint64_t calls = 0, prompt_tokens = 0, generated_tokens = 0;
  uint64_t kv_bytes = 0, weight_bytes = 0;
  uint64_t kv_peak_bytes = 0;  // the most resident KV ever held at once
  uint64_t kv_evictions = 0;   // chunks evicted under the budget
  // Switch-in, all calls (see CallStats).
  uint64_t chunks_loaded = 0, chunks_recomputed = 0, chunk_load_failures = 0, tokens_recomputed = 0;
  double switch_in_ms = 0;
  // Swap-out: chunk files made durable, their bytes on storage, writes that failed (disk
  // full, ...: the chunk just has no current file; nothing is lost).
  uint64_t swap_out_chunks = 0, swap_out_bytes = 0, swap_out_failures = 0;
  uint64_t swap_out_deferred = 0;  // chunks left for later: the writer's queue was full
};

}  // namespace llmsvc
