// SPDX-License-Identifier: Apache-2.0
// Calibration passes: activation magnitudes through the forward's tap, and windowed loss.
#include "tools/elastify/calibration.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "policy/kv_chunk_store.h"
#include "runtime/core/engine/token_trail.h"

namespace llmsvc::elastify {
namespace {

policy::KvGeometry geometry(const ModelConfig& c) { return {c.n_layer, c.n_head_kv, c.head_dim, 16}; }

// Windows of `window` tokens over `tokens` (the last partial one dropped unless it is the only one).
int n_windows(size_t n_tokens, int window) {
  return std::max<int>(1, static_cast<int>(n_tokens / static_cast<size_t>(window)));
}

}  // namespace

Result<MeanAbs> mean_abs_activations(const Model& model, hal::Device& device, std::span<const int32_t> tokens, int window) {
  const ModelConfig& c = model.config();
  if (tokens.size() < 2 || window < 2) return Status(Code::invalid_argument, "calibration: too few tokens");
  window = std::min<int>(window, static_cast<int>(tokens.size()));
  MeanAbs sum;
  sum.ffn.assign(c.n_layer, std::vector<double>(c.n_ff, 0.0));
  sum.attn.assign(c.n_layer, std::vector<double>(static_cast<size_t>(c.n_head) * c.head_dim, 0.0));
  uint64_t rows = 0, attn_rows = 0;
  Forward fwd(model, device, std::min(window, Forward::kDefaultBatch));
  fwd.set_mass_tracking(false);
  fwd.set_tap([&](int layer, Forward::TapPoint point, const float* a, int n, int64_t cols) {
    const bool ffn = point == Forward::TapPoint::ffn_act;
    std::vector<double>& s = ffn ? sum.ffn[layer] : sum.attn[layer];
    cols = std::min<int64_t>(cols, static_cast<int64_t>(s.size()));
    for (int t = 0; t < n; ++t)
      for (int64_t j = 0; j < cols; ++j) s[j] += std::fabs(a[t * cols + j]);
    if (layer == 0) (ffn ? rows : attn_rows) += static_cast<uint64_t>(n);
  });
  policy::KvChunkStore store(geometry(c), 0);
  std::vector<float> logits;
  const int nw = n_windows(tokens.size(), window);
  for (int w = 0; w < nw; ++w) {
    policy::KvSequence seq(store);
    // Every row's activations are wanted, so each token of the window runs the whole graph.
    LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, tokens.subspan(size_t(w) * window, window), 0, true, logits));
  }
  if (rows == 0 || attn_rows == 0) return Status(Code::internal, "calibration: the forward reported no activations");
  for (auto& layer : sum.ffn)
    for (double& v : layer) v /= static_cast<double>(rows);
  for (auto& layer : sum.attn)
    for (double& v : layer) v /= static_cast<double>(attn_rows);
  return sum;
}

Result<double> mean_nll(Forward& fwd, const Model& model, std::span<const int32_t> tokens, int window) {
  const ModelConfig& c = model.config();
  if (tokens.size() < 4 || window < 4) return Status(Code::invalid_argument, "loss: too few tokens");
  window = std::min<int>(window, static_cast<int>(tokens.size()));
  policy::KvChunkStore store(geometry(c), 0, policy::EvictionOrder::lctru, &fwd.kv_memory());
  std::vector<float> logits;
  double nll = 0;
  uint64_t scored = 0;
  const int nw = n_windows(tokens.size(), window);
  // A model that adds a BOS to every text starts each window with it, in place of the window's
  // first token (as llama.cpp's perplexity does): without it Gemma-3 is lost (29.7 against 13.5).
  const std::vector<int32_t> bos = model.tokenizer().encode("", true, false);
  std::vector<int32_t> buf;
  for (int w = 0; w < nw; ++w) {
    std::span<const int32_t> win = tokens.subspan(size_t(w) * window, window);
    if (bos.size() == 1) {
      buf.assign(win.begin(), win.end());
      buf[0] = bos[0];
      win = buf;
    }
    policy::KvSequence seq(store);
    LLMSVC_RETURN_IF_ERROR(fwd.eval(seq, win, 0, true, logits));
    for (int j = window / 2; j < window - 1; ++j) {
      nll -= token_logprob(std::span<const float>(logits.data() + size_t(j) * c.n_vocab, c.n_vocab), win[j + 1]);
      ++scored;
    }
  }
  return nll / static_cast<double>(scored);
}

}  // namespace llmsvc::elastify
