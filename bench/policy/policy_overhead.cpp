// SPDX-License-Identifier: Apache-2.0
// The memory policy's cost when there is no memory pressure: the same conversation through
// the engine alone (f16 KV, no swap, no budget) and with the whole policy on (compression at
// the default ratio after each call, ahead-of-time swap-out, a budget that never binds).
// Both engines are loaded side by side and take turns call by call; the figure is the median
// over repetitions of policy-on time / engine-alone time (calls' wall time, everything the
// call does included: switch-in, prefill, decode, compression, swap-out encoding; the swap
// writer's I/O after the call is waited for, untimed, before the next turn).
//
//   bench_policy_overhead [--model PATH] [--reps 5] [--calls 12] [--threads 2] [--json PATH]
//                         [--kv-ratio R] [--aot 0|1]
//  --kv-ratio, --aot: the policy-on side's compression ratio (default the engine's; <= 0 keeps
//  f16) and ahead-of-time swap-out (default on), to tell the parts' costs apart.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/file_io.h"
#include "runtime/core/model/default_model.h"
#include "runtime/core/engine/engine.h"

namespace llmsvc::bench {
namespace {

struct Figures {
  double seconds = 0;         // all calls
  double prefill_ms = 0, decode_ms = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  std::string text;           // every answer, to check both sides did the same work
};

struct PolicyKnobs {
  double kv_ratio = EngineOptions{}.kv_ratio;
  bool aot_swap_out = true;
};

// One side of the comparison: an engine with one conversation in it.
struct Side {
  std::unique_ptr<Engine> engine;
  Figures f;
};

Side make_side(const std::string& model, const std::string& state, bool policy, int threads,
               const PolicyKnobs& knobs) {
  (void)fileio::remove_tree(state);
  EngineOptions o;
  o.model_path = model;
  o.n_threads = threads;
  o.n_ctx = 2048;
  o.state_dir = state;
  if (policy) {
    o.kv_budget_bytes = uint64_t{1} << 30;  // far more than the context needs
    o.kv_ratio = knobs.kv_ratio;
    o.aot_swap_out = knobs.aot_swap_out;
  } else {
    o.kv_ratio = 0;  // f16
    o.kv_swap = false;
  }
  auto e = Engine::create(o);
  if (!e.ok()) {
    std::fprintf(stderr, "engine: %s\n", e.status().message().c_str());
    std::exit(1);
  }
  ContextOptions co;
  co.id = "talk";
  co.raw = true;
  if (!(*e)->create_context(co).ok()) std::exit(1);
  return Side{std::move(*e), {}};
}

// The conversation's call i on one side, timed.
void one_call(Side& side, int i) {
  static const char* turns[] = {" The river runs past the old mill and on to the sea, where the boats wait for the tide.",
                                " In the morning the market fills with voices, bread and the smell of rain on stone.",
                                " Later, the teacher asked the children what they had learned about the stars."};
  CallParams p;
  p.max_tokens = 32;
  CallStats st;
  Figures& f = side.f;
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = side.engine->call("talk", turns[i % 3], p,
                                     [&f](std::string_view piece, int32_t) {
                                       f.text += piece;
                                       return true;
                                     },
                                     &st);
  f.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) {
    std::fprintf(stderr, "call: %s\n", s.message().c_str());
    std::exit(1);
  }
  f.prefill_ms += st.prefill_ms;
  f.decode_ms += st.decode_ms;
  f.prompt_tokens += st.prompt_tokens;
  f.generated_tokens += st.generated_tokens;
  // The swap writer's files land before the other side's call (untimed: its CPU work, the
  // encoding, was inside the call; what is left is I/O), then the engine threads' spin ends.
  side.engine->flush_swap();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main_impl(int argc, char** argv) {
  std::string model = default_model_path(), json_path;
  int reps = 5, calls = 12, threads = 2;
  PolicyKnobs knobs;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model") model = v;
    else if (a == "--reps") reps = std::max(1, std::atoi(v.c_str()));
    else if (a == "--calls") calls = std::max(1, std::atoi(v.c_str()));
    else if (a == "--threads") threads = std::max(1, std::atoi(v.c_str()));
    else if (a == "--json") json_path = v;
    else if (a == "--kv-ratio") knobs.kv_ratio = std::atof(v.c_str());
    else if (a == "--aot") knobs.aot_swap_out = std::atoi(v.c_str()) != 0;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const std::string root = "/tmp/llmsvc-bench-policy-overhead";
  std::vector<double> ratio, alone_s, policy_s, prefill_ratio, decode_ratio;
  for (int r = 0; r < reps; ++r) {
    // Both engines live side by side and take turns call by call, the first turn alternating,
    // so that the machine's drift (seconds long on a shared VM) hits both alike.
    Side alone = make_side(model, root + "/alone", false, threads, knobs);
    Side policy = make_side(model, root + "/policy", true, threads, knobs);
    for (int i = 0; i < calls; ++i) {
      if ((i + r) % 2 == 0) {
        one_call(alone, i);
        one_call(policy, i);
      } else {
        one_call(policy, i);
        one_call(alone, i);
      }
    }
    const Figures& a = alone.f;
    const Figures& b = policy.f;
    alone_s.push_back(a.seconds);
    policy_s.push_back(b.seconds);
    ratio.push_back(b.seconds / a.seconds);
    prefill_ratio.push_back(b.prefill_ms / a.prefill_ms);
    decode_ratio.push_back(b.decode_ms / a.decode_ms);
    std::printf("rep %d: engine alone %.3f s, policy on %.3f s (%lld prompt + %lld generated tokens), ratio %.4f%s\n", r,
                a.seconds, b.seconds, static_cast<long long>(a.prompt_tokens), static_cast<long long>(a.generated_tokens),
                b.seconds / a.seconds, a.text == b.text ? "" : " (answers differ: compressed KV)");
  }
  (void)fileio::remove_tree(root);
  std::printf("median: engine alone %.3f s, policy on %.3f s; policy-on / alone = %.4f (prefill %.4f, decode %.4f)\n",
              median(alone_s), median(policy_s), median(ratio), median(prefill_ratio), median(decode_ratio));
  if (!json_path.empty()) {
    nlohmann::json j = {{"reps", reps},
                        {"calls", calls},
                        {"threads", threads},
                        {"kv_ratio", knobs.kv_ratio},
                        {"aot_swap_out", knobs.aot_swap_out},
                        {"alone_s", alone_s},
                        {"policy_s", policy_s},
                        {"ratio_median", median(ratio)},
                        {"prefill_ratio_median", median(prefill_ratio)},
                        {"decode_ratio_median", median(decode_ratio)}};
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace llmsvc::bench

int main(int argc, char** argv) { return llmsvc::bench::main_impl(argc, argv); }
