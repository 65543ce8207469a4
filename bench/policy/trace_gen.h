// SPDX-License-Identifier: Apache-2.0
// LLMS-style call traces for the context-switch benchmark: N persistent contexts of a few app
// types, Poisson arrivals, and a context-choice pattern (random / markov / gaussian). Seeded and
// deterministic (its own uniform/normal/exponential draws over mt19937_64, not the standard
// library's distributions, whose outputs differ between implementations); serialised to JSON
// so that bench_trace and the llama.cpp peer (llamacpp_trace.py) replay the very same calls.
//
// Texts are real: consecutive slices of one text (tests/data/golden/ppl_text.txt), cut at the
// token boundaries of the model tokenizer's encoding of the whole text, so a slice of n tokens
// re-encodes to about n tokens (exactly, except where BPE merges across a cut). The slices
// wrap to the start when the text runs out (the KJV excerpt holds ~15.6k SmolLM2 tokens).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"

namespace llmsvc {
class Tokenizer;
}

namespace llmsvc::bench {

enum class ContextChoice { random, markov, gaussian };

// An app type: its contexts start with `initial_tokens` of text, then every call adds a
// prompt of `prompt_tokens` and generates up to `gen_tokens` (each drawn +-jitter per use).
struct AppType {
  std::string name;
  int initial_tokens = 0;
  int prompt_tokens = 0;
  int gen_tokens = 0;
};

// LLMS's Table 3 apps scaled down to a 2048-token model (chat, summarizer, keyboard,
// translation, reading/QA); see trace_gen.cpp for the figures.
const std::vector<AppType>& default_apps();

struct TraceContext {
  std::string id;          // "c00", "c01", ...
  int app = 0;             // index into Trace::apps
  std::string initial_text;
  int initial_tokens = 0;  // tokens of initial_text in the whole-text encoding
  // The context's size averaged over every step of the trace (generated = max_tokens, an
  // upper bound): what the budget rules of bench_trace and the peer are computed from.
  double mean_tokens = 0;
};

struct TraceCall {
  int context = 0;
  double interarrival_s = 0;  // since the previous call: exponential (Poisson arrivals); 0 for the first
  double arrival_s = 0;       // sum of the inter-arrival times so far
  std::string prompt;
  int prompt_tokens = 0;
  int max_tokens = 0;
  int tokens_before = 0;      // the context's estimated size before the call
  // Non-empty: the context would pass max_context_tokens, so the app starts it over from this
  // text before the call (replays do that unmeasured, and leave the call out of the summary).
  std::string restart_text;
};

struct Trace {
  uint64_t seed = 0;
  ContextChoice choice = ContextChoice::markov;
  double mean_interarrival_s = 0;
  int max_context_tokens = 0;
  uint64_t f16_bytes_per_token = 0;  // the model's KV at f16: n_layer x 2 x n_head_kv x head_dim x 2
  std::vector<AppType> apps;
  std::vector<TraceContext> contexts;
  std::vector<TraceCall> calls;
  // markov only: per context, its likely successors and their probabilities (the uniform rest
  // is markov_rest / n over every context, on top).
  std::vector<std::vector<std::pair<int, double>>> successors;
  double markov_rest = 0;
};

struct TraceOptions {
  int n_contexts = 16;
  int n_calls = 200;
  ContextChoice choice = ContextChoice::markov;
  uint64_t seed = 1;
  double mean_interarrival_s = 1.0;
  int max_context_tokens = 1800;  // below the model's 2048 with room for the template's tokens
  double jitter = 0.25;           // lengths drawn uniformly in [1 - jitter, 1 + jitter] x the app's
  int markov_successors = 3;      // likely successors per context
  double markov_rest = 0.1;       // probability mass spread uniformly over all contexts
};

Result<ContextChoice> parse_context_choice(const std::string& name);
const char* context_choice_name(ContextChoice c);

// `text` is the source text; `tok` the model's tokenizer (sizes are counted in its tokens).
Result<Trace> generate_trace(const TraceOptions& options, const std::string& text, const Tokenizer& tok,
                             uint64_t f16_bytes_per_token);

nlohmann::json trace_to_json(const Trace& trace);
Result<Trace> trace_from_json(const nlohmann::json& j);

// fraction x the sum over contexts of their f16 KV bytes at their mean size.
uint64_t budget_for_fraction(const Trace& trace, double fraction);
// The least budget every call fits in: the largest context the trace reaches (its call
// included) at f16, plus two chunks of 16 tokens for the estimate's slack (a slice may
// re-encode to a token more, a context's first call adds BOS). A smaller one makes calls fail
// with out-of-memory under the policies that keep f16 (the running context is pinned).
uint64_t min_budget_bytes(const Trace& trace);

}  // namespace llmsvc::bench
