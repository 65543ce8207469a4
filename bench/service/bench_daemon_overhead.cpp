// SPDX-License-Identifier: Apache-2.0
// What the daemon path costs an app: the same workload through llmsvc.h embedded and through a
// real llmsvcd this benchmark starts on a temporary socket (same model, same engine threads,
// same options), alternating embedded and daemon runs so both see the same machine.
//
//  (a) per-call latency added by the daemon: --calls short calls per repetition (max_tokens 1
//      on a short raw prompt), and round trips that do no model work (llmsvc_get_stats,
//      llmsvc_context_info_get); medians and the added ms (target <= 0.5 ms);
//  (b) decode speed through the daemon: --tokens greedy tokens per run, measured by the app
//      (first piece to return) and by the engine (result.decode_ms); median tokens/s and the
//      daemon/embedded ratio (target >= 98 %).
//
//   bench_daemon_overhead [--model PATH] [--threads 2] [--reps 15] [--calls 20] [--tokens 128]
//                         [--gap-ms 3] [--on-thread 0|1] [--fresh 0|1] [--versus daemon|embedded]
//                         [--daemon-args "ARG ..."] [--json PATH]
//  --gap-ms: idle time before each timed operation (engine threads spin ~1 ms after work).
//  --fresh 1 (default): new instances (a new llmsvcd, a new embedded bind) for every repetition,
//  the side loaded first alternating; 0: one of each for the whole run.
//  --versus embedded: the control, a second embedded service in place of the daemon: how far
//  two instances of the same path differ on this machine (the noise floor of the figures).
//  --on-thread 1: the app makes its calls from a thread of its own, not the main thread (an
//  embedded call then computes on such a thread, as llmsvcd's calls do on its workers).
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/service/bench_service_util.h"

namespace llmsvc::bench {
namespace {

struct Path {
  const char* name;
  llmsvc_service* svc;
};

struct Timed {
  double wall_ms = 0, first_piece_ms = -1;
  llmsvc_call_result result{};
  std::string text;
};

struct PieceClock {
  Clock::time_point t0;
  Timed* out;
};

int on_piece(const char* piece, size_t len, int32_t, void* user) {
  auto* c = static_cast<PieceClock*>(user);
  if (c->out->first_piece_ms < 0) c->out->first_piece_ms = ms_since(c->t0);
  c->out->text.append(piece, len);
  return 0;
}

// Idle time before each timed operation, so neither path starts while the other's engine
// threads still spin after their last region (they spin ~1 ms before sleeping).
std::chrono::microseconds g_gap{3000};

Timed timed_call(llmsvc_context* ctx, const std::string& prompt, int max_tokens) {
  std::this_thread::sleep_for(g_gap);
  Timed t;
  llmsvc_call_result_init(&t.result);
  llmsvc_call_options o;
  llmsvc_call_options_init(&o);
  o.max_tokens = max_tokens;
  PieceClock clock{Clock::now(), &t};
  const llmsvc_status st = llmsvc_call(ctx, prompt.data(), prompt.size(), &o, on_piece, &clock, &t.result);
  t.wall_ms = ms_since(clock.t0);
  if (st != LLMSVC_OK) {
    std::fprintf(stderr, "call: %s: %s\n", llmsvc_status_name(st), llmsvc_last_error());
    std::exit(1);
  }
  return t;
}

void close_and_delete(llmsvc_service* svc, llmsvc_context* ctx) {
  const std::string id = llmsvc_context_id(ctx);
  llmsvc_context_close(ctx);
  (void)llmsvc_context_delete(svc, id.c_str());
}

// App-side decode rate: tokens after the first over the time from the first piece to return.
double app_decode_tps(const Timed& t) {
  const double ms = t.wall_ms - t.first_piece_ms;
  return t.result.generated_tokens > 1 && ms > 0 ? (t.result.generated_tokens - 1) * 1000.0 / ms : 0;
}
double engine_decode_tps(const Timed& t) {
  return t.result.generated_tokens > 1 && t.result.decode_ms > 0
             ? (t.result.generated_tokens - 1) * 1000.0 / t.result.decode_ms
             : 0;
}

int run(const Flags& flags) {
  const std::string model = flags.str("model");
  const int threads = flags.integer("threads", 1), reps = flags.integer("reps", 1),
            calls = flags.integer("calls", 1), tokens = flags.integer("tokens", 2);
  g_gap = std::chrono::microseconds(static_cast<int64_t>(flags.number("gap-ms") * 1000));

  const std::string dir = temp_dir("llmsvc-bench-daemon");
  std::vector<std::string> daemon_args;
  std::istringstream words(flags.str("daemon-args"));
  for (std::string w; words >> w;) daemon_args.push_back(w);
  const bool fresh = flags.integer("fresh") != 0;
  const bool control = flags.str("versus") == "embedded";
  if (!control && flags.str("versus") != "daemon") {
    std::fprintf(stderr, "--versus: daemon or embedded\n");
    return 2;
  }

  // The two sides of a repetition. Each bind loads its own copy of the weights, and where a
  // copy lands in memory moves its speed by several percent on some machines (two embedded
  // services in one process differ so, --versus embedded shows it): with --fresh 1 every
  // repetition has new instances, and the per-repetition medians average over placements.
  std::unique_ptr<test::DaemonProcess> daemon;
  Path paths[2] = {{"embedded", nullptr}, {control ? "embedded-2" : "daemon", nullptr}};
  int instance = 0;
  auto start_side = [&](int p) {
    const std::string state = dir + "/state-" + std::to_string(instance++);
    if (p == 1 && !control) {
      std::filesystem::create_directories(state);
      daemon = start_daemon(state, model, threads, daemon_args);
      llmsvc_bind_options dopt;
      llmsvc_bind_options_init(&dopt);
      const std::string target = daemon->target();
      dopt.target = target.c_str();
      paths[p].svc = bind_or_exit(dopt);
    } else {
      llmsvc_bind_options eo;
      llmsvc_bind_options_init(&eo);
      eo.target = "embedded";
      eo.model_path = model.c_str();
      eo.n_threads = threads;
      eo.state_dir = state.c_str();
      paths[p].svc = bind_or_exit(eo);
    }
    // Warm-up: one call of 16 tokens.
    llmsvc_context* c = new_context_or_exit(paths[p].svc, "warmup", true);
    (void)timed_call(c, "Hello", 16);
    close_and_delete(paths[p].svc, c);
  };
  bool clean_exit = true;
  auto stop_sides = [&] {
    for (Path& p : paths) llmsvc_unbind(p.svc);
    if (daemon) clean_exit = stop_daemon(*daemon) && clean_exit;
    daemon.reset();
  };

  const std::string short_prompt = " yes";
  const std::string decode_prompt = "Once upon a time, in a small village by the sea,";
  std::vector<double> call_ms[2], outside_engine_ms[2], stats_ms[2], info_ms[2], app_tps[2], engine_tps[2];
  std::vector<double> switch_in_ms[2], prefill_ms[2];  // inside the engine's ttft
  std::vector<double> added_per_rep, paired_added, ratio_per_rep, engine_ratio_per_rep;
  bool same_text = true;
  for (int r = 0; r < reps; ++r) {
    if (r == 0 || fresh) {
      if (r > 0) stop_sides();
      // Which side loads first alternates too: in one process the instance bound second ran
      // 0.04-0.21 ms per call faster than the first in every control run.
      for (int k = 0; k < 2; ++k) start_side((r + k) % 2);
    }
    // (a) Short calls, alternating which path goes first; both contexts grow alike.
    llmsvc_context* ctx[2];
    for (int p = 0; p < 2; ++p) ctx[p] = new_context_or_exit(paths[p].svc, "short-" + std::to_string(r), true);
    std::vector<double> rep_ms[2];
    for (int i = 0; i < calls; ++i) {
      for (int k = 0; k < 2; ++k) {
        const int p = (i + r + k) % 2;
        const Timed t = timed_call(ctx[p], short_prompt, 1);
        call_ms[p].push_back(t.wall_ms);
        rep_ms[p].push_back(t.wall_ms);
        outside_engine_ms[p].push_back(t.wall_ms - t.result.ttft_ms);
        switch_in_ms[p].push_back(t.result.switch_in_ms);
        prefill_ms[p].push_back(t.result.prefill_ms);
      }
      for (int k = 0; k < 2; ++k) {
        const int p = (i + r + k) % 2;
        llmsvc_stats st;
        llmsvc_stats_init(&st);
        std::this_thread::sleep_for(g_gap);
        auto t0 = Clock::now();
        if (llmsvc_get_stats(paths[p].svc, &st) != LLMSVC_OK) return 1;
        stats_ms[p].push_back(ms_since(t0));
        llmsvc_context_info info;
        llmsvc_context_info_init(&info);
        std::this_thread::sleep_for(g_gap);
        t0 = Clock::now();
        if (llmsvc_context_info_get(paths[p].svc, llmsvc_context_id(ctx[p]), &info) != LLMSVC_OK) return 1;
        info_ms[p].push_back(ms_since(t0));
      }
    }
    added_per_rep.push_back(median(rep_ms[1]) - median(rep_ms[0]));
    for (size_t i = 0; i < rep_ms[0].size(); ++i) paired_added.push_back(rep_ms[1][i] - rep_ms[0][i]);
    for (int p = 0; p < 2; ++p) close_and_delete(paths[p].svc, ctx[p]);

    // (b) Decode, the order alternating between repetitions.
    Timed dec[2];
    for (int k = 0; k < 2; ++k) {
      const int p = (r + k) % 2;
      llmsvc_context* c = new_context_or_exit(paths[p].svc, "decode-" + std::to_string(r), true);
      dec[p] = timed_call(c, decode_prompt, tokens);
      close_and_delete(paths[p].svc, c);
      app_tps[p].push_back(app_decode_tps(dec[p]));
      engine_tps[p].push_back(engine_decode_tps(dec[p]));
    }
    same_text = same_text && dec[0].text == dec[1].text;
    ratio_per_rep.push_back(app_tps[1].back() / app_tps[0].back());
    engine_ratio_per_rep.push_back(engine_tps[1].back() / engine_tps[0].back());
    std::fprintf(stderr, "rep %d/%d: short call added %.3f ms; decode %.1f vs %.1f tok/s (%d tokens)\n", r + 1, reps,
                 added_per_rep.back(), app_tps[0].back(), app_tps[1].back(), dec[1].result.generated_tokens);
  }
  stop_sides();

  auto added = [](const std::vector<double>* v) { return median(v[1]) - median(v[0]); };
  std::printf("\n%s: %s, %d threads, %d reps x %d short calls, %d decode tokens, %s\n",
              control ? "control, a second embedded service vs embedded" : "llmsvcd overhead vs embedded",
              model.substr(model.find_last_of('/') + 1).c_str(), threads, reps, calls, tokens,
              fresh ? "new instances every rep" : "one instance of each");
  std::printf("(figures from a loaded machine are smoke figures, not evidence)\n\n");
  std::printf("%-34s %12s %12s %10s %10s\n", "per call (median ms)", "embedded", paths[1].name, "added", "target");
  std::printf("%-34s %12.3f %12.3f %10.3f %10s\n", "call, max_tokens 1", median(call_ms[0]), median(call_ms[1]),
              added(call_ms), "<= 0.5");
  std::printf("%-34s %12.3f %12.3f %10.3f\n", "  outside the engine (wall - ttft)", median(outside_engine_ms[0]),
              median(outside_engine_ms[1]), added(outside_engine_ms));
  std::printf("%-34s %12.3f %12.3f %10.3f\n", "  engine: switch-in", median(switch_in_ms[0]), median(switch_in_ms[1]),
              added(switch_in_ms));
  std::printf("%-34s %12.3f %12.3f %10.3f\n", "  engine: prefill", median(prefill_ms[0]), median(prefill_ms[1]),
              added(prefill_ms));
  std::printf("%-34s %12.3f %12.3f %10.3f\n", "stats round trip", median(stats_ms[0]), median(stats_ms[1]),
              added(stats_ms));
  std::printf("%-34s %12.3f %12.3f %10.3f\n", "context info round trip", median(info_ms[0]), median(info_ms[1]),
              added(info_ms));
  std::printf("%-34s %12s %12s %10.3f\n", "  median of per-rep added (call)", "", "", median(added_per_rep));
  std::printf("%-34s %12s %12s %10.3f\n", "  median of paired differences", "", "", median(paired_added));
  std::printf("\n%-34s %12s %12s %10s %10s\n", "decode (median tokens/s)", "embedded", paths[1].name, "ratio", "target");
  std::printf("%-34s %12.1f %12.1f %9.1f%% %10s\n", "as the app sees it", median(app_tps[0]), median(app_tps[1]),
              100 * median(ratio_per_rep), ">= 98%");
  std::printf("%-34s %12.1f %12.1f %9.1f%%\n", "as the engine times it", median(engine_tps[0]), median(engine_tps[1]),
              100 * median(engine_ratio_per_rep));
  std::printf("\nsame greedy text both ways: %s; llmsvcd SIGTERM exit 0: %s\n", same_text ? "yes" : "NO",
              clean_exit ? "yes" : "NO");

  nlohmann::json j;
  j["benchmark"] = "daemon_overhead";
  j["flags"] = flags.json();
  j["note"] = "alternating embedded/daemon runs; per-call medians over all reps; ratios are medians of per-rep ratios";
  for (int p = 0; p < 2; ++p) {
    const char* n = paths[p].name;
    j["short_call_ms"][n] = summary(call_ms[p]);
    j["short_call_outside_engine_ms"][n] = summary(outside_engine_ms[p]);
    j["short_call_switch_in_ms"][n] = summary(switch_in_ms[p]);
    j["short_call_prefill_ms"][n] = summary(prefill_ms[p]);
    j["stats_round_trip_ms"][n] = summary(stats_ms[p]);
    j["info_round_trip_ms"][n] = summary(info_ms[p]);
    j["decode_app_tokens_per_s"][n] = summary(app_tps[p]);
    j["decode_engine_tokens_per_s"][n] = summary(engine_tps[p]);
  }
  j["added_ms"] = {{"short_call", added(call_ms)},
                   {"short_call_outside_engine", added(outside_engine_ms)},
                   {"stats_round_trip", added(stats_ms)},
                   {"info_round_trip", added(info_ms)},
                   {"short_call_per_rep", added_per_rep},
                   {"short_call_paired_median", median(paired_added)},
                   {"target_max", 0.5}};
  j["decode_ratio"] = {{"app", median(ratio_per_rep)},
                       {"engine", median(engine_ratio_per_rep)},
                       {"app_per_rep", ratio_per_rep},
                       {"target_min", 0.98}};
  j["same_greedy_text"] = same_text;
  j["daemon_clean_exit"] = clean_exit;
  write_json(flags.str("json"), j);
  std::filesystem::remove_all(dir);
  return same_text && clean_exit ? 0 : 1;
}

int main_impl(int argc, char** argv) {
  Flags flags({{"model", test::default_model_path()},
               {"threads", "2"},
               {"reps", "15"},
               {"calls", "20"},
               {"tokens", "128"},
               {"gap-ms", "3"},
               {"on-thread", "0"},
               {"fresh", "1"},
               {"versus", "daemon"},
               {"daemon-args", ""},
               {"json", ""}},
              "usage: bench_daemon_overhead [--model PATH] [--threads 2] [--reps 15] [--calls 20] [--tokens 128] "
              "[--gap-ms 3] [--on-thread 0|1] [--fresh 0|1] [--versus daemon|embedded] [--daemon-args \"ARG ...\"] "
              "[--json PATH]");
  if (!flags.parse(argc, argv)) return 2;
  if (flags.integer("on-thread") == 0) return run(flags);
  int rc = 1;
  std::thread([&] { rc = run(flags); }).join();
  return rc;
}

}  // namespace
}  // namespace llmsvc::bench

int main(int argc, char** argv) { return llmsvc::bench::main_impl(argc, argv); }
