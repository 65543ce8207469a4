// SPDX-License-Identifier: Apache-2.0
// What the LoRA tests share: random F32 adapters written with GgufWriter (as an adapter file,
// or as an elastic model's recovery tensors), models with the adapter merged into the weights
// (W + scale * B A), and the logits of a forward pass.
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "policy/kv_chunk_store.h"
#include "runtime/core/gguf/gguf_writer.h"
#include "runtime/core/graph/forward.h"
#include "tests/common/random_lora.h"
#include "tests/model/bad_input_util.h"

namespace llmsvc::test {

// `model` (F32 weights) with W + scale * B A in place of each adapted weight (and `extra`
// metadata set), written to `out`.
inline void write_merged(const std::string& model, const RandomLora& l, const std::string& out) {
  auto f = gguf::GgufFile::open(model);
  if (!f.ok()) throw std::runtime_error(f.status().message());
  const gguf::GgufFile& src = **f;
  auto w = gguf::GgufWriter::from_file(src);
  if (!w.ok() || !w->add_tensors_from(src).ok()) throw std::runtime_error("merged: copy");
  std::vector<std::vector<float>> merged;
  merged.reserve(l.pairs.size());
  for (const LoraPair& p : l.pairs) {
    const gguf::TensorInfo* t = src.find_tensor(p.base);
    if (t->type != gguf::TensorType::F32) throw std::runtime_error("merged: not F32");
    std::vector<float>& m = merged.emplace_back(static_cast<size_t>(p.n_in * p.n_out));
    std::memcpy(m.data(), t->data, m.size() * sizeof(float));
    for (int64_t o = 0; o < p.n_out; ++o)
      for (int64_t i = 0; i < p.n_in; ++i) {
        double acc = 0;
        for (int r = 0; r < l.rank; ++r) acc += double(p.b[o * l.rank + r]) * p.a[r * p.n_in + i];
        m[o * p.n_in + i] += l.scale() * static_cast<float>(acc);
      }
    if (!w->set_tensor_data(p.base, bytes_of(m)).ok()) throw std::runtime_error("merged: set " + p.base);
  }
  const Status s = w->write(out);
  if (!s.ok()) throw std::runtime_error(s.message());
}

inline std::unique_ptr<Model> load_model(const std::string& path, hal::Device& dev = test_device()) {
  auto m = Model::load(path, dev);
  if (!m.ok()) throw std::runtime_error(path + ": " + m.status().message());
  return std::move(m).value();
}

inline std::unique_ptr<LoraAdapter> load_adapter(const std::string& path, const Model& m,
                                                 hal::Device& dev = test_device()) {
  auto a = LoraAdapter::load(path, m, dev);
  if (!a.ok()) throw std::runtime_error(path + ": " + a.status().message());
  return std::move(a).value();
}

inline std::vector<int32_t> probe_tokens(const Model& m, int n) {
  auto ids = m.tokenizer().encode(
      "The service owns the model, the memory and the accelerators; the applications own their conversations.", true,
      false);
  while (static_cast<int>(ids.size()) < n) ids.insert(ids.end(), ids.begin() + 1, ids.end());
  ids.resize(n);
  return ids;
}

// Every row's logits of `tokens` in one prompt, then 3 single-token decode steps (the KV cache
// where the forward's device keeps it).
inline std::vector<float> logits_of(Forward& fwd, const Model& m, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = m.config();
  policy::KvChunkStore store({c.n_layer, c.n_head_kv, c.head_dim, 16}, 0, policy::EvictionOrder::lctru, &fwd.kv_memory());
  policy::KvSequence seq(store);
  std::vector<float> all, step;
  const Status s = fwd.eval(seq, tokens, 0, true, all);
  if (!s.ok()) throw std::runtime_error(s.message());
  for (int i = 0; i < 3; ++i) {
    const int32_t t[] = {static_cast<int32_t>(i + 5)};
    const Status e = fwd.eval(seq, t, static_cast<int>(tokens.size()) + i, false, step);
    if (!e.ok()) throw std::runtime_error(e.message());
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

inline double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = a.size() == b.size() ? 0 : 1e30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - b[i]));
  return d;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace llmsvc::test
