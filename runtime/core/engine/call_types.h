// SPDX-License-Identifier: Apache-2.0
// The types a call and a context are described with, shared by the engine and by everything
// that carries them (the C API, the daemon's protocol): options, parameters and their rules,
// results and statistics. Plain data; no engine behind them.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/status.h"
#include "runtime/core/engine/message_types.h"
#include "runtime/core/engine/stats_fields.h"
#include "runtime/core/sampler/sampler.h"

namespace llmsvc {

// A context as the engine sees it (loaded or only on storage); its figures are
// LLMSVC_CONTEXT_INFO_FIELDS (stats_fields.h).
struct ContextInfo {
  std::string id;
  bool raw = false;
  bool loaded = false;        // in this engine's memory (else only on storage)
  std::string system_prompt;
  LLMSVC_CONTEXT_INFO_FIELDS(LLMSVC_STATS_MEMBER)
};

struct ContextOptions {
  std::string id;             // empty: generate ("<scope>/": generate in that scope)
  std::string system_prompt;  // chat mode only; empty: the template's default
  bool raw = false;           // prompts go in as they are
  // Chat only: tools the conversation may call (the app's JSON; chat/tool_spec.h normalizes
  // it). The template renders them into the first turn; replies are parsed for calls.
  std::string tools;
  // The LoRA adapter every call of the context runs with (a name the engine offers,
  // EngineOptions::adapters; "": none). Kept with the context.
  std::string adapter;
};

// One streamed piece with the tokens behind it (TokenPieceFn): `text` as PieceFn gets it (may
// be empty: the last piece of a call carries the ids whose text never streamed, the end of turn
// or a stop string's), `token` as PieceFn's, `ids` every token sampled since the previous
// piece, in order, and `logprobs` their log-probabilities when CallParams::logprobs asks.
struct TokenPiece {
  std::string_view text;
  int32_t token = -1;
  std::span<const int32_t> ids;
  std::span<const float> logprobs;  // empty, or one per id
};
// Receives every piece with its token ids; return false to cancel.
using TokenPieceFn = std::function<bool(const TokenPiece& piece)>;

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
  // Besides the call's PieceFn: every piece with its token ids (null: none). With `logprobs`,
  // each id's log-probability under the model's distribution (the softmax of its logits,
  // before penalty, temperature and filters).
  TokenPieceFn on_tokens;
  bool logprobs = false;
  // No prompt: the assistant's reply to the conversation so far, which ends with a user
  // message (Engine::append_messages). Chat contexts only; the prompt must be empty.
  bool reply_only = false;
  // Structured output: the reply is held to a JSON Schema or a GBNF grammar (at most one; ""
  // none): every token is one the constraint allows, the end of the reply comes only once the
  // text is complete, and max_tokens leaves room to complete it. Stop strings are not applied.
  std::string json_schema;
  std::string grammar;
  // The elastic level to run the call at, in per cent (an elastic model's levels, written by
  // `llmsvc elastify`: Model::elastic(); a plain model has one level, 100). 0: the engine
  // chooses (today the full model). A level the model does not have is invalid_argument, naming
  // the levels it has. CallStats::level_percent reports the level the call ran at.
  int32_t level_percent = 0;
  // The share of the prompt's tokens to keep, in (0, 1]: prompt compression drops the least
  // informative words of the user's text (PromptWords) until no more than this share of the
  // prompt's tokens remain, or nothing droppable does. 0: the engine chooses, by the SLO's TTFT
  // ratio when it chooses the level too, else nothing is dropped. The kept text is what the
  // context holds. CallStats::prompt_kept reports the share kept.
  float prompt_keep = 0.0f;
  // The LoRA adapter this call runs with, in place of its context's (a name the engine offers;
  // "": the context's own). The tokens the call evaluates get their K/V from it; a recompute
  // of them later uses the context's adapter.
  std::string adapter;
};

// The rules every CallParams meets, wherever it comes from (the C API's struct, the daemon's
// CALL, the CLI's flags): finite sampling values in their ranges, max_tokens >= 0, SLO ratios
// >= 0, at most kMaxStopStrings stop strings of 1..kMaxStopBytes bytes, a JSON Schema or a
// grammar (not both) of at most kMaxConstraintBytes, level_percent 0 or 1..100 (whether the
// model has that level is the engine's to check), prompt_keep 0 or in (0, 1], an adapter name that is "" or a valid name
// (check_adapter_name). invalid_argument naming the field.
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 256;
inline constexpr size_t kMaxConstraintBytes = 64 * 1024;  // a JSON Schema or a grammar
Status check_call_params(const CallParams& params);
// An adapter's name, spelt as a context id: 1..64 bytes of [A-Za-z0-9._-], not '.' or '..'.
// invalid_argument naming `what`.
Status check_adapter_name(std::string_view name, std::string_view what);
// Parses the C API's and the CLI's adapter list, "NAME=PATH" entries separated by ';' (empty
// entries skipped). invalid_argument naming the entry without '=' or with a bad name.
Result<std::vector<std::pair<std::string, std::string>>> parse_adapter_list(std::string_view text);

enum class FinishReason { none = 0, eos = 1, length = 2, stop = 3, cancelled = 4, context_full = 5 };

// A call's figures are LLMSVC_CALL_STATS_FIELDS (stats_fields.h).
struct CallStats {
  LLMSVC_CALL_STATS_FIELDS(LLMSVC_STATS_MEMBER)
  FinishReason finish = FinishReason::none;
  std::vector<int32_t> prompt_ids;     // what the prompt added (template included)
  std::vector<int32_t> generated_ids;  // what was generated
};

// Receives valid UTF-8 pieces as they complete; return false to cancel.
using PieceFn = std::function<bool(std::string_view piece, int32_t token)>;

// The service's figures are LLMSVC_ENGINE_STATS_FIELDS (stats_fields.h).
struct EngineStats {
  LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_STATS_MEMBER)
};

// Adds one call's figures to a running total: each EngineStats figure whose source is `call`
// gains CallStats' figure of the same name (negative ones count 0). `calls` is the caller's
// to count. Templates, so that only the `call` lines need a CallStats counterpart.
template <class Total, class Call>
void add_call_figures(Total& total, const Call& call) {
#define LLMSVC_ADD_CALL_FIGURE(type, name, since, c, source)                              \
  if constexpr (StatSource::source == StatSource::call) {                                 \
    if constexpr (std::is_integral_v<type>)                                               \
      total.name += static_cast<type>(std::max<decltype(call.name)>(0, call.name));       \
    else                                                                                  \
      total.name += call.name;                                                            \
  }
  LLMSVC_ENGINE_STATS_FIELDS(LLMSVC_ADD_CALL_FIGURE)
#undef LLMSVC_ADD_CALL_FIGURE
}

}  // namespace llmsvc
