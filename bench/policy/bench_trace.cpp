// SPDX-License-Identifier: Apache-2.0
// bench_trace: replays an LLMS-style trace (trace_gen.h) through llmsvc::Engine once per
// memory-policy preset (llmsvc's policy, the LLMS baselines, ablations), each with a fresh
// engine and state directory, and reports the switch-in latency of every call.
//
// Each context first gets its initial text (a prefill-only call, unmeasured); then the trace's
// calls run in order (raw contexts, greedy, max_tokens from the app), each no earlier than its
// arrival time x --time-scale (0: back to back). A call's switch-in (CallStats::switch_in_ms)
// covers bringing its context back and reserving room for its prompt, where evictions happen.
//
//   bench_trace [--trace FILE | --contexts 16 --calls 200 --choice markov --seed 1
//                --interarrival 1.0 --max-context-tokens 1800] [--save-trace FILE]
//               [--presets llmsvc,lmk,... | all | none] [--budget-bytes B | --budget-fraction 0.25]
//               [--switch-profile FILE] [--state-dir DIR] [--threads 2] [--n-ctx 2048]
//               [--time-scale 1] [--out FILE] [--model PATH] [--text PATH] [--via engine|llmsvcd|engine,llmsvcd]
//               [--rounds 1] [--device cpu|opencl|...]
//
// --device runs the model there (EngineOptions::device; the daemon's `devices`). On a GPU whose
// KV the host cannot read, compression is off (the engine says so) and swap copies chunks
// through the device's transfer queue, whatever the preset.
//
// --via llmsvcd replays it on a real llmsvcd (started in the state directory with the budget,
// the preset's kv_ratio and the switch profile) through llmsvc.h, as an app; only the llmsvc
// preset (the daemon's policy). Its records carry the engine's own switch-in figures, from
// inside the daemon, and the app's wall time per call; both vias in one run also print the
// daemon's mean switch-in over the engine's. --rounds N replays every (preset, via) N times,
// taking turns, so that a slow stretch of a shared machine does not land on one side only; the
// daemon's figure is then the ratio of the two medians over the rounds' means (nearest rank:
// with an even N, the lower middle; use an odd N).
//
// Output: {"trace": {...}, "runs": [one object per preset]} (llamacpp_trace.py writes runs of
// the same schema). Exit 3 when some call failed (its record says why), after writing it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/file_io.h"
#include "bench/policy/trace_gen.h"
#include "policy/kv_chunk_store.h"
#include "bench/policy/trace_target.h"
#include "runtime/core/model/default_model.h"
#include "runtime/core/engine/engine.h"
#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/model/model_config.h"
#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using Eviction = EngineOptions::Eviction;

double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// A memory policy as engine options: llmsvc's own, the LLMS paper's baselines, and ablations
// that each take one part of llmsvc's policy away.
struct Preset {
  const char* name;
  bool kv_swap;
  double kv_ratio;  // <= 0: f16
  Eviction eviction;
  bool aot_swap_out;
  bool pipeline;  // swap/recompute split with the switch-cost profile
};

constexpr Preset kPresets[] = {
    {"llmsvc", true, 0.5, Eviction::lctru, true, true},
    {"lmk", false, 0, Eviction::whole_context, false, false},       // kill and recompute
    {"whole_swap", true, 0, Eviction::whole_context, false, false}, // swap whole contexts
    {"vllm_s", true, 0, Eviction::lru, false, false},               // chunk swap
    {"vllm_sq", true, 1.0, Eviction::lru, false, false},            // chunk swap, int8 chunks
    {"no_compression", true, 0, Eviction::lctru, true, true},
    {"no_pipeline", true, 0.5, Eviction::lctru, true, false},
    {"no_lctru_aot", true, 0.5, Eviction::lru, false, true},
};

const char* eviction_name(Eviction e) {
  switch (e) {
    case Eviction::lctru: return "lctru";
    case Eviction::lru: return "lru";
    case Eviction::whole_context: return "whole_context";
  }
  return "?";
}

const Preset* find_preset(const std::string& name) {
  for (const Preset& p : kPresets)
    if (name == p.name) return &p;
  return nullptr;
}

struct Args {
  std::string model = default_model_path();
  std::string text = std::string(LLMSVC_TEST_DATA) + "/golden/ppl_text.txt";
  std::string trace_in, trace_out, out, switch_profile;
  std::string state_dir = "/tmp/llmsvc-bench-trace";
  std::string presets = "llmsvc";
  TraceOptions gen;
  uint64_t budget_bytes = 0;
  double budget_fraction = 0.25;
  int threads = 2, n_ctx = 2048;
  double time_scale = 1.0;
  std::string via = "engine";
  std::string device;  // "" the default (the CPU); e.g. "opencl"
  int rounds = 1;
};

// Nearest-rank percentile of an unsorted sample (llamacpp_trace.py uses the same rule).
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

Json latency_summary(const std::vector<double>& ms) {
  double sum = 0;
  for (double x : ms) sum += x;
  return {{"n", ms.size()},
          {"mean", ms.empty() ? 0.0 : sum / static_cast<double>(ms.size())},
          {"p50", percentile(ms, 50)},
          {"p99", percentile(ms, 99)}};
}

Status fail_on(const Status& s, const std::string& what) {
  return s.ok() ? s : Status(s.code(), what + ": " + s.message());
}

// The preset's target: a fresh engine in this process, or (via_daemon) a fresh llmsvcd, which
// runs llmsvc's own policy only.
Result<std::unique_ptr<TraceTarget>> make_target(const Preset& p, const Args& a, uint64_t budget, bool via_daemon,
                                                 const std::string& state, bool with_profile) {
  if (via_daemon) {
    DaemonTargetOptions d;
    d.dir = state;
    d.model = a.model;
    d.switch_profile = with_profile ? a.switch_profile : "";
    d.kv_budget_bytes = budget;
    d.kv_ratio = p.kv_ratio;
    d.threads = a.threads;
    d.n_ctx = a.n_ctx;
    d.device = a.device;
    return daemon_target(d);
  }
  EngineOptions o;
  o.model_path = a.model;
  o.n_threads = a.threads;
  o.device = a.device;
  o.n_ctx = a.n_ctx;
  o.kv_budget_bytes = budget;
  o.kv_ratio = p.kv_ratio;
  o.kv_swap = p.kv_swap;
  o.state_dir = state;
  o.eviction = p.eviction;
  o.aot_swap_out = p.aot_swap_out;
  o.swap_recompute_pipeline = p.pipeline;
  if (with_profile) o.switch_profile = a.switch_profile;
  auto created = Engine::create(o);
  if (!created.ok()) return fail_on(created.status(), "engine");
  return engine_target(std::move(created).value());
}

Result<Json> run_preset(const Trace& trace, const Preset& p, const Args& a, uint64_t budget, bool via_daemon,
                        int* failed_calls) {
  const std::string state = a.state_dir + "/" + p.name + (via_daemon ? "-llmsvcd" : "");
  LLMSVC_RETURN_IF_ERROR(fileio::remove_tree(state));
  LLMSVC_RETURN_IF_ERROR(fileio::make_dirs(state));
  const bool with_profile = p.pipeline && p.kv_swap && !a.switch_profile.empty();
  if (p.pipeline && p.kv_swap && !with_profile)
    std::fprintf(stderr, "bench_trace: %s without --switch-profile: switch-in loads every swapped chunk\n", p.name);
  auto made = make_target(p, a, budget, via_daemon, state, with_profile);
  if (!made.ok()) return made.status();
  TraceTarget& e = **made;

  const auto t_warm = Clock::now();
  for (const TraceContext& c : trace.contexts)
    LLMSVC_RETURN_IF_ERROR(fail_on(e.start_context(c.id, c.initial_text), "start " + c.id));
  e.settle();  // the measured phase starts with the warm-up's swap-out on storage
  const double warmup_s = ms_between(t_warm, Clock::now()) / 1e3;
  const TargetFigures before = e.figures();

  Json calls = Json::array();
  std::vector<double> all_ms, switch_ms, app_ms;  // app_ms: the caller's wall time less prefill and decode
  int prev = static_cast<int>(trace.contexts.size()) - 1;  // the warm-up's last context
  int restarts = 0, failed = 0;
  int64_t loaded = 0, recomputed = 0, tokens_recomputed = 0;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < trace.calls.size(); ++i) {
    const TraceCall& tc = trace.calls[i];
    const TraceContext& ctx = trace.contexts[tc.context];
    const auto due = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(tc.arrival_s * a.time_scale));
    std::this_thread::sleep_until(due);
    const bool restart = !tc.restart_text.empty();
    Json rec = {{"i", i}, {"context", tc.context}, {"switch", tc.context != prev}, {"restart", restart}};
    prev = tc.context;
    Status s = Status::Ok();
    if (restart) {  // the app starts this context over: unmeasured, like the warm-up
      ++restarts;
      s = fail_on(e.delete_context(ctx.id), "delete " + ctx.id);
      if (s.ok()) s = fail_on(e.start_context(ctx.id, tc.restart_text), "restart " + ctx.id);
    }
    const auto start = Clock::now();
    // How long the call waited for the previous ones (arrivals replayed in time only).
    rec["queued_ms"] = a.time_scale > 0 ? std::max(0.0, ms_between(due, start)) : 0.0;
    TargetCall st;
    if (s.ok()) s = e.call(ctx.id, tc.prompt, tc.max_tokens, &st);
    rec.update({{"switch_in_ms", st.switch_in_ms}, {"chunks_loaded", st.chunks_loaded},
                {"chunks_recomputed", st.chunks_recomputed}, {"prefill_ms", st.prefill_ms}, {"decode_ms", st.decode_ms},
                {"wall_ms", st.wall_ms}, {"prompt_tokens", st.prompt_tokens}, {"generated_tokens", st.generated_tokens},
                {"context_tokens", st.context_tokens}});
    if (!via_daemon)  // llmsvc.h does not carry these
      rec.update({{"tokens_recomputed", st.tokens_recomputed}, {"load_failures", st.load_failures},
                  {"swapped_out", st.swapped_out}});
    if (!s.ok()) {
      rec["error"] = s.message();
      ++failed;
    } else if (!restart) {  // a restarted context was just prefilled: not a switch to measure
      all_ms.push_back(st.switch_in_ms);
      app_ms.push_back(st.wall_ms - st.prefill_ms - st.decode_ms);
      if (rec["switch"].get<bool>()) switch_ms.push_back(st.switch_in_ms);
      loaded += st.chunks_loaded;
      recomputed += st.chunks_recomputed;
      tokens_recomputed += std::max(0, st.tokens_recomputed);
    }
    calls.push_back(std::move(rec));
  }
  const double wall_s = ms_between(t0, Clock::now()) / 1e3;
  e.settle();
  const TargetFigures after = e.figures();
  made->reset();  // the daemon stops before its state goes
  (void)fileio::remove_tree(state);
  *failed_calls += failed;
  return Json{{"policy", p.name},
              {"engine", via_daemon ? "llmsvcd" : "llmsvc"},
              {"options", {{"kv_swap", p.kv_swap}, {"kv_ratio", p.kv_ratio}, {"eviction", eviction_name(p.eviction)},
                           {"aot_swap_out", p.aot_swap_out}, {"swap_recompute_pipeline", p.pipeline},
                           {"switch_profile", with_profile ? Json(a.switch_profile) : Json(nullptr)}}},
              {"n_contexts", trace.contexts.size()},
              {"n_calls", trace.calls.size()},
              {"budget_bytes", budget},
              {"switch_in_ms", {{"all", latency_summary(all_ms)}, {"switches", latency_summary(switch_ms)}}},
              // The caller's wall time less the engine's prefill and decode: switch-in, the
              // call's own bookkeeping (history write, compression, queueing its swap-out)
              // and, through llmsvcd, the round trip.
              {"wall_minus_compute_ms", latency_summary(app_ms)},
              {"chunks_loaded", loaded},
              {"chunks_recomputed", recomputed},
              {"tokens_recomputed", via_daemon ? Json(nullptr) : Json(tokens_recomputed)},
              {"kv_peak_bytes", after.kv_peak_bytes},
              {"kv_evictions", via_daemon ? Json(nullptr) : Json(after.kv_evictions - before.kv_evictions)},
              {"swap_out_bytes", after.swap_out_bytes - before.swap_out_bytes},
              {"swap_out_deferred", via_daemon ? Json(nullptr) : Json(after.swap_out_deferred - before.swap_out_deferred)},
              {"restarts", restarts},
              {"failed_calls", failed},
              {"warmup_s", warmup_s},
              {"wall_s", wall_s},
              {"calls", std::move(calls)}};
}

// The tokenizer (trace texts are sized in its tokens) and the f16 KV bytes per token, as the
// engine's chunk store accounts them, read from the GGUF's metadata without loading weights.
struct ModelFacts {
  std::unique_ptr<Tokenizer> tokenizer;
  uint64_t f16_bytes_per_token = 0;
};

Result<ModelFacts> read_model_facts(const std::string& path) {
  auto file = gguf::GgufFile::open(path);
  if (!file.ok()) return file.status();
  auto cfg = read_model_config(**file);
  if (!cfg.ok()) return cfg.status();
  auto tok = Tokenizer::from_gguf(**file);
  if (!tok.ok()) return tok.status();
  const policy::KvGeometry g{cfg->n_layer, cfg->n_head_kv, cfg->head_dim, 16};
  return ModelFacts{std::move(tok).value(), g.chunk_bytes() / static_cast<uint64_t>(g.chunk_tokens)};
}

Result<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(Code::io, "cannot read " + path);
  return std::string{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

Result<Trace> load_or_generate(const Args& a) {
  if (!a.trace_in.empty()) {
    auto text = read_text(a.trace_in);
    if (!text.ok()) return text.status();
    const Json j = Json::parse(*text, nullptr, false);
    if (j.is_discarded()) return Status(Code::invalid_argument, a.trace_in + ": not JSON");
    return trace_from_json(j);
  }
  auto facts = read_model_facts(a.model);
  if (!facts.ok()) return facts.status();
  auto text = read_text(a.text);
  if (!text.ok()) return text.status();
  return generate_trace(a.gen, *text, *facts->tokenizer, facts->f16_bytes_per_token);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int usage(const std::string& why) {
  std::fprintf(stderr, "bench_trace: %s (see the comment at the top of bench/policy/bench_trace.cpp)\n", why.c_str());
  return 2;
}

int main_impl(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return usage(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--model") a.model = v;
    else if (k == "--text") a.text = v;
    else if (k == "--trace") a.trace_in = v;
    else if (k == "--save-trace") a.trace_out = v;
    else if (k == "--out") a.out = v;
    else if (k == "--switch-profile") a.switch_profile = v;
    else if (k == "--state-dir") a.state_dir = v;
    else if (k == "--presets") a.presets = v;
    else if (k == "--contexts") a.gen.n_contexts = std::atoi(v.c_str());
    else if (k == "--calls") a.gen.n_calls = std::atoi(v.c_str());
    else if (k == "--seed") a.gen.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--interarrival") a.gen.mean_interarrival_s = std::atof(v.c_str());
    else if (k == "--max-context-tokens") a.gen.max_context_tokens = std::atoi(v.c_str());
    else if (k == "--choice") {
      auto c = parse_context_choice(v);
      if (!c.ok()) return usage(c.status().message());
      a.gen.choice = *c;
    } else if (k == "--budget-bytes") a.budget_bytes = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--budget-fraction") a.budget_fraction = std::atof(v.c_str());
    else if (k == "--threads") a.threads = std::atoi(v.c_str());
    else if (k == "--n-ctx") a.n_ctx = std::atoi(v.c_str());
    else if (k == "--time-scale") a.time_scale = std::atof(v.c_str());
    else if (k == "--via") a.via = v;
    else if (k == "--device") a.device = v;
    else if (k == "--rounds") a.rounds = std::atoi(v.c_str());
    else return usage("unknown argument " + k);
  }
  if (a.threads < 1 || a.n_ctx < 64 || a.time_scale < 0 || a.rounds < 1)
    return usage("need --threads >= 1, --n-ctx >= 64, --time-scale >= 0, --rounds >= 1");
  std::vector<const Preset*> presets;
  const std::vector<std::string> names = a.presets == "all" ? std::vector<std::string>{} : split_commas(a.presets);
  if (a.presets == "all")
    for (const Preset& p : kPresets) presets.push_back(&p);
  for (const std::string& n : names) {
    if (n == "none") continue;
    const Preset* p = find_preset(n);
    if (p == nullptr) return usage("unknown preset " + n);
    presets.push_back(p);
  }

  std::vector<bool> vias;  // false: the engine in process; true: llmsvcd
  for (const std::string& v : split_commas(a.via)) {
    if (v != "engine" && v != "llmsvcd") return usage("--via takes engine, llmsvcd or both, not " + v);
    vias.push_back(v == "llmsvcd");
  }
  if (vias.empty()) return usage("--via needs engine, llmsvcd or both");
  for (const Preset* p : presets) {
    if (std::find(vias.begin(), vias.end(), true) != vias.end() && std::string(p->name) != "llmsvc")
      return usage(std::string("llmsvcd runs llmsvc's own policy only, not ") + p->name);
  }

  auto trace = load_or_generate(a);
  if (!trace.ok()) {
    std::fprintf(stderr, "bench_trace: %s\n", trace.status().message().c_str());
    return 1;
  }
  const Json trace_json = trace_to_json(*trace);
  if (!a.trace_out.empty()) {
    if (Status s = fileio::write_atomic(a.trace_out, trace_json.dump(1) + "\n"); !s.ok()) {
      std::fprintf(stderr, "bench_trace: %s\n", s.message().c_str());
      return 1;
    }
  }
  const uint64_t asked = a.budget_bytes > 0 ? a.budget_bytes : budget_for_fraction(*trace, a.budget_fraction);
  const uint64_t budget = std::max(asked, min_budget_bytes(*trace));  // else calls fail for want of room
  Json out = {{"trace", {{"choice", trace_json["choice"]}, {"seed", trace->seed}, {"n_contexts", trace->contexts.size()},
                         {"n_calls", trace->calls.size()}, {"f16_bytes_per_token", trace->f16_bytes_per_token}}},
              {"budget_bytes", budget},
              {"device", a.device.empty() ? "cpu" : a.device},
              {"budget_asked_bytes", asked},
              {"budget_fraction", a.budget_bytes > 0 ? Json(nullptr) : Json(a.budget_fraction)},
              {"threads", a.threads},
              {"time_scale", a.time_scale},
              {"runs", Json::array()}};
  int failed = 0;
  std::map<bool, std::vector<double>> llmsvc_means;  // by via, a mean per round: the daemon's against the engine's
  for (int round = 1; round <= a.rounds; ++round) {
    for (const Preset* p : presets) {
      for (const bool via_daemon : vias) {
        auto run = run_preset(*trace, *p, a, budget, via_daemon, &failed);
        if (!run.ok()) {
          std::fprintf(stderr, "bench_trace: %s: %s\n", p->name, run.status().message().c_str());
          return 1;
        }
        const Json& sw = (*run)["switch_in_ms"];
        const std::string name = std::string(p->name) + (via_daemon ? "@llmsvcd" : "");
        std::fprintf(stderr, "%-15s switch-in mean %8.2f ms (switches %8.2f, p99 %8.2f)  loaded %lld recomputed %lld  %.1f s\n",
                     name.c_str(), sw["all"]["mean"].get<double>(), sw["switches"]["mean"].get<double>(),
                     sw["switches"]["p99"].get<double>(), (*run)["chunks_loaded"].get<long long>(),
                     (*run)["chunks_recomputed"].get<long long>(), (*run)["wall_s"].get<double>());
        if (std::string(p->name) == "llmsvc") llmsvc_means[via_daemon].push_back(sw["all"]["mean"].get<double>());
        (*run)["round"] = round;
        out["runs"].push_back(std::move(run).value());
      }
    }
  }
  if (llmsvc_means.size() == 2) {
    const double engine = percentile(llmsvc_means[false], 50), daemon = percentile(llmsvc_means[true], 50);
    if (engine > 0) {
      const double ratio = daemon / engine;
      std::fprintf(stderr, "llmsvcd / engine, mean switch-in: %.3f (%s; target within 10%%)\n", ratio,
                   a.rounds > 1 ? "median over the rounds of each side" : "one round");
      out["llmsvcd_over_engine_switch_in_mean"] = ratio;
      out["llmsvc_switch_in_means_by_round"] = {{"engine", llmsvc_means[false]}, {"llmsvcd", llmsvc_means[true]}};
    }
  }
  const std::string text = out.dump(1) + "\n";
  if (a.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else if (Status s = fileio::write_atomic(a.out, text); !s.ok()) {
    std::fprintf(stderr, "bench_trace: %s\n", s.message().c_str());
    return 1;
  }
  if (failed > 0) std::fprintf(stderr, "bench_trace: %d calls failed (see their records)\n", failed);
  return failed > 0 ? 3 : 0;
}

}  // namespace
}  // namespace llmsvc::bench

int main(int argc, char** argv) { return llmsvc::bench::main_impl(argc, argv); }
