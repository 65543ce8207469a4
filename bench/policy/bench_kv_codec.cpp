// SPDX-License-Identifier: Apache-2.0
// KV block codecs on one whole chunk of SmolLM2-135M: 30 layers x (K block + V block), each
// 16 tokens x 192 channels (3 kv heads x 64). One iteration (Time) = the whole chunk, one thread.
// Args: the format's bits (quantize / dequantize), or from and to bits (requantize).
// LLMSVC_BENCH_TARGET=AVX2 (or any Highway target name) restricts the codecs to that target.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "bench/bench_target.h"
#include "hal/host/fp16.h"
#include "policy/compression/kv_codec.h"

namespace llmsvc::policy {
namespace {

constexpr int kLayers = 30;
constexpr hal::KvBlockShape kShape{16, 3, 64};
constexpr hal::KvPart kParts[] = {hal::KvPart::key, hal::KvPart::value};

hal::KvFormat format(int64_t bits) { return static_cast<hal::KvFormat>(bits); }

// The chunk's f16 blocks: [layer][part] -> n_tokens x kv_dim halves.
std::vector<std::vector<uint16_t>> f16_chunk() {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<uint16_t>> blocks(2 * kLayers);
  for (auto& b : blocks) {
    b.resize(static_cast<size_t>(kShape.n_tokens) * kShape.kv_dim());
    for (auto& h : b) h = hal::fp32_to_fp16(nd(rng));
  }
  return blocks;
}

// The same chunk encoded in f: one buffer per block.
std::vector<std::vector<uint8_t>> q_chunk(hal::KvFormat f) {
  const auto src = f16_chunk();
  std::vector<std::vector<uint8_t>> out(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    out[i].resize(hal::kv_block_bytes(f, kParts[i % 2], kShape));
    kv_quantize(kParts[i % 2], kShape, src[i].data(), f, out[i].data());
  }
  return out;
}

void set_counters(benchmark::State& state) {
  state.SetItemsProcessed(state.iterations() * 2 * kLayers * kShape.n_tokens * kShape.kv_dim());  // elements
}

void BM_QuantizeChunk(benchmark::State& state) {
  const hal::KvFormat f = format(state.range(0));
  const auto src = f16_chunk();
  auto dst = q_chunk(f);
  for (auto _ : state) {
    for (size_t i = 0; i < src.size(); ++i) kv_quantize(kParts[i % 2], kShape, src[i].data(), f, dst[i].data());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}
BENCHMARK(BM_QuantizeChunk)->Arg(8)->Arg(4)->Arg(2);

void BM_RequantizeChunk(benchmark::State& state) {
  const hal::KvFormat from = format(state.range(0)), to = format(state.range(1));
  const auto src = q_chunk(from);
  auto dst = q_chunk(to);
  for (auto _ : state) {
    for (size_t i = 0; i < src.size(); ++i) kv_requantize(kParts[i % 2], kShape, from, src[i].data(), to, dst[i].data());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}
BENCHMARK(BM_RequantizeChunk)->Args({8, 4})->Args({8, 2})->Args({4, 2});

void BM_DequantizeChunk(benchmark::State& state) {
  const hal::KvFormat f = format(state.range(0));
  const auto src = q_chunk(f);
  auto dst = f16_chunk();
  for (auto _ : state) {
    for (size_t i = 0; i < src.size(); ++i) kv_dequantize(kParts[i % 2], kShape, f, src[i].data(), dst[i].data());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}
BENCHMARK(BM_DequantizeChunk)->Arg(8)->Arg(4)->Arg(2);

}  // namespace
}  // namespace llmsvc::policy

LLMSVC_BENCHMARK_MAIN()
