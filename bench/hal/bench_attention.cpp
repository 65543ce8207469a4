// SPDX-License-Identifier: Apache-2.0
// Attention over the chunked KV cache with SmolLM2-135M shapes (9 heads, 3 kv heads,
// head_dim 64, chunks of 16): decode at several context lengths (f16 chunks, and chunks
// compressed to q8/q4/q2), and prefill micro-batches.
// Args: {context or prompt length, threads}. LLMSVC_BENCH_TARGET=AVX2 (or any Highway target
// name) restricts the kernels to that instruction set, to compare the paths on one machine.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "bench/bench_target.h"
#include "hal/cpu/cpu_device.h"
#include "hal/host/fp16.h"
#include "policy/compression/kv_codec.h"

namespace llmsvc::hal::cpu {
namespace {

constexpr int kHeads = 9, kKvHeads = 3, kHeadDim = 64, kChunk = 16;

struct Setup {
  std::vector<std::vector<uint16_t>> k, v;
  std::vector<KvChunkView> chunks;
  AttentionParams params{kHeads, kKvHeads, kHeadDim, 0.125f, 0};

  explicit Setup(int n_keys) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const size_t row = static_cast<size_t>(kKvHeads) * kHeadDim;
    for (int done = 0; done < n_keys; done += kChunk) {
      const int n = std::min(kChunk, n_keys - done);
      k.emplace_back(row * kChunk);
      v.emplace_back(row * kChunk);
      for (size_t i = 0; i < row * n; ++i) {
        k.back()[i] = fp32_to_fp16(u(rng));
        v.back()[i] = fp32_to_fp16(u(rng));
      }
    }
    for (size_t i = 0; i < k.size(); ++i)
      chunks.push_back({k[i].data(), v[i].data(), std::min(kChunk, n_keys - static_cast<int>(i) * kChunk),
                        static_cast<int32_t>(i) * kChunk});
  }
};

void run(benchmark::State& state, int n_keys, int n_tokens, int threads) {
  Setup s(n_keys);
  CpuDevice dev(threads);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> q(static_cast<size_t>(n_tokens) * kHeads * kHeadDim), out(q.size());
  for (float& x : q) x = u(rng);
  std::vector<int32_t> pos(n_tokens);
  for (int t = 0; t < n_tokens; ++t) pos[t] = n_keys - n_tokens + t;
  for (auto _ : state) {
    dev.attention(q.data(), n_tokens, pos.data(), s.chunks.data(), static_cast<int>(s.chunks.size()), s.params,
                  out.data());
    benchmark::DoNotOptimize(out.data());
  }
  // K and V bytes of the visible keys, per call.
  state.SetBytesProcessed(state.iterations() * int64_t{2} * n_keys * kKvHeads * kHeadDim * 2);
}

void BM_AttentionDecode(benchmark::State& state) {
  run(state, static_cast<int>(state.range(0)), 1, static_cast<int>(state.range(1)));
}
BENCHMARK(BM_AttentionDecode)->ArgsProduct({{128, 1024, 4096}, {1, 2, 4}})->UseRealTime();

// Decode as the model runs it: 30 layers, each with its own KV, so the KV comes from
// L3/DRAM instead of staying hot in L2 between calls. Time is for all 30; items/s = layers/s.
void BM_AttentionDecode30Layers(benchmark::State& state) {
  constexpr int kLayers = 30;
  const int n_keys = static_cast<int>(state.range(0));
  std::vector<Setup> layers;
  layers.reserve(kLayers);
  for (int l = 0; l < kLayers; ++l) layers.emplace_back(n_keys);
  CpuDevice dev(static_cast<int>(state.range(1)));
  std::vector<float> q(static_cast<size_t>(kHeads) * kHeadDim, 0.5f), out(q.size());
  const int32_t pos = n_keys - 1;
  for (auto _ : state)
    for (const Setup& s : layers) {
      dev.attention(q.data(), 1, &pos, s.chunks.data(), static_cast<int>(s.chunks.size()), s.params, out.data());
      benchmark::DoNotOptimize(out.data());
    }
  state.SetItemsProcessed(state.iterations() * kLayers);  // items = layers
}
BENCHMARK(BM_AttentionDecode30Layers)->ArgsProduct({{1024, 4096}, {1, 2, 4}})->UseRealTime();

// The same decode over chunks compressed to q8/q4/q2 (policy/compression/kv_codec; range(1) = bits, 16 =
// f16 as above): one layer (its KV stays in cache between calls) and 30 layers (KV streamed
// from L3/DRAM as in the model). Bytes processed: the K and V bytes the call reads.
struct FormatSetup {
  std::vector<std::vector<uint8_t>> k, v;
  std::vector<KvChunkView> chunks;
  AttentionParams params{kHeads, kKvHeads, kHeadDim, 0.125f, 0};
  size_t bytes = 0;

  FormatSetup(int n_keys, KvFormat f) {
    const Setup src(n_keys);
    for (size_t i = 0; i < src.chunks.size(); ++i) {
      KvChunkView view = src.chunks[i];
      const KvBlockShape shape{view.n_tokens, kKvHeads, kHeadDim};
      k.emplace_back(kv_block_bytes(f, KvPart::key, shape));
      v.emplace_back(kv_block_bytes(f, KvPart::value, shape));
      if (f == KvFormat::f16) {
        std::memcpy(k.back().data(), src.k[i].data(), k.back().size());
        std::memcpy(v.back().data(), src.v[i].data(), v.back().size());
      } else {
        policy::kv_quantize(KvPart::key, shape, src.k[i].data(), f, k.back().data());
        policy::kv_quantize(KvPart::value, shape, src.v[i].data(), f, v.back().data());
      }
      bytes += k.back().size() + v.back().size();
      view.k = k.back().data();
      view.v = v.back().data();
      view.format = f;
      chunks.push_back(view);
    }
  }
};

void BM_AttentionDecodeFormat(benchmark::State& state) {
  const int n_keys = static_cast<int>(state.range(0));
  const FormatSetup s(n_keys, static_cast<KvFormat>(state.range(1)));
  CpuDevice dev(static_cast<int>(state.range(2)));
  std::vector<float> q(static_cast<size_t>(kHeads) * kHeadDim, 0.5f), out(q.size());
  const int32_t pos = n_keys - 1;
  for (auto _ : state) {
    dev.attention(q.data(), 1, &pos, s.chunks.data(), static_cast<int>(s.chunks.size()), s.params, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(s.bytes));
}
BENCHMARK(BM_AttentionDecodeFormat)->ArgsProduct({{1024, 4096}, {16, 8, 4, 2}, {1}})->UseRealTime();

void BM_AttentionDecode30LayersFormat(benchmark::State& state) {
  constexpr int kLayers = 30;
  const int n_keys = static_cast<int>(state.range(0));
  std::vector<FormatSetup> layers;
  layers.reserve(kLayers);
  for (int l = 0; l < kLayers; ++l) layers.emplace_back(n_keys, static_cast<KvFormat>(state.range(1)));
  CpuDevice dev(static_cast<int>(state.range(2)));
  std::vector<float> q(static_cast<size_t>(kHeads) * kHeadDim, 0.5f), out(q.size());
  const int32_t pos = n_keys - 1;
  for (auto _ : state)
    for (const FormatSetup& s : layers) {
      dev.attention(q.data(), 1, &pos, s.chunks.data(), static_cast<int>(s.chunks.size()), s.params, out.data());
      benchmark::DoNotOptimize(out.data());
    }
  state.SetItemsProcessed(state.iterations() * kLayers);  // items = layers
  state.SetBytesProcessed(state.iterations() * kLayers * static_cast<int64_t>(layers[0].bytes));
}
BENCHMARK(BM_AttentionDecode30LayersFormat)->ArgsProduct({{1024, 4096}, {16, 8, 4, 2}, {1}})->UseRealTime();

// The last micro-batch (up to 256 tokens) of a prompt of range(0) tokens: 256 is a whole
// prompt; 1024 sees the 768 cached keys before it too.
void BM_AttentionPrefill(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  run(state, n, std::min(n, 256), static_cast<int>(state.range(1)));
}
BENCHMARK(BM_AttentionPrefill)->ArgsProduct({{256, 1024}, {1, 2, 4}})->UseRealTime();

}  // namespace
}  // namespace llmsvc::hal::cpu

LLMSVC_BENCHMARK_MAIN()
