// SPDX-License-Identifier: Apache-2.0
// Random LoRA adapters in llama.cpp's GGUF format for a given model (F32 or F16 A and B), written with
// GgufWriter: what the LoRA tests, the engine's adapter tests and the black-box suites (through
// tests/adapter/make_random_lora) run adapters with; a real model has no published adapter here.
// Failures throw (test code).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/gguf/gguf_writer.h"
#include "hal/host/fp16.h"

namespace llmsvc::test {

inline constexpr const char* kMatrixName[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

// One adapted matrix: A [r][n_in], B [n_out][r], row-major F32.
struct LoraPair {
  std::string base;  // "blk.<il>.<matrix>.weight"
  int64_t n_in = 0, n_out = 0;
  std::vector<float> a, b;
  std::vector<uint16_t> a16, b16;  // the same as F16, where make_f16 made them
};

struct RandomLora {
  int rank = 0;
  float alpha = 0;
  std::vector<LoraPair> pairs;
  float scale() const { return alpha == 0 ? 1.0f : alpha / static_cast<float>(rank); }
};

// A random adapter of `rank` on `matrices` (indices into kMatrixName) of every layer of `model`:
// A ~ N(0, 1/n_in), B ~ N(0, b_std^2) (b_std 0: sqrt(0.5 / rank)).
inline RandomLora random_lora(const std::string& model, int rank, float alpha, std::vector<int> matrices, uint32_t seed,
                              float b_std = 0.0f) {
  auto f = gguf::GgufFile::open(model);
  if (!f.ok()) throw std::runtime_error(f.status().message());
  RandomLora l;
  l.rank = rank;
  l.alpha = alpha;
  std::mt19937 rng(seed);
  for (int il = 0;; ++il) {
    if (!(*f)->find_tensor("blk." + std::to_string(il) + ".attn_q.weight")) break;
    for (int m : matrices) {
      LoraPair p;
      p.base = "blk." + std::to_string(il) + "." + kMatrixName[m] + ".weight";
      const gguf::TensorInfo* t = (*f)->find_tensor(p.base);
      p.n_in = static_cast<int64_t>(t->ne[0]);
      p.n_out = static_cast<int64_t>(t->ne[1]);
      std::normal_distribution<float> na(0.0f, 1.0f / std::sqrt(static_cast<float>(p.n_in)));
      std::normal_distribution<float> nb(0.0f, b_std > 0.0f ? b_std : std::sqrt(0.5f / static_cast<float>(rank)));
      for (int64_t i = 0; i < rank * p.n_in; ++i) p.a.push_back(na(rng));
      for (int64_t i = 0; i < p.n_out * rank; ++i) p.b.push_back(nb(rng));
      l.pairs.push_back(std::move(p));
    }
  }
  return l;
}

inline std::span<const uint8_t> bytes_of(const std::vector<float>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
}

// Stores `l`'s matrices as F16 too (as trained adapters are stored): add_lora_tensors writes
// those then.
inline void make_f16(RandomLora& l) {
  for (LoraPair& p : l.pairs) {
    p.a16.resize(p.a.size());
    p.b16.resize(p.b.size());
    hal::fp32_to_fp16_row(p.a.data(), p.a16.data(), static_cast<int64_t>(p.a.size()));
    hal::fp32_to_fp16_row(p.b.data(), p.b16.data(), static_cast<int64_t>(p.b.size()));
  }
}

// The adapter's tensors, named `prefix` + base + ".lora_a/.lora_b", added to `w` (which keeps
// pointers to `l`'s data until it writes).
inline void add_lora_tensors(gguf::GgufWriter& w, const RandomLora& l, const std::string& prefix = "") {
  auto add = [&](const std::string& name, const std::vector<float>& v, const std::vector<uint16_t>& h, int64_t ne0,
                 int64_t ne1) {
    const std::vector<uint64_t> shape{static_cast<uint64_t>(ne0), static_cast<uint64_t>(ne1)};
    const Status s = h.empty() ? w.add_tensor(name, gguf::TensorType::F32, shape, bytes_of(v))
                               : w.add_tensor(name, gguf::TensorType::F16, shape,
                                              {reinterpret_cast<const uint8_t*>(h.data()), h.size() * sizeof(uint16_t)});
    if (!s.ok()) throw std::runtime_error(s.message());
  };
  for (const LoraPair& p : l.pairs) {
    add(prefix + p.base + ".lora_a", p.a, p.a16, p.n_in, l.rank);
    add(prefix + p.base + ".lora_b", p.b, p.b16, l.rank, p.n_out);
  }
}

// An adapter file's metadata for architecture `arch`.
inline gguf::GgufWriter adapter_writer(const std::string& arch, float alpha) {
  gguf::GgufWriter w;
  (void)w.set("general.type", gguf::string_value("adapter"));
  (void)w.set("general.architecture", gguf::string_value(arch));
  (void)w.set("adapter.type", gguf::string_value("lora"));
  (void)w.set("adapter.lora.alpha", gguf::float_value(gguf::ValueType::f32, alpha));
  return w;
}

inline void write_adapter(const RandomLora& l, const std::string& arch, const std::string& path) {
  gguf::GgufWriter w = adapter_writer(arch, l.alpha);
  add_lora_tensors(w, l);
  const Status s = w.write(path);
  if (!s.ok()) throw std::runtime_error(s.message());
}

// A random adapter on every layer's seven matrices of the model at `model`, written to `out`
// for that model's architecture.
inline void write_random_lora(const std::string& model, const std::string& out, int rank, float alpha, uint32_t seed,
                              float b_std = 0.0f, bool f16 = false) {
  auto f = gguf::GgufFile::open(model);
  if (!f.ok()) throw std::runtime_error(f.status().message());
  const auto arch = (*f)->get_string("general.architecture");
  if (!arch) throw std::runtime_error(model + ": no general.architecture");
  RandomLora l = random_lora(model, rank, alpha, {0, 1, 2, 3, 4, 5, 6}, seed, b_std);
  if (f16) make_f16(l);
  write_adapter(l, std::string(*arch), out);
}

}  // namespace llmsvc::test
