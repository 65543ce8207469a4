// SPDX-License-Identifier: Apache-2.0
// bench_weight_release ELASTIC.gguf [--threads N] [--rounds R] [--device SPEC]
// Memory pressure on an elastic model (issue 23): WeightResidency gives back the weight rows
// only levels above the smallest read, and a call at a larger level takes them back first.
// Measured, medians of R rounds: what the release gives back (its bytes, and the process's
// anonymous resident memory before and after, from /proc/self/status), how long it takes, the
// smallest level's decode step with and without the rows released (the same work: it reads
// none of them), and per level the restore's time against its prediction (restore_ms) and
// against reloading the model (Model::load, the peer: what a service without levels would do
// to get its memory back and then its model). One JSON line; a table on stderr. --device: where
// the model runs (an OpenCL device gives back its own memory: the pool's bytes in use, before
// and after, are reported too).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hal/devices/device_registry.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"
#include "runtime/core/model/weight_residency.h"

using namespace llmsvc;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The process's anonymous resident memory (kB), where the repacked weights live.
long rss_anon_kb() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    long v = 0;
    if (key == "RssAnon:" && in >> v) return v;
    std::string rest;
    std::getline(in, rest);
  }
  return -1;
}

// Median decode step (ms) at `level` after a 64-token context.
Result<double> decode_ms(Forward& fwd, const Model& m, int level, int steps) {
  const ModelConfig& c = m.config();
  policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, 16}, 0, policy::EvictionOrder::lctru, &fwd.kv_memory());
  policy::KvSequence seq(store);
  std::vector<int32_t> ctx(64);
  for (size_t i = 0; i < ctx.size(); ++i) ctx[i] = static_cast<int32_t>(100 + 7 * i) % c.n_vocab;
  std::vector<float> logits;
  LLMSVC_RETURN_IF_ERROR(fwd.set_level(level));
  LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, ctx, 0, false, logits));
  std::vector<double> t;
  for (int s = 0; s < steps; ++s) {
    const int32_t tok[] = {static_cast<int32_t>((300 + 11 * s) % c.n_vocab)};
    const double t0 = now_ms();
    LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, tok, 64 + s, false, logits));
    t.push_back(now_ms() - t0);
  }
  return median(t);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_weight_release ELASTIC.gguf [--threads N] [--rounds R] [--device SPEC]\n");
    return 2;
  }
  const std::string path = argv[1];
  int threads = 2, rounds = 5;
  std::string device = "cpu";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--device") device = argv[i + 1];
  }
  auto dev = hal::open_device(device, hal::DeviceOptions{threads});
  if (!dev.ok()) return std::fprintf(stderr, "%s\n", dev.status().message().c_str()), 1;
  std::vector<double> reload;
  std::unique_ptr<Model> model;
  for (int r = 0; r < std::min(rounds, 3); ++r) {
    model.reset();
    const double t0 = now_ms();
    auto m = Model::load(path, **dev);
    if (!m.ok()) return std::fprintf(stderr, "%s\n", m.status().message().c_str()), 1;
    reload.push_back(now_ms() - t0);
    model = std::move(m).value();
  }
  const ElasticSpec* spec = model->elastic();
  if (spec == nullptr) return std::fprintf(stderr, "%s is not an elastic model\n", path.c_str()), 1;
  WeightResidency weights(*model, **dev);
  if (!weights.can_release()) return std::fprintf(stderr, "nothing can be released on this device\n"), 1;
  Forward fwd(*model, **dev);

  nlohmann::json out;
  out["model"] = path;
  out["threads"] = threads;
  out["reload_ms"] = median(reload);
  out["weight_bytes"] = model->weight_bytes();
  // The release, and the smallest level's step with and without it.
  auto step_whole = decode_ms(fwd, *model, 0, 32);
  std::vector<double> release_ms;
  uint64_t given = 0;
  long anon_before = 0, anon_after = 0;
  uint64_t pool_before = 0, pool_after = 0;
  for (int r = 0; r < rounds; ++r) {
    if (!weights.make_resident(spec->full()).ok()) return 1;
    anon_before = rss_anon_kb();
    pool_before = (*dev)->memory().used();
    const double t0 = now_ms();
    given = weights.release_above(0);
    release_ms.push_back(now_ms() - t0);
    anon_after = rss_anon_kb();
    pool_after = (*dev)->memory().used();
  }
  auto step_released = decode_ms(fwd, *model, 0, 32);
  if (!step_whole.ok() || !step_released.ok()) return 1;
  out["released_bytes"] = given;
  out["rss_anon_kb_before"] = anon_before;
  out["rss_anon_kb_after"] = anon_after;
  out["device"] = (*dev)->name();
  out["device_pool_bytes_before"] = pool_before;
  out["device_pool_bytes_after"] = pool_after;
  out["release_ms"] = median(release_ms);
  out["decode_ms_smallest_whole"] = *step_whole;
  out["decode_ms_smallest_released"] = *step_released;
  std::fprintf(stderr, "%s: %.1f MB of weights; released above level %d %%: %.2f MB in %.3f ms (RssAnon %ld -> %ld kB)\n",
               path.c_str(), model->weight_bytes() / 1e6, spec->levels[0], given / 1e6, median(release_ms),
               anon_before, anon_after);
  std::fprintf(stderr, "smallest level's decode step: %.2f ms whole, %.2f ms released; reload of the model: %.1f ms\n",
               *step_whole, *step_released, median(reload));
  std::fprintf(stderr, "%6s %12s %12s %12s %10s\n", "level", "restored MB", "restore ms", "predicted", "x reload");
  out["levels"] = nlohmann::json::array();
  for (int l = 1; l <= spec->full(); ++l) {
    std::vector<double> ms, predicted;
    uint64_t bytes = 0;
    for (int r = 0; r < rounds; ++r) {
      if (!weights.make_resident(spec->full()).ok()) return 1;
      weights.release_above(0);
      const uint64_t before = weights.released_bytes();
      predicted.push_back(weights.restore_ms(l));
      const double t0 = now_ms();
      if (!weights.make_resident(l).ok()) return 1;
      ms.push_back(now_ms() - t0);
      bytes = before - weights.released_bytes();
    }
    const double m = median(ms);
    out["levels"].push_back({{"percent", spec->levels[static_cast<size_t>(l)]}, {"restored_bytes", bytes},
                             {"restore_ms", m}, {"predicted_ms", median(predicted)}, {"share_of_reload", m / median(reload)}});
    std::fprintf(stderr, "%6d %12.2f %12.3f %12.3f %10.3f\n", spec->levels[static_cast<size_t>(l)], bytes / 1e6, m,
                 median(predicted), m / median(reload));
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
