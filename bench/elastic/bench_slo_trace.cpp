// SPDX-License-Identifier: Apache-2.0
// bench_slo_trace MODEL.gguf [--level-profile F] [--plain MODEL.gguf] [--plain-level-profile F] [--out F.json] [--calls N] [--gen N] [--reps N]
//                 [--seed N] [--gap-s S] [--threads N] [--text FILE]
// ElastiLM's SLO trace (issue 23): six apps with the paper's SLOs <TTFT ratio, TPOT ratio>, each
// a persistent raw context its calls continue, calls arriving as a seeded Poisson process per
// app and run in arrival order. Policies on the same trace: llmsvc (the engine chooses the level
// and the prompt's compression from the SLO with this machine's level profile; recovery adapters
// on), llmsvc's choice of level without compression (the whole prompt), always the full model,
// always the smallest level, layer dropping (the fewest least-important layers skipped that the
// weight bytes predict to meet the SLO), and llmsvc's levels without recovery adapters.
//
// Per call and policy, on the reference trajectory (each app's context is its earlier prompts
// and the full model's greedy replies; each policy's prompt is the whole one but for llmsvc's
// compressed ones): TTFT (the prompt's prefill after the context, which is
// evaluated untimed at the policy's configuration) and TPOT (the mean decode step). The
// policies' runs of a call take turns within each of --reps repetitions, and a ratio is the
// median of the repetitions' ratios to the full model's run in the same repetition (paired, so
// that the machine's drift between runs cancels); the SLO is met when both ratios are within
// the app's. Quality: the mean NLL of the full model's greedy reply under the policy's
// configuration (teacher-forced), its top-1 agreement position-wise, and the greedy agreement up
// to the first divergence. Queueing delay is not counted: the SLO is the call's own latency.
// Prints the tables, writes the per-call figures as JSON (--out).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "bench/elastic/held_out.h"
#include "hal/devices/device_registry.h"
#include "policy/kv_chunk_store.h"
#include "policy/planning/level_cost.h"
#include "runtime/core/engine/engine.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/graph/level_profiler.h"
#include "runtime/core/graph/profile_fit.h"
#include "runtime/core/model/model.h"

using namespace llmsvc;

namespace {

struct App {
  const char* name;
  float ttft_ratio, tpot_ratio;  // the SLO, as fractions of the full model's
};
// The apps of ElastiLM's evaluation table, by SLO.
constexpr App kApps[] = {{"A1", 1.0f, 1.0f}, {"A2", 0.8f, 0.9f}, {"A3", 0.6f, 0.8f},
                         {"A4", 0.4f, 0.7f}, {"A5", 0.2f, 0.6f}, {"A6", 0.2f, 0.5f}};
constexpr int kApps_n = static_cast<int>(std::size(kApps));

// The last two need --plain: llmsvc as it chooses on the model without recovery adapters (its
// own level profile), and those levels run with the adapters (their quality were they free).
enum Policy { kLlmsvc, kLevelsOnly, kFull, kSmallest, kLayerDrop, kNoRecovery, kPlain, kPlainLevelsRecovery, kPolicies };
constexpr const char* kPolicyNames[] = {"llmsvc",     "llmsvc-levels-only", "full",         "smallest",
                                        "layer-drop", "llmsvc-no-recovery", "llmsvc-plain", "plain-levels+rcv"};

struct Options {
  std::string model, text = bench::default_text_path(), profile, out;
  std::string plain, plain_profile;  // the same elastic model without recovery adapters, its profile
  int calls = 5, gen = 24, reps = 3, threads = 2, min_prompt = 32, max_prompt = 192;
  unsigned seed = 23;
  double gap_s = 4.0;  // mean gap between an app's calls, simulated seconds
};

struct TraceCall {
  int app = 0, index = 0;  // index: the call's place among its app's calls
  double arrival_s = 0;
  std::vector<int32_t> cut;  // the prompt as cut from the held-out text
};

// Per app, `calls` prompts cut in turn from its own stretch of the held-out tokens (so a
// context continues a text), arriving as a Poisson process; all apps merged by arrival.
std::vector<TraceCall> make_trace(const Options& o, const std::vector<int32_t>& held) {
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(1.0 / o.gap_s);
  std::uniform_int_distribution<int> len(o.min_prompt, o.max_prompt);
  const size_t stretch = held.size() / kApps_n;
  std::vector<TraceCall> trace;
  for (int a = 0; a < kApps_n; ++a) {
    double t = 0;
    size_t at = a * stretch;
    for (int i = 0; i < o.calls; ++i) {
      TraceCall c;
      c.app = a;
      c.index = i;
      c.arrival_s = t += gap(rng);
      const size_t n = std::min<size_t>(len(rng), (a + 1) * stretch - at);
      c.cut.assign(held.begin() + at, held.begin() + at + n);
      at += n;
      trace.push_back(std::move(c));
    }
  }
  std::stable_sort(trace.begin(), trace.end(), [](const TraceCall& x, const TraceCall& y) { return x.arrival_s < y.arrival_s; });
  return trace;
}

// What a policy runs a call at.
struct Config {
  int level = -1;          // Forward::set_level's index (-1: the full model)
  int percent = 100;
  bool recovery = true;
  int skipped = 0;         // layers skipped (the layer-dropping baseline)
  double pred_ttft = 1, pred_tpot = 1;  // predicted ratios to the full model
  bool pred_met = true;
  bool same_as_full() const { return percent == 100 && skipped == 0; }
};

struct Measured {
  double ttft_ms = 0, tpot_ms = 0;
  double nll = 0;        // mean over the reply's tokens
  int agree_prefix = 0;  // reply tokens equal to the greedy choice before the first divergence
  int agree_pos = 0;     // reply tokens equal to the greedy choice, position-wise (teacher-forced)
};

int argmax(const std::vector<float>& v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }

double token_nll(const std::vector<float>& logits, int target) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double s = 0;
  for (float x : logits) s += std::exp(static_cast<double>(x - mx));
  return std::log(s) + mx - logits[target];
}


// Sets the forward to run at `cfg`.
Status apply(Forward& fwd, const Model& m, const Config& cfg, const std::vector<int>& skip_order) {
  if (m.elastic()) LLMSVC_RETURN_IF_ERROR(fwd.set_level(cfg.level));
  fwd.set_recovery(cfg.recovery);
  std::vector<bool> skip(m.config().n_layer, false);
  for (int i = 0; i < cfg.skipped; ++i) skip[skip_order[i]] = true;
  fwd.set_skipped_layers(skip);
  return Status();
}

// One policy's run of a call: its configuration, prompt and sequence, its times per repetition.
struct Trial {
  Config cfg;
  const std::vector<int32_t>* prompt = nullptr;
  std::unique_ptr<policy::KvChunkStore> store;
  std::unique_ptr<policy::KvSequence> seq;
  std::vector<double> ttft, tpot;
  Measured out;
};

// A fresh sequence per trial holding the call's context, evaluated untimed at the trial's
// configuration: skipped layers write no KV (for the levels this is what a continued context
// would hold when its earlier calls ran at the same level; the difference is left out of the
// quality figure).
Status prepare(Forward& fwd, const Model& m, const std::vector<int>& skip_order, const std::vector<int32_t>& context, Trial& t) {
  const ModelConfig& c = m.config();
  t.store = std::make_unique<policy::KvChunkStore>(policy::KvGeometry{c.n_layer, c.n_head_kv, c.head_dim, 16}, 0);
  t.seq = std::make_unique<policy::KvSequence>(*t.store);
  LLMSVC_RETURN_IF_ERROR(apply(fwd, m, t.cfg, skip_order));
  std::vector<float> logits;
  if (!context.empty()) LLMSVC_RETURN_IF_ERROR(fwd.eval(*t.seq, context, 0, false, logits));
  return Status();
}

// One repetition of a trial: the prompt (TTFT) and the reply's tokens one step at a time (TPOT).
// On the first, `reply` empty: the greedy reply of `gen` tokens is generated (the full model's)
// and returned in it; else it is teacher-forced and scored.
Status run_rep(Forward& fwd, const Model& m, const std::vector<int>& skip_order, int n_ctx, Trial& t,
               std::vector<int32_t>& reply, int gen, bool first) {
  LLMSVC_RETURN_IF_ERROR(apply(fwd, m, t.cfg, skip_order));
  if (t.seq->truncate(n_ctx) != n_ctx) return Status(Code::internal, "bench_slo_trace: the context's KV was cut");
  const std::vector<int32_t>& prompt = *t.prompt;
  const int n_prompt = static_cast<int>(prompt.size());
  std::vector<float> logits;
  double t0 = now_s();
  LLMSVC_RETURN_IF_ERROR(fwd.eval(*t.seq, prompt, n_ctx, false, logits));
  t.ttft.push_back(1e3 * (now_s() - t0));
  const bool generate = first && reply.empty();
  bool diverged = false;
  double step_s = 0;
  for (int i = 0; i < gen; ++i) {
    const int best = argmax(logits);
    if (first) {
      if (generate) reply.push_back(best);
      t.out.nll += token_nll(logits, reply[i]) / gen;
      diverged = diverged || best != reply[i];
      t.out.agree_prefix += diverged ? 0 : 1;
      t.out.agree_pos += best == reply[i] ? 1 : 0;
    }
    if (i + 1 == gen) break;
    const int32_t tok[] = {reply[i]};
    t0 = now_s();
    LLMSVC_RETURN_IF_ERROR(fwd.eval(*t.seq, tok, n_ctx + n_prompt + i, false, logits));
    step_s += now_s() - t0;
  }
  t.tpot.push_back(1e3 * step_s / std::max(1, gen - 1));
  return Status();
}

// The median over repetitions of a trial's time over the full model's in the same repetition:
// the trials of a call run in turn within each repetition, so a drift of the machine's speed
// between repetitions cancels out of the ratio.
double paired_ratio(const std::vector<double>& x, const std::vector<double>& full) {
  std::vector<double> r;
  for (size_t i = 0; i < x.size() && i < full.size(); ++i) r.push_back(x[i] / full[i]);
  return profile::median(r);
}

// The layer-dropping baseline's choice: the fewest skipped layers (least important first,
// anchors never) predicted to meet both ratios; all it may skip when none is (predicted
// missed). Predicted from the work left: a decode step reads the layers' and the LM head's
// weight bytes; a prefill computes the LM head for its last token only, so its time is the
// layers' (every layer of these models reads the same bytes).
Config drop_config(const Model& m, int max_skip, double ttft_ratio, double tpot_ratio) {
  const double full = static_cast<double>(m.level_matmul_bytes(-1));
  const int n_layer = m.config().n_layer;
  const double layer = (full - static_cast<double>(m.output_matmul_bytes())) / n_layer;
  Config cfg;
  for (cfg.skipped = 0;; ++cfg.skipped) {
    cfg.pred_ttft = static_cast<double>(n_layer - cfg.skipped) / n_layer;
    cfg.pred_tpot = (full - cfg.skipped * layer) / full;
    cfg.pred_met = cfg.pred_ttft <= ttft_ratio + 1e-9 && cfg.pred_tpot <= tpot_ratio + 1e-9;
    if (cfg.pred_met || cfg.skipped == max_skip) return cfg;
  }
}

// A level's predicted ratios from the profile, for a prompt of n tokens kept of n_full after a
// context of `context` tokens.
void predict_level(const policy::LevelCosts& costs, int percent, int n, int n_full, int context, double ttft_ratio,
                   double tpot_ratio, Config& cfg) {
  const policy::LevelCost& full = costs.levels.back();
  for (const policy::LevelCost& L : costs.levels)
    if (L.percent == percent) {
      cfg.pred_ttft = L.ttft_ms(n, context) / full.ttft_ms(n_full, context);
      cfg.pred_tpot = L.tpot_at(context + n) / full.tpot_at(context + n_full);
    }
  cfg.pred_met = cfg.pred_ttft <= ttft_ratio + 1e-9 && cfg.pred_tpot <= tpot_ratio + 1e-9;
}

std::string decode(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += tok.token_to_piece(id);
  return s;
}

int parse(int argc, char** argv, Options& o) {
  if (argc < 2) return 2;
  o.model = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--level-profile") o.profile = v;
    else if (a == "--plain") o.plain = v;
    else if (a == "--plain-level-profile") o.plain_profile = v;
    else if (a == "--out") o.out = v;
    else if (a == "--text") o.text = v;
    else if (a == "--calls") o.calls = std::stoi(v);
    else if (a == "--gen") o.gen = std::stoi(v);
    else if (a == "--reps") o.reps = std::stoi(v);
    else if (a == "--threads") o.threads = std::stoi(v);
    else if (a == "--seed") o.seed = static_cast<unsigned>(std::stoul(v));
    else if (a == "--gap-s") o.gap_s = std::stod(v);
    else return 2;
  }
  return o.calls > 0 && o.gen > 1 && o.reps > 0 ? 0 : 2;
}

// The level profile at `path` (set to a temporary file when empty) for `m`: this machine's,
// made now when the file is absent.
Result<policy::LevelCosts> level_profile(const Model& m, hal::Device& dev, std::string& path, const std::string& name) {
  if (path.empty()) path = (std::filesystem::temp_directory_path() / name).string();
  if (!std::filesystem::exists(path)) {
    auto costs = profile_levels(m, dev, 5);
    if (!costs.ok()) return costs.status();
    std::ofstream(path) << policy::level_costs_to_json(*costs);
    std::fprintf(stderr, "level profile written to %s\n", path.c_str());
  }
  auto costs = policy::level_costs_from_json(bench::read_text(path));
  if (costs.ok() && costs->model != level_profile_identity(m))
    return Status(Code::invalid_argument, path + " is another model's level profile");
  if (!costs.ok()) return costs;
  return policy::monotone(std::move(costs).value());  // as the engine reads it (LevelSelector)
}

// An engine choosing levels with a profile, one raw context per app, f16 KV (no compression,
// so that the level is the only difference from the full model); its state goes with it.
struct TraceEngine {
  std::unique_ptr<Engine> engine;
  std::vector<std::string> ids;  // per app
  std::filesystem::path state;
  TraceEngine() = default;
  TraceEngine(TraceEngine&&) = default;
  ~TraceEngine() {
    if (!engine) return;
    for (const std::string& id : ids) (void)engine->delete_context(id);
    engine.reset();
    std::error_code ec;
    std::filesystem::remove_all(state, ec);
  }
};

Result<TraceEngine> open_engine(const std::string& model, const std::string& profile, int threads, const std::string& tag) {
  TraceEngine t;
  t.state = std::filesystem::temp_directory_path() / ("bench-slo-" + tag + "-" + std::to_string(::getpid()));
  EngineOptions eo;
  eo.model_path = model;
  eo.n_threads = threads;
  eo.state_dir = t.state.string();
  eo.level_profile = profile;
  eo.kv_ratio = 0;
  eo.kv_swap = false;
  auto engine = Engine::create(eo);
  if (!engine.ok()) return engine.status();
  t.engine = std::move(engine).value();
  for (int a = 0; a < kApps_n; ++a) {
    ContextOptions co;
    co.raw = true;
    auto id = t.engine->create_context(co);
    if (!id.ok()) return id.status();
    t.ids.push_back(*id);
  }
  return t;
}

struct Tally {
  int calls = 0, met = 0, pred_met = 0, agree_prefix = 0, agree_pos = 0, tokens = 0;
  double nll = 0;
  void add(const Config& cfg, const Measured& x, bool met_measured, int gen) {
    ++calls;
    met += met_measured;
    pred_met += cfg.pred_met;
    nll += x.nll;
    agree_prefix += x.agree_prefix;
    agree_pos += x.agree_pos;
    tokens += gen;
  }
};

int fail(const Status& s) { return std::fprintf(stderr, "bench_slo_trace: %s\n", s.message().c_str()), 1; }

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (parse(argc, argv, o) != 0) {
    std::fprintf(stderr,
                 "usage: bench_slo_trace MODEL.gguf [--level-profile F] [--plain MODEL.gguf] [--plain-level-profile F] [--out F.json] [--calls N] [--gen N] [--reps N] "
                 "[--seed N] [--gap-s S] [--threads N] [--text FILE]\n");
    return 2;
  }
  auto dev = hal::open_device("cpu", hal::DeviceOptions{o.threads});
  if (!dev.ok()) return fail(dev.status());
  auto loaded = Model::load(o.model, **dev);
  if (!loaded.ok()) return fail(loaded.status());
  const Model& m = **loaded;
  const ElasticSpec* spec = m.elastic();
  if (!spec || spec->layer_importance.empty()) return fail(Status(Code::invalid_argument, "an elastic model with layer scores"));

  // The level profiles the engines choose with: this machine's.
  auto costs = level_profile(m, **dev, o.profile, "bench-slo-level-profile.json");
  if (!costs.ok()) return fail(costs.status());
  std::unique_ptr<Model> plain;
  Result<policy::LevelCosts> plain_costs = policy::LevelCosts{};
  if (!o.plain.empty()) {
    auto p = Model::load(o.plain, **dev);
    if (!p.ok()) return fail(p.status());
    plain = std::move(p).value();
    if (!plain->elastic() || plain->elastic()->levels != spec->levels)
      return fail(Status(Code::invalid_argument, o.plain + ": not the same elastic levels"));
    plain_costs = level_profile(*plain, **dev, o.plain_profile, "bench-slo-plain-level-profile.json");
    if (!plain_costs.ok()) return fail(plain_costs.status());
  }
  bool active[kPolicies];
  for (int pi = 0; pi < kPolicies; ++pi) active[pi] = plain || (pi != kPlain && pi != kPlainLevelsRecovery);

  const std::string held_text = bench::held_out_text(bench::read_text(o.text));
  const std::vector<int32_t> held = m.tokenizer().encode(held_text, false, false);
  if (held.size() < static_cast<size_t>(kApps_n * o.calls * o.max_prompt))
    return fail(Status(Code::invalid_argument, "the held-out text is too short for this trace"));
  const std::vector<TraceCall> trace = make_trace(o, held);

  // Layers in the order the baseline drops them: least important first, anchors never.
  std::vector<int> skip_order;
  for (int il = 0; il < m.config().n_layer; ++il)
    if (!spec->anchor[il]) skip_order.push_back(il);
  std::stable_sort(skip_order.begin(), skip_order.end(),
                   [&](int x, int y) { return spec->layer_importance[x] < spec->layer_importance[y]; });

  // llmsvc: the engine's choice on each app's own context, greedy; the same on the model
  // without adapters with its own profile (--plain).
  auto engine = open_engine(o.model, o.profile, o.threads, "rcv");
  if (!engine.ok()) return fail(engine.status());
  Result<TraceEngine> plain_engine = plain ? open_engine(o.plain, o.plain_profile, o.threads, "plain") : Result<TraceEngine>(TraceEngine{});
  if (!plain_engine.ok()) return fail(plain_engine.status());

  Forward fwd(m, **dev, Forward::kDefaultBatch);
  fwd.set_mass_tracking(false);
  std::vector<std::vector<int32_t>> context(kApps_n);  // the reference trajectory per app
  Tally tally[kPolicies][kApps_n];
  nlohmann::json calls = nlohmann::json::array();
  int slo_missed[kApps_n] = {}, plain_slo_missed[kApps_n] = {};
  const double t_start = now_s();
  for (const TraceCall& tc : trace) {
    const App& app = kApps[tc.app];
    CallParams p;
    p.max_tokens = o.gen;
    p.slo_ttft_ratio = app.ttft_ratio;
    p.slo_tpot_ratio = app.tpot_ratio;
    const std::string text = decode(m.tokenizer(), tc.cut);
    const auto any = [](std::string_view, int32_t) { return true; };
    CallStats st, pst;
    Status s = engine->engine->call(engine->ids[tc.app], text, p, any, &st);
    if (!s.ok()) return fail(s);
    slo_missed[tc.app] += st.slo_missed;
    if (plain) {
      if (!(s = plain_engine->engine->call(plain_engine->ids[tc.app], text, p, any, &pst)).ok()) return fail(s);
      plain_slo_missed[tc.app] += pst.slo_missed;
    }
    // The whole prompt as the engine tokenizes it for this context (raw: BOS at the start only),
    // and llmsvc's compressed one as it tokenized it.
    const std::vector<int32_t> prompt = m.tokenizer().encode(text, context[tc.app].empty(), true);
    const int n = static_cast<int>(prompt.size()), n_context = static_cast<int>(context[tc.app].size());
    const auto prompt_of = [&](int pi) -> const std::vector<int32_t>& {
      if (pi == kLlmsvc || pi == kNoRecovery) return st.prompt_ids;
      if (pi == kPlain || pi == kPlainLevelsRecovery) return pst.prompt_ids;
      return prompt;
    };

    Config cfg[kPolicies];
    cfg[kLlmsvc].percent = st.level_percent;
    cfg[kLlmsvc].level = spec->level_index(st.level_percent);
    predict_level(*costs, st.level_percent, static_cast<int>(st.prompt_ids.size()), n, n_context, app.ttft_ratio, app.tpot_ratio,
                  cfg[kLlmsvc]);
    const policy::LevelChoice levels_only =
        policy::choose_level(*costs, app.ttft_ratio, app.tpot_ratio, policy::PromptShape{n, 0, n_context}, 1.0, 0.0);
    cfg[kLevelsOnly].percent = spec->levels[static_cast<size_t>(levels_only.index)];
    cfg[kLevelsOnly].level = spec->level_index(cfg[kLevelsOnly].percent);
    predict_level(*costs, cfg[kLevelsOnly].percent, n, n, n_context, app.ttft_ratio, app.tpot_ratio, cfg[kLevelsOnly]);
    cfg[kFull].pred_met = 1.0 <= app.ttft_ratio && 1.0 <= app.tpot_ratio;
    cfg[kSmallest].level = 0;
    cfg[kSmallest].percent = spec->levels[0];
    predict_level(*costs, spec->levels[0], n, n, n_context, app.ttft_ratio, app.tpot_ratio, cfg[kSmallest]);
    cfg[kLayerDrop] = drop_config(m, static_cast<int>(skip_order.size()), app.ttft_ratio, app.tpot_ratio);
    cfg[kNoRecovery] = cfg[kLlmsvc];
    cfg[kNoRecovery].recovery = false;
    if (plain) {
      cfg[kPlain].percent = pst.level_percent;
      cfg[kPlain].level = spec->level_index(pst.level_percent);
      const int n_plain = static_cast<int>(pst.prompt_ids.size());
      predict_level(*plain_costs, pst.level_percent, n_plain, n, n_context, app.ttft_ratio, app.tpot_ratio, cfg[kPlain]);
      cfg[kPlain].recovery = false;
      cfg[kPlainLevelsRecovery] = cfg[kPlain];
      cfg[kPlainLevelsRecovery].recovery = true;
      predict_level(*costs, pst.level_percent, n_plain, n, n_context, app.ttft_ratio, app.tpot_ratio, cfg[kPlainLevelsRecovery]);
    }

    // Every policy's trial of this call, the full model's first: its first repetition makes the
    // reply the others are scored on. A configuration that is the full model's on the whole
    // prompt is the full model's run: measuring it again would only measure the machine's noise.
    std::vector<int32_t> reply;
    Trial trial[kPolicies];
    int same[kPolicies];
    std::vector<int> order;
    for (int pi : {kFull, kLlmsvc, kLevelsOnly, kSmallest, kLayerDrop, kNoRecovery, kPlain, kPlainLevelsRecovery}) {
      if (!active[pi]) continue;
      same[pi] = pi != kFull && cfg[pi].same_as_full() && prompt_of(pi) == prompt ? kFull : pi;
      if (same[pi] != pi) continue;
      trial[pi].cfg = cfg[pi];
      trial[pi].prompt = &prompt_of(pi);
      Status ps = prepare(fwd, m, skip_order, context[tc.app], trial[pi]);
      if (!ps.ok()) return fail(ps);
      order.push_back(pi);
    }
    const int n_ctx = static_cast<int>(context[tc.app].size());
    for (int r = 0; r < o.reps; ++r) {
      for (size_t k = 0; k < order.size(); ++k) {
        // Each repetition starts one trial later, so no policy always runs right after another.
        const int pi = order[r == 0 ? k : (k + static_cast<size_t>(r)) % order.size()];
        Status rs = run_rep(fwd, m, skip_order, n_ctx, trial[pi], reply, o.gen, r == 0);
        if (!rs.ok()) return fail(rs);
      }
    }
    if (Status s = apply(fwd, m, Config{}, skip_order); !s.ok()) return fail(s);
    Measured x[kPolicies];
    double ratio_ttft[kPolicies] = {}, ratio_tpot[kPolicies] = {};
    for (int pi : order) {
      x[pi] = trial[pi].out;
      x[pi].ttft_ms = profile::median(trial[pi].ttft);
      x[pi].tpot_ms = profile::median(trial[pi].tpot);
      ratio_ttft[pi] = paired_ratio(trial[pi].ttft, trial[kFull].ttft);
      ratio_tpot[pi] = paired_ratio(trial[pi].tpot, trial[kFull].tpot);
    }
    for (int pi = 0; pi < kPolicies; ++pi)
      if (active[pi] && same[pi] != pi) {
        x[pi] = x[kFull];
        ratio_ttft[pi] = ratio_tpot[pi] = 1.0;
      }
    nlohmann::json J{{"app", app.name}, {"call", tc.index}, {"arrival_s", tc.arrival_s}, {"prompt_tokens", n},
                     {"context_tokens", context[tc.app].size()},
                     {"engine", {{"level", st.level_percent}, {"prompt_kept", st.prompt_kept}, {"slo_missed", st.slo_missed}, {"ttft_ms", st.ttft_ms},
                                 {"tpot_ms", st.tpot_ms}, {"generated", st.generated_ids.size()}}}};
    if (plain)
      J["plain_engine"] = {{"level", pst.level_percent}, {"prompt_kept", pst.prompt_kept}, {"slo_missed", pst.slo_missed}, {"ttft_ms", pst.ttft_ms}, {"tpot_ms", pst.tpot_ms}};
    for (int pi = 0; pi < kPolicies; ++pi) {
      if (!active[pi]) continue;
      const double rt = ratio_ttft[pi], rp = ratio_tpot[pi];
      const bool met = rt <= app.ttft_ratio + 1e-9 && rp <= app.tpot_ratio + 1e-9;
      tally[pi][tc.app].add(cfg[pi], x[pi], met, o.gen);
      J["policies"][kPolicyNames[pi]] = {{"level", cfg[pi].percent}, {"prompt_tokens", prompt_of(pi).size()},
                                         {"recovery", cfg[pi].recovery}, {"skipped", cfg[pi].skipped},
                                         {"pred_ttft_ratio", cfg[pi].pred_ttft}, {"pred_tpot_ratio", cfg[pi].pred_tpot},
                                         {"pred_met", cfg[pi].pred_met}, {"ttft_ms", x[pi].ttft_ms}, {"tpot_ms", x[pi].tpot_ms},
                                         {"ttft_ratio", rt}, {"tpot_ratio", rp}, {"met", met}, {"nll", x[pi].nll},
                                         {"agree_prefix", x[pi].agree_prefix}, {"agree_pos", x[pi].agree_pos}};
    }
    calls.push_back(J);
    std::fprintf(stderr, "%6.1f s  %s call %d: %3d prompt + %4zu context tokens; llmsvc level %d kept %.2f%s, plain %d%s, drop %d layers\n",
                 now_s() - t_start, app.name, tc.index, n, context[tc.app].size(), st.level_percent, st.prompt_kept,
                 st.slo_missed ? " (slo_missed)" : "", cfg[kPlain].percent, plain && pst.slo_missed ? " (slo_missed)" : "",
                 cfg[kLayerDrop].skipped);
    context[tc.app].insert(context[tc.app].end(), prompt.begin(), prompt.end());
    context[tc.app].insert(context[tc.app].end(), reply.begin(), reply.end());
  }

  // The tables: per policy and app, and over all apps.
  nlohmann::json summary;
  auto cell = [&](int pi, int a, Tally& t) {
    for (int b = 0; b < kApps_n; ++b)
      if (a < 0 || a == b) {
        const Tally& u = tally[pi][b];
        t.calls += u.calls, t.met += u.met, t.pred_met += u.pred_met, t.nll += u.nll;
        t.agree_prefix += u.agree_prefix, t.agree_pos += u.agree_pos, t.tokens += u.tokens;
      }
  };
  std::printf("SLO trace: %d apps x %d calls, %d generated tokens a call, medians of %d; %s\n", kApps_n, o.calls, o.gen, o.reps,
              o.model.c_str());
  std::printf("\nSLO met (measured / predicted), calls of %d\n%-20s", o.calls, "policy");
  for (const App& a : kApps) std::printf(" | %s <%3.0f,%3.0f>", a.name, 100 * a.ttft_ratio, 100 * a.tpot_ratio);
  std::printf(" | all\n");
  for (int pi = 0; pi < kPolicies; ++pi) {
    if (!active[pi]) continue;
    std::printf("%-20s", kPolicyNames[pi]);
    for (int a = 0; a <= kApps_n; ++a) {
      Tally t;
      cell(pi, a == kApps_n ? -1 : a, t);
      std::printf(a == kApps_n ? " | %2d/%2d" : " |   %d / %d     ", t.met, t.pred_met);
      nlohmann::json& S = summary[kPolicyNames[pi]][a == kApps_n ? "all" : kApps[a].name];
      S = {{"calls", t.calls}, {"met", t.met}, {"pred_met", t.pred_met}, {"mean_nll", t.nll / t.calls},
           {"ppl", std::exp(t.nll / t.calls)}, {"agree_prefix", static_cast<double>(t.agree_prefix) / t.tokens},
           {"agree_pos", static_cast<double>(t.agree_pos) / t.tokens}};
    }
    std::printf("\n");
  }
  const char* metrics[][2] = {{"ppl", "perplexity of the full model's reply (teacher-forced)"},
                              {"agree_prefix", "greedy agreement with the full model, up to the first divergence"},
                              {"agree_pos", "top-1 agreement with the full model's reply, position-wise (teacher-forced)"}};
  for (auto& [key, title] : metrics) {
    std::printf("\n%s\n%-20s", title, "policy");
    for (const App& a : kApps) std::printf(" | %8s", a.name);
    std::printf(" |      all\n");
    for (int pi = 0; pi < kPolicies; ++pi) {
      if (!active[pi]) continue;
      std::printf("%-20s", kPolicyNames[pi]);
      for (int a = 0; a <= kApps_n; ++a) std::printf(" | %8.3f", summary[kPolicyNames[pi]][a == kApps_n ? "all" : kApps[a].name][key].get<double>());
      std::printf("\n");
    }
  }
  // The target: where any level can meet the app's SLO (the engine never answered
  // slo_missed), llmsvc meets it on every call with quality above every baseline that meets it.
  for (int pi : {kLlmsvc, kPlain}) {
    if (!active[pi]) continue;
    const int* missed = pi == kLlmsvc ? slo_missed : plain_slo_missed;
    std::printf("\ntarget (%s meets every feasible SLO, lower NLL than each baseline meeting it):\n", kPolicyNames[pi]);
    for (int a = 0; a < kApps_n; ++a) {
      const nlohmann::json& L = summary[kPolicyNames[pi]][kApps[a].name];
      std::string beaten;
      for (int bi : {kFull, kSmallest, kLayerDrop})
        if (summary[kPolicyNames[bi]][kApps[a].name]["met"] == o.calls &&
            summary[kPolicyNames[bi]][kApps[a].name]["mean_nll"] < L["mean_nll"])
          beaten += std::string(" ") + kPolicyNames[bi];
      std::printf("  %s: slo_missed %d/%d; met %d/%d measured, %d/%d predicted; %s\n", kApps[a].name, missed[a], o.calls,
                  L["met"].get<int>(), o.calls, L["pred_met"].get<int>(), o.calls,
                  beaten.empty() ? "no baseline meeting it on every call has a lower NLL" : ("lower NLL and met by:" + beaten).c_str());
    }
  }
  nlohmann::json out{{"model", o.model}, {"profile", o.profile}, {"seed", o.seed}, {"gap_s", o.gap_s}, {"calls_per_app", o.calls},
                     {"gen", o.gen}, {"reps", o.reps}, {"threads", o.threads}, {"summary", summary}, {"calls", calls},
                     {"layer_skip_order", skip_order}, {"wall_s", now_s() - t_start}};
  for (int a = 0; a < kApps_n; ++a) out["slo_missed"][kApps[a].name] = slo_missed[a];
  if (plain) {
    out["plain"] = o.plain;
    out["plain_profile"] = o.plain_profile;
    for (int a = 0; a < kApps_n; ++a) out["plain_slo_missed"][kApps[a].name] = plain_slo_missed[a];
  }
  if (!o.out.empty()) std::ofstream(o.out) << out.dump(1) << "\n";
  return 0;
}
