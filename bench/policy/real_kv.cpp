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
  policy::KvChunkStore store(policy::KvGeometry{cfg.n_layer, cfg.kv_dim(), kChunk}, 0);
  policy::KvSequence seq(store);
  LLMSVC_RETURN_IF_ERROR(seq.reserve(n_tokens));
  Forward fwd(**model, dev);
  std::vector<float> logits;
  LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, tokens, 0, false, logits));

  RealKv kv{cfg.n_layer, cfg.n_head_kv, cfg.head_dim, kChunk, {}};
  const size_t block = size_t{kChunk} * cfg.kv_dim() * sizeof(uint16_t);
  for (int c = 0; c < n_tokens / kChunk; ++c) {
    std::vector<uint8_t> payload(2 * block * cfg.n_layer);
    for (int l = 0; l < cfg.n_layer; ++l) {
      std::memcpy(payload.data() + (2 * l) * block, seq.chunk_k(c, l), block);
      std::memcpy(payload.data() + (2 * l + 1) * block, seq.chunk_v(c, l), block);
    }
    kv.chunks.push_back(std::move(payload));
  }
  return kv;
}

}  // namespace llmsvc::bench
