// SPDX-License-Identifier: Apache-2.0
// Many apps against one llmsvcd: --clients threads, each with its own llmsvc_bind connection
// and its own (chat) context, make --calls calls of --max-tokens greedy tokens on short prompts,
// all starting together. Reports throughput (calls/s, generated and prompt tokens/s), call
// latency and time to first token (p50/p99/max), errors (must be 0), fairness (per-client
// completion times), and the daemon's peak RSS (VmHWM) against what it is configured to hold:
// its KV budget (kv_budget_bytes in a --config TOML file) + the model file + a stated fixed
// overhead (--overhead-mib: runtime, scratch, thread stacks, connection buffers, up to 32 MiB
// of encoded chunks queued for the swap writer, which the KV budget does not count, and the
// mappings kept for reuse: 16 MiB of swap buffers, 8 MiB of KV blocks).
//
//   bench_daemon_load [--model PATH] [--threads 2] [--clients 64] [--calls 20] [--max-tokens 8]
//                     [--kv-budget-mib 64] [--overhead-mib 96] [--json PATH]
#include <barrier>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/service/bench_service_util.h"

namespace llmsvc::bench {
namespace {

const char* const kPrompts[] = {"Name a fruit.", "What is 2 + 3?", "Say hello in French.", "Give me a color.",
                                "Name an animal.", "What day follows Monday?"};
constexpr int kNumPrompts = sizeof(kPrompts) / sizeof(kPrompts[0]);

struct ClientFigures {
  std::vector<double> latency_ms, ttft_ms;
  uint64_t generated = 0, prompt_tokens = 0, chunks_loaded = 0, chunks_recomputed = 0;
  int errors = 0;
  std::string first_error;
  double done_ms = 0;  // since the common start
};

// Time from the call to its first piece, as the app sees it.
struct FirstPiece {
  Clock::time_point t0;
  double ms;
};
int on_piece(const char*, size_t, int32_t, void* user) {
  auto* f = static_cast<FirstPiece*>(user);
  if (f->ms < 0) f->ms = ms_since(f->t0);
  return 0;
}

int main_impl(int argc, char** argv) {
  Flags flags({{"model", test::default_model_path()},
               {"threads", "2"},
               {"clients", "64"},
               {"calls", "20"},
               {"max-tokens", "8"},
               {"kv-budget-mib", "64"},
               {"overhead-mib", "96"},
               {"json", ""}},
              "usage: bench_daemon_load [--model PATH] [--threads 2] [--clients 64] [--calls 20] [--max-tokens 8] "
              "[--kv-budget-mib 64] [--overhead-mib 96] [--json PATH]");
  if (!flags.parse(argc, argv)) return 2;
  const std::string model = flags.str("model");
  const int threads = flags.integer("threads", 1), clients = flags.integer("clients", 1),
            calls = flags.integer("calls", 1), max_tokens = flags.integer("max-tokens", 1);
  const uint64_t budget = static_cast<uint64_t>(flags.number("kv-budget-mib") * 1048576.0);
  const uint64_t overhead = static_cast<uint64_t>(flags.number("overhead-mib") * 1048576.0);

  const std::string dir = temp_dir("llmsvc-bench-load");
  const std::string config = dir + "/llmsvcd.toml";
  {
    std::ofstream out(config);
    out << "kv_budget_bytes = " << budget << "\n";
    // Its clients are one uid, so one app to llmsvcd: the per-app quotas are lifted (the
    // load, not the quotas, is what this measures).
    out << "[quotas]\nconnections = 0\nconcurrent_calls = 0\nkv_share = 0.0\n";
  }
  auto daemon = start_daemon(dir, model, threads, {"--config", config});
  const pid_t pid = daemon->pid();
  const uint64_t idle_rss = proc_status_bytes(pid, "VmRSS");
  const std::string target = daemon->target();

  std::vector<ClientFigures> figs(static_cast<size_t>(clients));
  Clock::time_point start;
  std::barrier together(clients, [&]() noexcept { start = Clock::now(); });
  std::vector<std::thread> workers;
  for (int i = 0; i < clients; ++i) {
    workers.emplace_back([&, i] {
      ClientFigures& f = figs[static_cast<size_t>(i)];
      llmsvc_bind_options bo;
      llmsvc_bind_options_init(&bo);
      bo.target = target.c_str();
      llmsvc_service* svc = nullptr;
      llmsvc_context* ctx = nullptr;
      const std::string id = "load-" + std::to_string(i);
      llmsvc_context_options co;
      llmsvc_context_options_init(&co);
      co.id = id.c_str();
      if (llmsvc_bind(&bo, &svc) != LLMSVC_OK || llmsvc_context_new(svc, &co, &ctx) != LLMSVC_OK) {
        f.errors = calls;
        f.first_error = std::string("setup: ") + llmsvc_last_error();
      }
      together.arrive_and_wait();
      for (int k = 0; ctx && k < calls; ++k) {
        const char* prompt = kPrompts[(i + k) % kNumPrompts];
        llmsvc_call_options o;
        llmsvc_call_options_init(&o);
        o.max_tokens = max_tokens;
        llmsvc_call_result r;
        llmsvc_call_result_init(&r);
        FirstPiece first{Clock::now(), -1};
        const llmsvc_status st = llmsvc_call(ctx, prompt, std::strlen(prompt), &o, on_piece, &first, &r);
        const double ms = ms_since(first.t0);
        if (st != LLMSVC_OK) {
          if (f.errors++ == 0) f.first_error = std::string(llmsvc_status_name(st)) + ": " + llmsvc_last_error();
          continue;
        }
        f.latency_ms.push_back(ms);
        f.ttft_ms.push_back(first.ms >= 0 ? first.ms : ms);  // as the app sees it: queueing included
        f.generated += static_cast<uint64_t>(r.generated_tokens);
        f.prompt_tokens += static_cast<uint64_t>(r.prompt_tokens);
        f.chunks_loaded += static_cast<uint64_t>(r.chunks_loaded);
        f.chunks_recomputed += static_cast<uint64_t>(r.chunks_recomputed);
      }
      f.done_ms = ms_since(start);
      llmsvc_context_close(ctx);
      llmsvc_unbind(svc);
    });
  }
  for (auto& t : workers) t.join();

  std::vector<double> latency, ttft, done, client_p50;
  uint64_t generated = 0, prompt_tokens = 0, chunks_loaded = 0, chunks_recomputed = 0;
  int errors = 0;
  std::string first_error;
  for (const ClientFigures& f : figs) {
    chunks_loaded += f.chunks_loaded;
    chunks_recomputed += f.chunks_recomputed;
    latency.insert(latency.end(), f.latency_ms.begin(), f.latency_ms.end());
    ttft.insert(ttft.end(), f.ttft_ms.begin(), f.ttft_ms.end());
    done.push_back(f.done_ms);
    client_p50.push_back(median(f.latency_ms));
    generated += f.generated;
    prompt_tokens += f.prompt_tokens;
    errors += f.errors;
    if (first_error.empty()) first_error = f.first_error;
  }
  const double wall_s = *std::max_element(done.begin(), done.end()) / 1000.0;
  const uint64_t peak_rss = proc_status_bytes(pid, "VmHWM"), end_rss = proc_status_bytes(pid, "VmRSS");
  const uint64_t end_anon = proc_status_bytes(pid, "RssAnon"), end_file = proc_status_bytes(pid, "RssFile");
  const uint64_t model_bytes = file_bytes(model);
  const uint64_t allowed = budget + model_bytes + overhead;

  llmsvc_stats stats;
  llmsvc_stats_init(&stats);
  struct {
    int64_t total = 0, resident = 0, swapped = 0, dropped = 0;
    uint64_t resident_bytes = 0;
  } kv;
  {
    llmsvc_bind_options bo;
    llmsvc_bind_options_init(&bo);
    bo.target = target.c_str();
    llmsvc_service* svc = bind_or_exit(bo);
    (void)llmsvc_get_stats(svc, &stats);
    // Where every context's KV is now (the budget holds the resident part).
    for (int i = 0; i < clients; ++i) {
      llmsvc_context_info info;
      llmsvc_context_info_init(&info);
      if (llmsvc_context_info_get(svc, ("load-" + std::to_string(i)).c_str(), &info) != LLMSVC_OK) continue;
      kv.total += info.chunks_total;
      kv.resident += info.chunks_resident;
      kv.swapped += info.chunks_swapped;
      kv.dropped += info.chunks_dropped;
      kv.resident_bytes += info.kv_resident_bytes;
    }
    llmsvc_unbind(svc);
  }
  const bool clean_exit = stop_daemon(*daemon);

  const double mib = 1048576.0;
  std::printf("\nllmsvcd under load: %s, %d threads, %d clients x %d calls, max_tokens %d, KV budget %.0f MiB\n",
              model.substr(model.find_last_of('/') + 1).c_str(), threads, clients, calls, max_tokens, budget / mib);
  std::printf("(figures from a loaded machine are smoke figures, not evidence)\n\n");
  std::printf("%-28s %10d (%d calls ok of %d)\n", "errors (must be 0)", errors, static_cast<int>(latency.size()),
              clients * calls);
  if (!first_error.empty()) std::printf("%-28s %s\n", "first error", first_error.c_str());
  std::printf("%-28s %10.2f s\n", "wall", wall_s);
  std::printf("%-28s %10.2f calls/s, %.1f generated tokens/s, %.1f prompt tokens/s\n", "throughput",
              static_cast<double>(latency.size()) / wall_s, static_cast<double>(generated) / wall_s,
              static_cast<double>(prompt_tokens) / wall_s);
  std::printf("%-28s p50 %9.1f ms  p99 %9.1f ms  max %9.1f ms\n", "call latency", percentile(latency, 50),
              percentile(latency, 99), percentile(latency, 100));
  std::printf("%-28s p50 %9.1f ms  p99 %9.1f ms  max %9.1f ms\n", "time to first token (app)", percentile(ttft, 50),
              percentile(ttft, 99), percentile(ttft, 100));
  std::printf("%-28s min %9.2f s   p50 %9.2f s   max %9.2f s\n", "client done after", percentile(done, 0) / 1000,
              median(done) / 1000, percentile(done, 100) / 1000);
  std::printf("%-28s min %9.1f ms  p50 %9.1f ms  max %9.1f ms\n", "per-client median latency",
              percentile(client_p50, 0), median(client_p50), percentile(client_p50, 100));
  std::printf("\n%-28s %10.1f MiB (idle after start %.1f, at the end %.1f: anonymous %.1f, file %.1f)\n",
              "daemon peak RSS (VmHWM)", peak_rss / mib, idle_rss / mib, end_rss / mib, end_anon / mib, end_file / mib);
  std::printf("%-28s %10.1f MiB = KV budget %.1f + model file %.1f + fixed overhead %.1f\n", "configured bound",
              allowed / mib, budget / mib, model_bytes / mib, overhead / mib);
  std::printf("%-28s %10s (peak - budget - model = %.1f MiB)\n", "peak within bound", peak_rss <= allowed ? "yes" : "NO",
              (static_cast<double>(peak_rss) - static_cast<double>(budget) - static_cast<double>(model_bytes)) / mib);
  std::printf("%-28s %lld chunks: %lld resident (%.1f MiB), %lld swapped, %lld dropped; switch-ins loaded %llu, "
              "recomputed %llu (0 from a daemon that does not report them)\n",
              "KV at the end", static_cast<long long>(kv.total), static_cast<long long>(kv.resident),
              kv.resident_bytes / mib, static_cast<long long>(kv.swapped), static_cast<long long>(kv.dropped),
              static_cast<unsigned long long>(chunks_loaded), static_cast<unsigned long long>(chunks_recomputed));
  std::printf("%-28s calls %llu, generated %llu; llmsvcd SIGTERM exit 0: %s\n", "daemon's figures",
              static_cast<unsigned long long>(stats.calls), static_cast<unsigned long long>(stats.generated_tokens),
              clean_exit ? "yes" : "NO");

  nlohmann::json j;
  j["benchmark"] = "daemon_load";
  j["flags"] = flags.json();
  j["calls_ok"] = latency.size();
  j["errors"] = errors;
  j["first_error"] = first_error;
  j["wall_s"] = wall_s;
  j["throughput"] = {{"calls_per_s", static_cast<double>(latency.size()) / wall_s},
                     {"generated_tokens_per_s", static_cast<double>(generated) / wall_s},
                     {"prompt_tokens_per_s", static_cast<double>(prompt_tokens) / wall_s}};
  j["call_latency_ms"] = summary(latency);
  j["ttft_ms"] = summary(ttft);
  j["client_done_ms"] = summary(done);
  j["client_median_latency_ms"] = summary(client_p50);
  j["memory_bytes"] = {{"peak_rss", peak_rss},
                       {"idle_rss_after_start", idle_rss},
                       {"end_rss", end_rss},
                       {"end_rss_anon", end_anon},
                       {"end_rss_file", end_file},
                       {"kv_budget", budget},
                       {"model_file", model_bytes},
                       {"fixed_overhead", overhead},
                       {"bound", allowed},
                       {"within_bound", peak_rss <= allowed},
                       {"kv_resident_at_end", kv.resident_bytes}};
  j["kv_chunks_at_end"] = {{"total", kv.total}, {"resident", kv.resident}, {"swapped", kv.swapped}, {"dropped", kv.dropped}};
  j["switch_in_chunks"] = {{"loaded", chunks_loaded}, {"recomputed", chunks_recomputed}};
  j["daemon_stats"] = {{"calls", stats.calls},
                       {"generated_tokens", stats.generated_tokens},
                       {"prompt_tokens", stats.prompt_tokens},
                       {"kv_bytes", stats.kv_bytes}};
  j["daemon_clean_exit"] = clean_exit;
  write_json(flags.str("json"), j);
  std::filesystem::remove_all(dir);
  return errors == 0 && clean_exit ? 0 : 1;
}

}  // namespace
}  // namespace llmsvc::bench

int main(int argc, char** argv) { return llmsvc::bench::main_impl(argc, argv); }
