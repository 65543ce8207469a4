// SPDX-License-Identifier: Apache-2.0
// bench_e2e: times llmsvc's forward pass the way bench/compare_llamacpp.py times llama.cpp,
// printing one JSON line per measurement:
//   prefill N tokens into an empty context (tokens/s), decode at context C (tokens/s),
//   the machine's memory read bandwidth (GB/s) with the same thread count, and what each device
//   ran (with --device listing several, and --placement: the transfers between them).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hal/devices/device_registry.h"
#include "hal/placement.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"

using namespace llmsvc;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Deterministic pseudo-text: token ids spread over the vocabulary (what the model sees
// does not change the cost of a dense forward pass).
std::vector<int32_t> tokens_for(int n, int vocab) {
  std::vector<int32_t> t(n);
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < n; ++i) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    t[i] = static_cast<int32_t>(x % static_cast<uint64_t>(vocab));
  }
  return t;
}

// Read bandwidth summing `bytes` of floats with `threads` threads; the best of a few runs.
// 1 GiB measures DRAM; a buffer the size of the weights measures what decode can get
// when they fit in the last-level cache (some server CPUs hold a small model whole).
double memory_read_gbps(int threads, size_t bytes) {
  const size_t n = bytes / sizeof(float);
  std::vector<float> buf(n, 1.0f);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<double> sums(threads);
    auto t0 = Clock::now();
    std::vector<std::thread> th;
    for (int i = 0; i < threads; ++i) {
      th.emplace_back([&, i] {
        const size_t b = n / threads * i, e = i == threads - 1 ? n : n / threads * (i + 1);
        float acc[16] = {};
        for (size_t j = b; j + 16 <= e; j += 16)
          for (int k = 0; k < 16; ++k) acc[k] += buf[j + k];
        double s = 0;
        for (float a : acc) s += a;
        sums[i] = s;
      });
    }
    for (auto& t : th) t.join();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, n * sizeof(float) / secs / 1e9);
    if (sums[0] < 0) std::puts("");  // keep the sums alive
  }
  return best;
}

// "64,256" -> {64, 256}; "" -> {}.
std::vector<int> int_list(const std::string& s) {
  std::vector<int> v;
  for (size_t i = 0; i < s.size();) {
    const size_t j = std::min(s.find(',', i), s.size());
    v.push_back(std::stoi(s.substr(i, j - i)));
    i = j + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, device = "cpu", placement, cache_dir;
  int threads = 2, reps = 5, batch = 0;  // batch 0: Forward::batch_for
  std::vector<int> prefill = {64, 256, 1024}, decode_ctx = {128, 1024};
  int decode_tokens = 32;
  bool membw = true;
  bool mass = true;  // track key mass (as the engine does for compression); --no-mass for an A/B
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--model") model_path = next();
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--device") device = next();
    else if (a == "--placement") placement = next();
    else if (a == "--cache-dir") cache_dir = next();
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--batch") batch = std::stoi(next());
    else if (a == "--decode-tokens") decode_tokens = std::stoi(next());
    else if (a == "--no-membw") membw = false;
    else if (a == "--no-mass") mass = false;
    else if (a == "--prefill") prefill = int_list(next());
    else if (a == "--decode-ctx") decode_ctx = int_list(next());
    else {
      std::fprintf(stderr, "usage: bench_e2e --model PATH [--threads N] [--reps N] [--decode-tokens N] [--no-membw]\n"
                           "                 [--device SPEC[,SPEC..]] [--placement auto|layers:N|ops:KIND+..]\n"
                           "                 [--cache-dir DIR]   (a GPU's compiled programs, as the engine keeps them)\n"
                           "                 [--prefill N,N,..] [--decode-ctx N,N,..]   (an empty list skips the rows)\n");
      return 2;
    }
  }
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "bench_e2e: %s\n", s.message().c_str());
    return 1;
  };
  // Start-up: opening the devices (a GPU builds or loads its programs) and loading the model.
  const auto t_open = Clock::now();
  hal::DeviceOptions dev_options(threads);
  dev_options.cache_dir = cache_dir;
  auto devices = hal::open_devices(device, dev_options);
  if (!devices.ok()) return fail(devices.status());
  const double open_s = std::chrono::duration<double>(Clock::now() - t_open).count();
  auto model = Model::load(model_path, *devices->front());
  if (!model.ok()) return fail(model.status());
  {
    const double load_s = std::chrono::duration<double>(Clock::now() - t_open).count() - open_s;
    nlohmann::json j = {{"test", "startup"}, {"device", device}, {"cache_dir", cache_dir}, {"open_devices_s", open_s},
                        {"load_model_s", load_s}};
    std::printf("%s\n", j.dump().c_str());
  }
  const ModelConfig& cfg = (*model)->config();
  std::vector<hal::Device*> order;
  for (const auto& d : *devices) order.push_back(d.get());
  auto rule = hal::parse_placement(placement, cfg.n_layer, static_cast<int>(order.size()));
  if (!rule.ok()) return fail(rule.status());
  auto made = Forward::create(**model, order, *rule, batch > 0 ? batch : Forward::batch_for(order));
  if (!made.ok()) return fail(made.status());
  Forward& fwd = **made;
  policy::KvChunkStore store({cfg.n_layer, cfg.n_head_kv, cfg.head_dim, 16}, 0, policy::EvictionOrder::lctru,
                             &fwd.kv_memory());
  fwd.set_mass_tracking(mass);
  std::vector<float> logits;

  for (int n : prefill) {
    auto toks = tokens_for(n, cfg.n_vocab);
    std::vector<double> tps;
    for (int r = 0; r < reps; ++r) {
      policy::KvSequence seq(store);
      auto t0 = Clock::now();
      Status s = fwd.eval(seq, toks, 0, false, logits);
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      if (!s.ok()) { std::fprintf(stderr, "%s\n", s.message().c_str()); return 1; }
      tps.push_back(n / secs);
    }
    nlohmann::json j = {{"engine", "llmsvc"}, {"test", "prefill"}, {"n", n}, {"threads", threads},
                        {"tokens_per_s", median(tps)}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  for (int ctx : decode_ctx) {
    auto toks = tokens_for(ctx + decode_tokens, cfg.n_vocab);
    std::vector<double> tps;
    for (int r = 0; r < reps; ++r) {
      policy::KvSequence seq(store);
      Status s = fwd.eval(seq, std::span<const int32_t>(toks).first(ctx), 0, false, logits);
      if (!s.ok()) { std::fprintf(stderr, "%s\n", s.message().c_str()); return 1; }
      auto t0 = Clock::now();
      for (int i = 0; i < decode_tokens; ++i) {
        s = fwd.eval(seq, std::span<const int32_t>(toks).subspan(ctx + i, 1), ctx + i, false, logits);
        if (!s.ok()) { std::fprintf(stderr, "%s\n", s.message().c_str()); return 1; }
      }
      tps.push_back(decode_tokens / std::chrono::duration<double>(Clock::now() - t0).count());
    }
    const double tok_s = median(tps);
    // Bytes a decode step must read: every weight once, plus the K and V of the context.
    const uint64_t kv_bytes = uint64_t(ctx) * cfg.n_layer * cfg.kv_dim() * 2 * sizeof(uint16_t);
    const uint64_t bytes = (*model)->weight_bytes() + kv_bytes;
    nlohmann::json j = {{"engine", "llmsvc"}, {"test", "decode"}, {"ctx", ctx}, {"threads", threads},
                        {"tokens_per_s", tok_s}, {"bytes_per_token", bytes}, {"gb_per_s", tok_s * bytes / 1e9}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  {
    const GraphFigures& f = fwd.figures();
    nlohmann::json devs = nlohmann::json::array();
    for (const auto& d : f.devices)
      devs.push_back({{"name", d.name}, {"ops", d.ops}, {"bytes", d.bytes}, {"transfers", d.transfers}, {"transfer_bytes", d.transfer_bytes},
                      {"busy_s", d.busy_s}, {"idle_s", f.run_s - d.busy_s}});
    nlohmann::json j = {{"test", "devices"}, {"placement", placement}, {"copies_per_step", f.copies_per_step},
                        {"runs", f.runs}, {"preparations", f.preparations}, {"arena_bytes", f.arena_bytes},
                        {"naive_bytes", f.naive_bytes},
                        {"devices", devs}};
    std::printf("%s\n", j.dump().c_str());
  }
  if (membw) {
    nlohmann::json j = {{"test", "memory_read_bandwidth"}, {"threads", threads},
                        {"gb_per_s", memory_read_gbps(threads, size_t{1} << 30)},
                        {"weights_sized_gb_per_s", memory_read_gbps(threads, (*model)->weight_bytes())}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}
