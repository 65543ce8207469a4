// SPDX-License-Identifier: Apache-2.0
// LLMS-style trace generation and its JSON form (see trace_gen.h).
#include "bench/policy/trace_gen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>

#include <nlohmann/json.hpp>

#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc::bench {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AppType, name, initial_tokens, prompt_tokens, gen_tokens)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TraceContext, id, app, initial_text, initial_tokens, mean_tokens)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TraceCall, context, interarrival_s, arrival_s, prompt, prompt_tokens, max_tokens,
                                   tokens_before, restart_text)

namespace {

constexpr int kTraceVersion = 1;

// Uniform, exponential and normal draws written out, so a seed gives the same trace with any
// standard library (std::*_distribution outputs are implementation-defined; mt19937_64's are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  double uniform() { return static_cast<double>(g_() >> 11) * 0x1.0p-53; }  // [0, 1)
  int below(int n) { return std::min(n - 1, static_cast<int>(uniform() * n)); }
  double exponential(double mean) { return -mean * std::log1p(-uniform()); }
  double normal() {  // Box-Muller
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 g_;
};

// The text, cut at the token boundaries of its own encoding: take(n) is the next n tokens'
// text, consecutive slices, starting over at the beginning when the text runs out.
class TextSource {
 public:
  static Result<TextSource> create(const std::string& text, const Tokenizer& tok) {
    TextSource s;
    s.text_ = text;
    std::string spelled;
    for (int32_t id : tok.encode(text, false, false)) {
      s.offsets_.push_back(spelled.size());
      spelled += tok.token_to_piece(id);
    }
    s.offsets_.push_back(spelled.size());
    // Byte-level BPE spells its input back exactly; a tokenizer that does not (a SentencePiece
    // space prefix) would make the offsets wrong, so refuse it rather than cut text wrongly.
    if (spelled != text) return Status(Code::invalid_argument, "trace: the tokenizer's pieces do not spell the text back");
    if (s.n_tokens() < 64) return Status(Code::invalid_argument, "trace: the text holds fewer than 64 tokens");
    return s;
  }
  int n_tokens() const { return static_cast<int>(offsets_.size()) - 1; }
  std::string take(int n) {
    n = std::min(n, n_tokens());
    if (next_ + n > n_tokens()) next_ = 0;
    const size_t a = offsets_[next_], b = offsets_[next_ + n];
    next_ += n;
    return text_.substr(a, b - a);
  }

 private:
  std::string text_;
  std::vector<size_t> offsets_;  // byte offset of each token, then the text's end
  int next_ = 0;
};

// Per context: k distinct other contexts drawn uniformly, with weights uniform in [0.5, 1.5)
// normalised to 1 - rest (the uniform rest over every context is added when sampling).
std::vector<std::vector<std::pair<int, double>>> markov_successors(Rng& rng, int n, int k, double rest) {
  k = std::min(k, n - 1);
  std::vector<std::vector<std::pair<int, double>>> out(n);
  for (int i = 0; i < n; ++i) {
    std::vector<int> others;
    for (int j = 0; j < n; ++j)
      if (j != i) others.push_back(j);
    double sum = 0;
    for (int m = 0; m < k; ++m) {  // partial Fisher-Yates
      std::swap(others[m], others[m + rng.below(static_cast<int>(others.size()) - m)]);
      const double w = 0.5 + rng.uniform();
      out[i].push_back({others[m], w});
      sum += w;
    }
    for (auto& [j, w] : out[i]) w *= (1 - rest) / sum;
  }
  return out;
}

int choose_context(Rng& rng, const Trace& t, int prev) {
  const int n = static_cast<int>(t.contexts.size());
  switch (t.choice) {
    case ContextChoice::random: return rng.below(n);
    case ContextChoice::gaussian: {
      // Around the middle, sigma n/6 (the range is +-3 sigma), clamped to the ends.
      const double x = (n - 1) / 2.0 + n / 6.0 * rng.normal();
      return std::clamp(static_cast<int>(std::lround(x)), 0, n - 1);
    }
    case ContextChoice::markov: {
      if (prev < 0) return rng.below(n);
      double u = rng.uniform();
      for (const auto& [j, p] : t.successors[prev]) {
        if (u < p) return j;
        u -= p;
      }
      return rng.below(n);  // the uniform rest
    }
  }
  return 0;
}

}  // namespace

const std::vector<AppType>& default_apps() {
  // Shaped after LLMS's Table 3 (long-context readers and summarizers, mid-size chats and
  // translators, tiny keyboard contexts), scaled to a 2048-token model.
  static const std::vector<AppType> apps = {
      {"chat", 384, 48, 32},
      {"summarizer", 768, 128, 32},
      {"keyboard", 128, 8, 8},
      {"translation", 256, 64, 64},
      {"reading_qa", 1024, 32, 24},
  };
  return apps;
}

Result<ContextChoice> parse_context_choice(const std::string& name) {
  for (ContextChoice c : {ContextChoice::random, ContextChoice::markov, ContextChoice::gaussian})
    if (name == context_choice_name(c)) return c;
  return Status(Code::invalid_argument, "trace: unknown context choice '" + name + "' (random, markov, gaussian)");
}

const char* context_choice_name(ContextChoice c) {
  switch (c) {
    case ContextChoice::random: return "random";
    case ContextChoice::markov: return "markov";
    case ContextChoice::gaussian: return "gaussian";
  }
  return "?";
}

Result<Trace> generate_trace(const TraceOptions& o, const std::string& text, const Tokenizer& tok,
                             uint64_t f16_bytes_per_token) {
  if (o.n_contexts < 1 || o.n_calls < 0 || o.max_context_tokens < 64 || o.jitter < 0 || o.jitter >= 1 ||
      o.mean_interarrival_s < 0 || o.markov_rest < 0 || o.markov_rest > 1)
    return Status(Code::invalid_argument, "trace: bad options");
  auto src = TextSource::create(text, tok);
  if (!src.ok()) return src.status();
  Rng rng(o.seed);
  Trace t;
  t.seed = o.seed;
  t.choice = o.choice;
  t.mean_interarrival_s = o.mean_interarrival_s;
  t.max_context_tokens = o.max_context_tokens;
  t.f16_bytes_per_token = f16_bytes_per_token;
  t.apps = default_apps();
  auto draw = [&](int base) {
    return std::max(1, static_cast<int>(std::lround(base * (1 - o.jitter + 2 * o.jitter * rng.uniform()))));
  };
  // A start leaves room for one call of the app's largest size.
  auto initial_size = [&](const AppType& a) {
    const int room = o.max_context_tokens - static_cast<int>(std::ceil((a.prompt_tokens + a.gen_tokens) * (1 + o.jitter)));
    return std::clamp(draw(a.initial_tokens), 1, std::max(1, room));
  };
  std::vector<int> size(o.n_contexts);
  for (int i = 0; i < o.n_contexts; ++i) {
    TraceContext c;
    char id[16];
    std::snprintf(id, sizeof id, "c%02d", i);
    c.id = id;
    c.app = i % static_cast<int>(t.apps.size());
    c.initial_tokens = size[i] = initial_size(t.apps[c.app]);
    c.initial_text = src->take(c.initial_tokens);
    t.contexts.push_back(std::move(c));
  }
  if (o.choice == ContextChoice::markov) {
    t.successors = markov_successors(rng, o.n_contexts, o.markov_successors, o.markov_rest);
    t.markov_rest = o.markov_rest;
  }
  std::vector<double> size_sum(o.n_contexts, 0);
  double arrival = 0;
  int prev = -1;
  for (int k = 0; k < o.n_calls; ++k) {
    TraceCall call;
    call.context = choose_context(rng, t, prev);
    prev = call.context;
    const AppType& app = t.apps[t.contexts[call.context].app];
    call.interarrival_s = k == 0 ? 0.0 : rng.exponential(o.mean_interarrival_s);  // the first call opens the trace
    arrival += call.interarrival_s;
    call.arrival_s = arrival;
    call.prompt_tokens = draw(app.prompt_tokens);
    call.max_tokens = draw(app.gen_tokens);
    int& n = size[call.context];
    if (n + call.prompt_tokens + call.max_tokens > o.max_context_tokens) {
      n = initial_size(app);
      call.restart_text = src->take(n);
    }
    call.tokens_before = n;
    call.prompt = src->take(call.prompt_tokens);
    for (int i = 0; i < o.n_contexts; ++i) size_sum[i] += size[i];
    n += call.prompt_tokens + call.max_tokens;
    t.calls.push_back(std::move(call));
  }
  for (int i = 0; i < o.n_contexts; ++i)
    t.contexts[i].mean_tokens = o.n_calls > 0 ? size_sum[i] / o.n_calls : t.contexts[i].initial_tokens;
  return t;
}

nlohmann::json trace_to_json(const Trace& t) {
  return {{"version", kTraceVersion},
          {"seed", t.seed},
          {"choice", context_choice_name(t.choice)},
          {"mean_interarrival_s", t.mean_interarrival_s},
          {"max_context_tokens", t.max_context_tokens},
          {"f16_bytes_per_token", t.f16_bytes_per_token},
          {"apps", t.apps},
          {"contexts", t.contexts},
          {"calls", t.calls},
          {"successors", t.successors},
          {"markov_rest", t.markov_rest}};
}

Result<Trace> trace_from_json(const nlohmann::json& j) {
  try {
    if (j.at("version").get<int>() != kTraceVersion) return Status(Code::invalid_argument, "trace: unknown version");
    Trace t;
    auto choice = parse_context_choice(j.at("choice").get<std::string>());
    if (!choice.ok()) return choice.status();
    t.choice = *choice;
    j.at("seed").get_to(t.seed);
    j.at("mean_interarrival_s").get_to(t.mean_interarrival_s);
    j.at("max_context_tokens").get_to(t.max_context_tokens);
    j.at("f16_bytes_per_token").get_to(t.f16_bytes_per_token);
    j.at("apps").get_to(t.apps);
    j.at("contexts").get_to(t.contexts);
    j.at("calls").get_to(t.calls);
    j.at("successors").get_to(t.successors);
    j.at("markov_rest").get_to(t.markov_rest);
    const int n = static_cast<int>(t.contexts.size());
    if (n == 0) return Status(Code::invalid_argument, "trace: no contexts");
    for (const TraceContext& c : t.contexts)
      if (c.app < 0 || c.app >= static_cast<int>(t.apps.size())) return Status(Code::invalid_argument, "trace: a context names no app");
    for (const TraceCall& c : t.calls)
      if (c.context < 0 || c.context >= n) return Status(Code::invalid_argument, "trace: a call names no context");
    return t;
  } catch (const nlohmann::json::exception& e) {
    return Status(Code::invalid_argument, std::string("trace: ") + e.what());
  }
}

uint64_t budget_for_fraction(const Trace& t, double fraction) {
  double tokens = 0;
  for (const TraceContext& c : t.contexts) tokens += c.mean_tokens;
  return static_cast<uint64_t>(fraction * tokens * static_cast<double>(t.f16_bytes_per_token));
}

uint64_t min_budget_bytes(const Trace& t) {
  int most = 0;
  for (const TraceContext& c : t.contexts) most = std::max(most, c.initial_tokens);
  for (const TraceCall& c : t.calls) most = std::max(most, c.tokens_before + c.prompt_tokens + c.max_tokens);
  const int chunks = (most + 15) / 16 + 2;
  return static_cast<uint64_t>(chunks) * 16 * t.f16_bytes_per_token;
}

}  // namespace llmsvc::bench
