// SPDX-License-Identifier: Apache-2.0
// Matmul micro-benchmark on the SmolLM2-135M shapes (Q4_1 layers, Q8_0 output matrix) for
// 1..256 tokens and 1..2 threads. Each iteration is one matmul; consecutive iterations use
// different copies of the weight (one per layer, like a decode step walking the model), so
// weights stream from cache/memory instead of staying in L2. Reports bytes_per_second of
// weight streamed (the decode figure of merit) and GMAC/s.
//
//   bench_matmul [--benchmark_filter=...] [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hal/host/fp16.h"
#include "hal/cpu/quant/matmul.h"

namespace llmsvc::hal::cpu {
namespace {

struct Shape {
  const char* name;
  int64_t rows, cols;
  WeightType type;
  int layers;  // weight copies to cycle through
};

constexpr Shape kShapes[] = {
    {"attn_q_o", 576, 576, WeightType::Q4_1, 30},  {"attn_kv", 192, 576, WeightType::Q4_1, 30},
    {"ffn_up", 1536, 576, WeightType::Q4_1, 30},   {"ffn_down", 576, 1536, WeightType::Q4_1, 30},
    {"output", 49152, 576, WeightType::Q8_0, 1},
    // Not SmolLM2: K-quant shapes of a 2048-wide model (Llama-3.2-1B Q4_K_M).
    {"q4k_2048", 2048, 2048, WeightType::Q4_K, 8},   {"q6k_ffn_down", 2048, 8192, WeightType::Q6_K, 4},
};

// Random blocks with sane fp16 scales.
std::vector<uint8_t> random_weight(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t rb = row_bytes(s.type, s.cols), bs = block_bytes(s.type);
  std::vector<uint8_t> w(rb * s.rows);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  // Scale fields: d first (Q6_K: d last), then m / dmin for Q4_1 and Q4_K.
  const size_t d_off = s.type == WeightType::Q6_K ? 208 : 0;
  const bool has_min = s.type == WeightType::Q4_1 || s.type == WeightType::Q4_K;
  for (size_t i = 0; i < w.size(); i += bs) {
    const uint16_t d = fp32_to_fp16(0.001f + 0.01f * static_cast<float>(rng() % 1000) / 1000.f);
    const uint16_t m = fp32_to_fp16(0.05f * static_cast<float>(rng() % 1000) / 1000.f);
    std::memcpy(&w[i + d_off], &d, 2);
    if (has_min) std::memcpy(&w[i + 2], &m, 2);
  }
  return w;
}

void BM_matmul(benchmark::State& state, Shape s, int n_tokens, int threads) {
  // One copy of the bytes per layer: weights that are not repacked are read in place.
  std::vector<std::vector<uint8_t>> bytes(s.layers, random_weight(s, 1));
  std::vector<std::unique_ptr<CpuWeight>> ws;
  {
    for (int l = 0; l < s.layers; ++l) {
      auto w = prepare_cpu_weight({s.type, bytes[l].data(), s.rows, s.cols, row_bytes(s.type, s.cols)});
      if (!w.ok()) {
        state.SkipWithError(w.status().message().c_str());
        return;
      }
      ws.push_back(std::move(w).value());
      if (ws.back()->repacked()) std::vector<uint8_t>().swap(bytes[l]);
    }
  }
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  std::vector<float> x(n_tokens * s.cols), y(n_tokens * s.rows);
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(threads);
  MatmulScratch scratch;
  size_t l = 0;
  for (int i = 0; i < 3 * s.layers; ++i) matmul(*ws[i % s.layers], x.data(), n_tokens, y.data(), pool, scratch);
  for (auto _ : state) {
    matmul(*ws[l], x.data(), n_tokens, y.data(), pool, scratch);
    benchmark::DoNotOptimize(y.data());
    if (++l == ws.size()) l = 0;
  }
  const double macs = static_cast<double>(s.rows) * s.cols * n_tokens;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(row_bytes(s.type, s.cols) * s.rows));
  state.counters["GMAC/s"] = benchmark::Counter(macs * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace
}  // namespace llmsvc::hal::cpu

int main(int argc, char** argv) {
  using llmsvc::hal::cpu::kShapes;
  for (const auto& s : kShapes) {
    for (int n_tokens : {1, 16, 64, 256}) {
      for (int threads : {1, 2}) {
        const std::string name = std::string("BM_matmul/") + s.name + "/tokens:" + std::to_string(n_tokens) +
                                 "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), llmsvc::hal::cpu::BM_matmul, s, n_tokens, threads)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
