// SPDX-License-Identifier: Apache-2.0
// Random LoRA adapters in llama.cpp's GGUF format, for a given model: what tests and the
// conformance suite run adapters with (a real model has no published adapter to fetch here).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/core/gguf/gguf_file.h"
#include "runtime/core/gguf/gguf_writer.h"

namespace llmsvc::test {

struct RandomLora {
  int rank = 8;
  float alpha = 16.0f;
  uint64_t seed = 1;
  float b_scale = 0.02f;  // B's elements ~ N(0, b_scale); A's ~ N(0, 1/sqrt(n_in))
  // Matrices given an adapter, by their name's suffix; empty: every layer's seven.
  std::vector<std::string> targets;
};

// Writes an adapter for the model at `model_path` to `out` (F32 A and B for each target
// matrix): general.type "adapter", adapter.type "lora", adapter.lora.alpha, the model's
// general.architecture; `<tensor>.lora_a` ne [n_in, r], `<tensor>.lora_b` ne [r, n_out].
inline Status write_random_lora(const std::string& model_path, const std::string& out, const RandomLora& o = {}) {
  auto model = gguf::GgufFile::open(model_path);
  if (!model.ok()) return model.status();
  auto arch = (*model)->get_string("general.architecture");
  if (!arch) return Status(Code::invalid_argument, model_path + ": no general.architecture");
  std::vector<std::string> targets = o.targets;
  if (targets.empty())
    targets = {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
               "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
  gguf::GgufWriter w;
  LLMSVC_RETURN_IF_ERROR(w.set("general.architecture", gguf::string_value(std::string(*arch))));
  LLMSVC_RETURN_IF_ERROR(w.set("general.type", gguf::string_value("adapter")));
  LLMSVC_RETURN_IF_ERROR(w.set("adapter.type", gguf::string_value("lora")));
  LLMSVC_RETURN_IF_ERROR(w.set("adapter.lora.alpha", gguf::float_value(gguf::ValueType::f32, o.alpha)));
  std::mt19937_64 rng(o.seed);
  std::vector<std::vector<float>> data;  // kept alive until write()
  for (const gguf::TensorInfo& t : (*model)->tensors()) {
    const std::string name(t.name);
    bool wanted = false;
    for (const std::string& s : targets) wanted |= name.starts_with("blk.") && name.ends_with("." + s);
    if (!wanted) continue;
    const uint64_t n_in = t.ne[0], n_out = t.ne[1], r = static_cast<uint64_t>(o.rank);
    std::normal_distribution<float> a_dist(0.0f, 1.0f / std::sqrt(static_cast<float>(n_in)));
    std::normal_distribution<float> b_dist(0.0f, o.b_scale);
    auto& a = data.emplace_back(n_in * r);
    for (float& v : a) v = a_dist(rng);
    LLMSVC_RETURN_IF_ERROR(w.add_tensor(name + ".lora_a", gguf::TensorType::F32, {n_in, r},
                                        {reinterpret_cast<const uint8_t*>(a.data()), a.size() * sizeof(float)}));
    auto& b = data.emplace_back(r * n_out);
    for (float& v : b) v = b_dist(rng);
    LLMSVC_RETURN_IF_ERROR(w.add_tensor(name + ".lora_b", gguf::TensorType::F32, {r, n_out},
                                        {reinterpret_cast<const uint8_t*>(b.data()), b.size() * sizeof(float)}));
  }
  if (w.tensor_count() == 0) return Status(Code::invalid_argument, model_path + ": no tensor to adapt");
  return w.write(out);
}

}  // namespace llmsvc::test
