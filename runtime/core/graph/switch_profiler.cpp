// SPDX-License-Identifier: Apache-2.0
// Switch-cost profiling: timed recomputes and cold layer reads, then least-squares fits.
#include "runtime/core/graph/switch_profiler.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <memory>

#include "base/file_io.h"
#include "policy/swap/swap_io.h"
#include "policy/swap/swap_store.h"
#include "runtime/core/graph/forward.h"

namespace llmsvc {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Result<SwitchProfile> profile_switch_cost(const Model& model, hal::Device& device, const fileio::SafeDir& scratch,
                                          int reps) {
  reps = std::max(reps, 1);
  const ModelConfig& cfg = model.config();
  constexpr int kChunk = 16;
  const int L = cfg.n_layer;
  const std::array<int, 2> contexts = {128, 512};
  const std::array<int, 3> counts = {16, 64, 128};
  const int max_ctx = contexts.back();
  Forward fwd(model, device, max_ctx);
  // Chunks where the device keeps them (a GPU's own memory: its loads then include the copy in).
  policy::KvChunkStore store({cfg.n_layer, cfg.n_head_kv, cfg.head_dim, kChunk}, 0, policy::EvictionOrder::lctru,
                             &fwd.kv_memory());
  const bool copy_in = !fwd.kv_memory().host_visible();
  SwitchProfile out;
  std::vector<float> logits;

  // Recompute: the last n positions of a context of m, dropped and recomputed.
  std::vector<ProfileSample> rc;
  std::unique_ptr<policy::KvSequence> keep;  // the longest context, reused for the I/O part
  for (int m : contexts) {
    auto seq = std::make_unique<policy::KvSequence>(store);
    const std::vector<int32_t> toks = profile::tokens(m, cfg.n_vocab);
    LLMSVC_RETURN_IF_ERROR(fwd.eval(*seq, toks, 0, false, logits));
    for (int n : counts) {
      if (n > m) continue;
      std::vector<int32_t> ids(toks.end() - n, toks.end()), pos(n);
      for (int i = 0; i < n; ++i) pos[i] = m - n + i;
      std::vector<double> t;
      for (int r = 0; r < reps; ++r) {
        for (int c = (m - n) / kChunk; c < m / kChunk; ++c) {
          seq->drop(c);
          LLMSVC_RETURN_IF_ERROR(seq->make_resident(c));
        }
        const auto t0 = Clock::now();
        LLMSVC_RETURN_IF_ERROR(fwd.recompute(*seq, ids, pos, m));
        t.push_back(profile::seconds_since(t0) / L);
      }
      rc.push_back({"recompute", double(n), double(m), profile::median(t), 0});
    }
    if (m == max_ctx) keep = std::move(seq);
  }
  // The model is a + n (b + m c): fitted on the features n and n * m.
  for (ProfileSample& p : rc) p.x2 = p.x1 * p.x2;
  const auto rcc = profile::fit(rc);
  out.cost.rc_fixed_s = rcc[0];
  out.cost.rc_token_s = rcc[1];
  out.cost.rc_token_ctx_s = rcc[2];
  for (ProfileSample& p : rc) {
    p.x2 = p.x2 / std::max(p.x1, 1.0);  // back to the context length for the report
    p.fitted = out.cost.recompute_s(static_cast<int>(p.x1), static_cast<int>(p.x2));
  }

  // Loads: the context's chunks as files, f16 and q4, read one layer of k chunks at a time
  // (cold: the writer and the reader drop the pages they touch).
  auto io = policy::SwapIo::create();
  if (!io.ok()) return io.status();
  const std::string dir = "switch-profile.tmp";
  (void)scratch.remove_tree(dir);
  LLMSVC_RETURN_IF_ERROR(scratch.make_dirs(dir));
  std::vector<ProfileSample> ld;
  const int n_chunks = max_ctx / kChunk;
  Status status = Status::Ok();
  for (hal::KvFormat f : {hal::KvFormat::f16, hal::KvFormat::q4}) {
    const std::string sub = dir + (f == hal::KvFormat::f16 ? "/f16" : "/q4");
    auto st = policy::SwapStore::open(**io, scratch, sub);
    if (!st.ok()) {
      status = st.status();
      break;
    }
    std::vector<policy::ChunkIndex> index;
    for (int c = 0; c < n_chunks && status.ok(); ++c) {
      if (f != hal::KvFormat::f16) status = keep->compress(c, f);
      if (!status.ok()) break;
      policy::ChunkMeta meta;
      meta.model_hash = model.content_hash();
      meta.tokens_hash = static_cast<uint64_t>(c);
      meta.chunk_index = static_cast<uint32_t>(c);
      meta.first_pos = c * kChunk;
      meta.n_tokens = kChunk;
      meta.format = f;
      meta.n_layer = static_cast<uint16_t>(cfg.n_layer);
      meta.n_head_kv = static_cast<uint16_t>(cfg.n_head_kv);
      meta.head_dim = static_cast<uint16_t>(cfg.head_dim);
      std::vector<uint8_t> staged;  // a chunk in a GPU's memory, copied out
      const auto src = keep->host_bytes(c, staged);
      if (!src.ok()) {
        status = src.status();
        break;
      }
      auto idx = (*st)->store(meta, *src);
      if (!idx.ok()) status = idx.status();
      else index.push_back(*idx);
    }
    if (!status.ok()) break;
    const size_t layer_bytes = index[0].layer_bytes();
    std::vector<std::vector<uint8_t>> bufs(n_chunks, std::vector<uint8_t>(layer_bytes));
    int layer = 0;
    for (int k : {1, 8, n_chunks}) {
      std::vector<double> t;
      for (int r = 0; r < reps && status.ok(); ++r, layer = (layer + 1) % L) {
        std::vector<policy::LayerTarget> targets;
        for (int c = 0; c < k; ++c) targets.push_back({&index[c], bufs[c]});
        const auto t0 = Clock::now();
        for (const Status& s : (*st)->read_layer(layer, targets))
          if (!s.ok()) status = s;
        for (int c = 0; c < k && copy_in && status.ok(); ++c)
          status = keep->write_chunk(c, static_cast<size_t>(layer) * layer_bytes, bufs[c]);
        t.push_back(profile::seconds_since(t0));
      }
      if (!status.ok()) break;
      ld.push_back({"load", double(k), double(k) * double(layer_bytes), profile::median(t), 0});
    }
  }
  (void)scratch.remove_tree(dir);
  LLMSVC_RETURN_IF_ERROR(status);
  const auto ioc = profile::fit(ld);
  out.cost.io_fixed_s = ioc[0];
  out.cost.io_chunk_s = ioc[1];
  out.cost.io_byte_s = ioc[2];
  for (ProfileSample& p : ld) p.fitted = out.cost.load_s(static_cast<int>(p.x1), p.x2);
  out.cost.source = "profiled: " + device.name() + ", " + model.config().arch_name;
  out.samples = rc;
  out.samples.insert(out.samples.end(), ld.begin(), ld.end());
  return out;
}

}  // namespace llmsvc
