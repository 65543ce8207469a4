// SPDX-License-Identifier: Apache-2.0
// Perplexity of the default model on a real text against llama.cpp's, computed the way
// llama.cpp's perplexity tool does (see tools/golden/README.md): equal to its 6 printed
// decimals where llmsvc reproduces llama.cpp's bits (golden_file.h), else within 0.5%.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "policy/kv_chunk_store.h"
#include "runtime/core/graph/forward.h"
#include "tests/golden/golden_file.h"

namespace llmsvc::test {
namespace {

TEST(Perplexity, SmolLM2MatchesLlamaCpp) {
  Golden g = load_golden("SmolLM2-135M-Instruct.Q4_1");
  ASSERT_TRUE(std::filesystem::exists(g.model_path)) << g.model_path << " (run tools/scripts/fetch_model.sh)";
  const auto& ref = g.json["perplexity"];
  LoadedModel m = load_model(g);
  ASSERT_NE(m.model, nullptr);
  std::ifstream in(std::string(LLMSVC_SOURCE_DIR) + "/" + ref["text"].get<std::string>(), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto tokens = m.model->tokenizer().encode(ss.str(), true, false);
  ASSERT_EQ(static_cast<int>(tokens.size()), ref["n_tokens"].get<int>());

  const int n_ctx = ref["n_ctx"], n_chunks = static_cast<int>(tokens.size()) / n_ctx;
  ASSERT_EQ(n_chunks, ref["n_chunks"].get<int>());
  const ModelConfig& cfg = m.model->config();
  policy::KvChunkStore store({cfg.n_layer, cfg.n_head_kv, cfg.head_dim, 16}, 0);
  Forward fwd(*m.model, *m.device, n_ctx);
  double nll = 0;
  int scored = 0;
  std::vector<float> logits;
  for (int c = 0; c < n_chunks; ++c) {
    std::span<const int32_t> chunk(tokens.data() + size_t(c) * n_ctx, n_ctx);
    policy::KvSequence seq(store);
    ASSERT_TRUE(fwd.eval(seq, chunk, 0, true, logits).ok());
    for (int j = n_ctx / 2; j < n_ctx - 1; ++j) {
      nll -= log_prob(logits.data() + size_t(j) * cfg.n_vocab, cfg.n_vocab, chunk[j + 1]);
      scored++;
    }
  }
  const double ppl = std::exp(nll / scored), want = ref["ppl"];
  std::printf("perplexity: llmsvc %.6f, llama.cpp %.6f (%+.5f%%) over %d scored tokens\n", ppl, want,
              100 * (ppl - want) / want, scored);
  EXPECT_EQ(scored, ref["n_scored"].get<int>());
  if (exact_numerics()) {
    EXPECT_LE(std::abs(ppl - want), 1e-6);  // the golden's 6 decimals (and float vs double exp)
  } else {
    EXPECT_LE(std::abs(ppl - want) / want, 0.005);
  }
}

}  // namespace
}  // namespace llmsvc::test
