// SPDX-License-Identifier: Apache-2.0
// The statistics records' figures, each listed once: the engine's structs (call_types.h), the
// protocol's messages and their encodings (runtime/protocol), the conversions between them and
// the writers of the public C structs (runtime/api/options.cpp) all expand these tables.
//
// Each table is an X-macro: LLMSVC_<RECORD>_FIELDS(X) calls X(type, name, since, c, ...) once per
// figure, in wire order (docs/PROTOCOL.md, section 5):
//   type   the C++ type, the same in the engine, in the message and in the C struct. It picks
//          the encoding: int32_t travels as `count` (>= 0), uint64_t as `u64`, double as `f64`.
//   name   the name of the struct member, of the wire field and of the C struct's field.
//   since  the protocol version that appended it to the message; a version only appends, so
//          `since` never decreases down a table (checked in runtime/protocol/messages.h).
//   c      InCStruct: whether the public C struct has a field of this name and type (checked
//          where the C struct is written, so the table and include/llmsvc/llmsvc.h agree).
// LLMSVC_ENGINE_STATS_FIELDS adds `source` (StatSource): where the daemon gets an app's figure.
//
// A new figure is one line at the end of its table (a new protocol version for it, see
// docs/PROTOCOL.md section 8), plus, when c is yes, the field appended to the C struct. Fields
// that are not plain figures (ids, flags, prompts, token ids, the finish reason, a service's
// open handles) stay in the structs themselves.
#pragma once

#include <cstdint>

namespace llmsvc {

enum class InCStruct : bool { no = false, yes = true };

enum class StatSource : uint8_t {
  call,    // summed over calls from CallStats' figure of the same name (add_call_figures)
  app,     // kept by whoever reports it: the engine, or llmsvcd for each app
  device,  // the engine's as a whole: through llmsvcd the daemon's, the same for every app
};

// A call's figures (CallStats, the RESULT's stats, llmsvc_call_result).
#define LLMSVC_CALL_STATS_FIELDS(X)                                                                 \
  X(int32_t, prompt_tokens, 1, yes)        /* tokens the prompt (with template) added */            \
  X(int32_t, generated_tokens, 1, yes)                                                              \
  X(int32_t, context_tokens, 1, yes)       /* tokens in the context after the call */               \
  X(double, switch_in_ms, 1, yes)          /* making the context's state ready */                   \
  X(double, ttft_ms, 1, yes)               /* includes switch-in and prefill */                     \
  X(double, prefill_ms, 1, yes)                                                                     \
  X(double, decode_ms, 1, yes)             /* generation after the first token */                   \
  X(double, tpot_ms, 1, yes)                                                                        \
  /* Switch-in: chunks loaded from their swap files, chunks recomputed from their tokens (the */    \
  /* dropped ones, and those whose file was missing, damaged or stale), tokens recomputed. */       \
  X(int32_t, chunks_loaded, 2, yes)                                                                 \
  X(int32_t, chunks_recomputed, 2, yes)                                                             \
  X(int32_t, chunk_load_failures, 2, no)   /* loads that failed (the chunk was recomputed) */       \
  X(int32_t, tokens_recomputed, 2, no)                                                              \
  /* Swap-out at the end of the call (encoding on the call's thread; writes are asynchronous). */   \
  X(int32_t, chunks_swapped_out, 2, no)                                                             \
  X(double, swap_out_ms, 2, no)                                                                     \
  /* Structured output: time spent computing the allowed tokens and advancing the matcher. */       \
  X(double, constrain_ms, 5, yes)                                                                    \
  /* Tools (a context that declares them): calls parsed from the reply, and replies that */         \
  /* started a call that did not parse (1: the reply stays text). */                               \
  X(int32_t, tool_calls, 6, yes)                                                                    \
  X(int32_t, tool_call_errors, 6, yes)                                                              \
  /* The elastic level the call ran at, in per cent (100: the full model; CallParams). */           \
  X(int32_t, level_percent, 7, yes)                                                                 \
  /* 1: the call's SLO ratios asked more than any level gives (the smallest ran; 0 otherwise). */  \
  X(int32_t, slo_missed, 7, yes)                                                                    \
  /* The share of the prompt's tokens the call kept (1: none dropped; CallParams::prompt_keep). */ \
  X(double, prompt_kept, 9, yes)

// The service's figures (EngineStats, STATS_REPLY, llmsvc_stats).
#define LLMSVC_ENGINE_STATS_FIELDS(X)                                                               \
  X(int32_t, known_contexts, 1, yes, app)                                                           \
  X(uint64_t, calls, 1, yes, app)                                                                   \
  X(uint64_t, prompt_tokens, 1, yes, call)                                                          \
  X(uint64_t, generated_tokens, 1, yes, call)                                                       \
  X(uint64_t, kv_bytes, 1, yes, app)            /* resident KV (through llmsvcd: the app's) */      \
  X(uint64_t, weight_bytes, 1, yes, device)                                                         \
  X(uint64_t, kv_peak_bytes, 2, yes, device)    /* the most resident KV ever held at once */        \
  X(uint64_t, kv_evictions, 2, no, device)      /* chunks evicted under the budget */               \
  X(uint64_t, chunks_loaded, 2, yes, call)      /* switch-in, all calls (see CallStats) */          \
  X(uint64_t, chunks_recomputed, 2, yes, call)                                                      \
  X(uint64_t, chunk_load_failures, 2, no, call)                                                     \
  X(uint64_t, tokens_recomputed, 2, no, call)                                                       \
  X(double, switch_in_ms, 2, no, call)                                                              \
  /* Swap-out: chunk files made durable, their bytes on storage, writes that failed (disk */        \
  /* full, ...: the chunk just has no current file; nothing is lost), chunks left for later */      \
  /* because the writer's queue was full. */                                                        \
  X(uint64_t, swap_out_chunks, 2, no, device)                                                       \
  X(uint64_t, swap_out_bytes, 2, yes, device)                                                       \
  X(uint64_t, swap_out_failures, 2, yes, device)                                                    \
  X(uint64_t, swap_out_deferred, 2, no, device)

// A context's figures (ContextInfo, CONTEXT_INFO_REPLY, llmsvc_context_info). KV chunks by
// state (a chunk holds chunk_tokens positions; the last may be partial): resident (in memory,
// any format; the sum of the by-format counts), swapped (only on storage), dropped (nowhere:
// recomputed from the tokens when needed); they add up to chunks_total.
#define LLMSVC_CONTEXT_INFO_FIELDS(X)                                                               \
  X(int32_t, tokens, 1, yes)                    /* tokens in the history */                         \
  X(int32_t, turns, 1, yes)                     /* completed user turns */                          \
  X(int32_t, chunks_total, 1, yes)                                                                  \
  X(int32_t, chunks_resident, 1, yes)                                                               \
  X(int32_t, chunks_swapped, 1, yes)                                                                \
  X(int32_t, chunks_dropped, 1, yes)                                                                \
  X(uint64_t, kv_resident_bytes, 1, yes)                                                            \
  X(int32_t, chunks_f16, 2, yes)                                                                    \
  X(int32_t, chunks_q8, 2, yes)                                                                     \
  X(int32_t, chunks_q4, 2, yes)                                                                     \
  X(int32_t, chunks_q2, 2, yes)                                                                     \
  X(int32_t, chunks_q3, 3, yes)                                                                     \
  X(int32_t, chunks_shared, 6, yes)             /* resident chunks shared with a fork (counted above too) */

// The member a table's line declares (X for the structs that hold the figures).
#define LLMSVC_STATS_MEMBER(type, name, ...) type name = 0;

}  // namespace llmsvc
