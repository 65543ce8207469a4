// SPDX-License-Identifier: Apache-2.0
// Outputs against llama.cpp on the same GGUF files (golden files from tools/golden):
// tokenizer ids, logits at the first positions, greedy continuations, chat prompt assembly.
//
// llmsvc computes llama.cpp's float operations in llama.cpp's order (its AVX-512 build, the
// one that made the goldens), so on x86 CPUs with FMA (AVX2 and up) the logits are its bits
// for every weight type, the K-quants included: greedy continuations must be identical token
// for token, all of them, and logits equal up to the goldens' 4-decimal rounding. On CPUs
// without FMA, or not x86, a last-bit difference can flip an int8 rounding in a later layer:
// there logits must agree closely and greedy continuations until llama.cpp's own top-1/top-2
// margin falls below the tie margin (see Tolerance).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "policy/kv_chunk_store.h"
#include "runtime/core/engine/engine.h"
#include "runtime/core/graph/forward.h"
#include "tests/golden/golden_file.h"

namespace llmsvc::test {
namespace {

struct Tolerance {
  double logit;       // max |logit - llama.cpp| at the recorded ids
  double tie_margin;  // greedy steps with a smaller llama.cpp margin may differ (0: none may)
};

bool ends_with(const std::string& s, const char* t) {
  return s.size() >= std::strlen(t) && s.compare(s.size() - std::strlen(t), std::string::npos, t) == 0;
}

// Exact: identical greedy tokens, logits equal up to the goldens' rounding to 4 decimals.
// Otherwise, per class: float weights, only f32 summation order differs; quantized 2-layer
// random models, int8 rounding flips; SmolLM2 (30 layers, large activations), flips compound
// (llama.cpp's own batch-vs-sequential evaluation of this model differs by up to ~1.5 logits).
Tolerance tolerance_for(const std::string& name) {
  if (exact_numerics()) return {1e-4, 0.0};
  if (name.rfind("SmolLM2", 0) == 0) return {1.0, 0.15};
  for (const char* t : {"-F32", "-F16", "-BF16"})
    if (ends_with(name, t)) return {0.05, 0.05};
  return {0.4, 0.15};
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    g_ = load_golden(GetParam());
    ASSERT_TRUE(std::filesystem::exists(g_.model_path)) << g_.model_path << " (run tools/scripts/fetch_model.sh)";
    m_ = load_model(g_);
    ASSERT_NE(m_.model, nullptr) << "model failed to load: " << g_.model_path;
  }
  Golden g_;
  LoadedModel m_;
};

TEST_P(GoldenTest, TokenizerMatchesLlamaCpp) {
  for (const auto& p : g_.json["prompts"]) {
    auto ids = m_.model->tokenizer().encode(p["rendered"].get<std::string>(), p["add_special"].get<bool>(),
                                            p["parse_special"].get<bool>());
    EXPECT_EQ(ids, p["tokens"].get<std::vector<int32_t>>()) << "prompt " << p["name"];
  }
}

TEST_P(GoldenTest, LogitsMatchLlamaCpp) {
  const ModelConfig& cfg = m_.model->config();
  policy::KvChunkStore store({cfg.n_layer, cfg.n_head_kv, cfg.head_dim, 16}, 0);
  Forward fwd(*m_.model, *m_.device, 64);
  const Tolerance tol = tolerance_for(g_.name);
  double worst = 0;
  for (const auto& p : g_.json["prompts"]) {
    auto toks = p["tokens"].get<std::vector<int32_t>>();
    policy::KvSequence seq(store);
    std::vector<float> logits;
    ASSERT_TRUE(fwd.eval(seq, toks, 0, true, logits).ok());
    for (const auto& at : p["logits"]) {
      const int pos = at["pos"];
      const float* row = logits.data() + size_t(pos) * cfg.n_vocab;
      for (const char* key : {"top", "probe"}) {
        for (const auto& e : at[key]) {
          const int id = e[0];
          const double ref = e[1], ours = row[id], d = std::abs(ours - ref);
          worst = std::max(worst, d);
          EXPECT_LE(d, tol.logit) << p["name"] << " pos " << pos << " id " << id << ": ours " << ours << " llama.cpp " << ref;
        }
      }
      // The argmax agrees unless llama.cpp's own top two are within the tie margin (exact:
      // unless they are equal in the golden's 4 decimals).
      const auto& top = at["top"];
      int best = 0;
      for (int i = 1; i < cfg.n_vocab; ++i) if (row[i] > row[best]) best = i;
      if (top.size() >= 2 && top[0][1].get<double>() - top[1][1].get<double>() > std::max(tol.tie_margin, 2 * tol.logit)) {
        EXPECT_EQ(best, top[0][0].get<int>()) << p["name"] << " pos " << pos;
      }
    }
  }
  RecordProperty("max_abs_logit_diff", std::to_string(worst));
  std::printf("[ %s ] max |logit - llama.cpp| = %.5f\n", g_.name.c_str(), worst);
}

TEST_P(GoldenTest, GreedyMatchesLlamaCpp) {
  const ModelConfig& cfg = m_.model->config();
  policy::KvChunkStore store({cfg.n_layer, cfg.n_head_kv, cfg.head_dim, 16}, 0);
  Forward fwd(*m_.model, *m_.device, 256);
  const Tolerance tol = tolerance_for(g_.name);
  int total = 0, matched = 0;
  for (const auto& p : g_.json["prompts"]) {
    auto toks = p["tokens"].get<std::vector<int32_t>>();
    auto want = p["greedy"].get<std::vector<int32_t>>();
    auto margins = p["greedy_margins"].get<std::vector<double>>();
    policy::KvSequence seq(store);
    std::vector<float> logits;
    ASSERT_TRUE(fwd.eval(seq, toks, 0, false, logits).ok());
    int pos = static_cast<int>(toks.size());
    for (size_t i = 0; i < want.size(); ++i) {
      int best = 0;
      for (int v = 1; v < cfg.n_vocab; ++v) if (logits[v] > logits[best]) best = v;
      total++;
      if (best != want[i]) {
        EXPECT_LT(margins[i], tol.tie_margin) << p["name"] << ": step " << i << " chose " << best << ", llama.cpp "
                                          << want[i] << " with margin " << margins[i];
        break;  // past a near-tie (or a failure) the two continuations differ
      }
      matched++;
      const int32_t t = want[i];
      ASSERT_TRUE(fwd.eval(seq, std::span<const int32_t>(&t, 1), pos++, false, logits).ok());
    }
  }
  std::printf("[ %s ] greedy: %d of %d tokens identical to llama.cpp\n", g_.name.c_str(), matched, total);
}

// The engine assembles a chat turn into exactly the tokens llama.cpp gets from the
// model's own Jinja template.
TEST_P(GoldenTest, ChatPromptAssemblyMatchesTemplate) {
  EngineOptions eo;
  eo.model_path = g_.model_path;
  eo.n_threads = 2;
  eo.n_ctx = 512;
  auto engine = Engine::create(eo);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  for (const auto& p : g_.json["prompts"]) {
    if (!p["chat"].get<bool>()) continue;
    auto id = (*engine)->create_context({});
    ASSERT_TRUE(id.ok());
    CallParams cp;
    cp.max_tokens = 0;
    CallStats st;
    ASSERT_TRUE((*engine)->call(*id, p["text"].get<std::string>(), cp, nullptr, &st).ok());
    EXPECT_EQ(st.prompt_ids, p["tokens"].get<std::vector<int32_t>>()) << p["name"];
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, GoldenTest, ::testing::ValuesIn(golden_names()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

}  // namespace
}  // namespace llmsvc::test
