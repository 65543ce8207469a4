// SPDX-License-Identifier: Apache-2.0
// Computes real K/V with the engine's forward pass.
#include "bench/policy/real_kv.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "hal/cpu/cpu_device.h"
#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/forward.h"
#include "runtime/core/model/model.h"

namespace llmsvc::bench {

Result<RealKv> compute_real_kv(const std::string& model_path, const std::string& text_path, int n_tokens, int threads) {
  std::ifstream f(text_path, std::ios::binary);
  if (!f) return Status(Code::not_found, "cannot read " + text_path);
  const std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  hal::cpu::CpuDevice dev(threads);
  auto model = Model::load(model_path, dev);
  if (!model.ok()) return model.status();
  const ModelConfig& cfg = (*model)->config();
  std::vector<TokenId> tokens = (*model)->tokenizer().encode(text, true, false);
  if (static_cast<int>(tokens.size()) < n_tokens) return Status(Code::invalid_argument, "text too short");
  tokens.resize(n_tokens);

  constexpr int kChunk = 16;
  policy::KvChunkStore store(policy::KvGeometry{cfg.n_layer, cfg.n_head_kv, cfg.head_dim, kChunk}, 0);
  policy::KvSequence seq(store);
  LLMSVC_RETURN_IF_ERROR(seq.reserve(n_tokens));
  Forward fwd(**model, dev);
  std::vector<float> logits;
  LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, tokens, 0, false, logits));

  RealKv kv{cfg.n_layer, cfg.n_head_kv, cfg.head_dim, kChunk, {}};
  // A chunk's memory is already the swap payload: per layer, the K block then the V block.
  const size_t bytes = store.geometry().chunk_bytes();
  for (int c = 0; c < n_tokens / kChunk; ++c) {
    const uint8_t* data = seq.chunk_data(c);
    kv.chunks.emplace_back(data, data + bytes);
  }
  return kv;
}

}  // namespace llmsvc::bench
