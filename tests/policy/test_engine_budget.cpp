// SPDX-License-Identifier: Apache-2.0
// The embedded engine under a KV budget that holds about one context: calls on several
// contexts in turn evict each other's chunks, which come back (loaded from their swap files,
// or recomputed where a file was not yet written) on use, and the answers are those of an
// engine without pressure.
//
// Recompute runs batches of several tokens. Like llama.cpp, the engine sums one lone token
// (decode) in other orders than a batch, so K/V that decode computed come back from
// recompute equal to rounding, not bit for bit, and a later greedy token may flip. The
// exactness test therefore evaluates every token in batches (prompts of several tokens,
// one generated token per call, which the next call's prompt batch evaluates): there,
// recomputed chunks are bit-identical and so must every answer be. Loaded chunks are
// bit-identical whatever computed them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "llmsvc/llmsvc.h"
#include "policy/compression/context_compression.h"  // kAllocationHorizonChunks
#include "tests/common/test_paths.h"

namespace {

std::string last_error() { return llmsvc_last_error(); }

llmsvc_service* bind(uint64_t budget, const std::string& state, float kv_ratio = -1) {
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = "embedded";
  const std::string model = llmsvc::test::default_model_path();
  o.model_path = model.c_str();
  o.n_threads = 2;
  o.n_ctx = 1024;
  o.kv_budget_bytes = budget;
  o.state_dir = state.c_str();
  o.kv_ratio = kv_ratio;
  llmsvc_service* svc = nullptr;
  EXPECT_EQ(llmsvc_bind(&o, &svc), LLMSVC_OK) << last_error();
  return svc;
}

int append_piece(const char* piece, size_t len, int32_t, void* user) {
  static_cast<std::string*>(user)->append(piece, len);
  return 0;
}

// Three raw contexts, `rounds` rounds of calls in turn (max_tokens each); every answer, in order.
// The contexts are closed at the end, or handed to `keep_open` (embedded, a closed context
// leaves the engine, and its chunks with it).
std::vector<std::string> run_rounds(llmsvc_service* svc, const std::string& tag, int max_tokens = 24, int rounds = 4,
                                    std::vector<llmsvc_context*>* keep_open = nullptr) {
  const char* starts[] = {"The history of Rome begins", "In a quiet village by the sea", "The recipe for bread needs"};
  std::vector<llmsvc_context*> ctxs;
  for (int i = 0; i < 3; ++i) {
    llmsvc_context_options o;
    llmsvc_context_options_init(&o);
    const std::string id = tag + std::to_string(i);
    o.id = id.c_str();
    o.raw = 1;
    llmsvc_context* c = nullptr;
    EXPECT_EQ(llmsvc_context_new(svc, &o, &c), LLMSVC_OK) << last_error();
    ctxs.push_back(c);
  }
  std::vector<std::string> out;
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < 3; ++i) {
      const std::string prompt = round == 0 ? starts[i] : " Then, some years later,";
      llmsvc_call_options co;
      llmsvc_call_options_init(&co);
      co.max_tokens = max_tokens;
      std::string text;
      EXPECT_EQ(llmsvc_call(ctxs[i], prompt.data(), prompt.size(), &co, append_piece, &text, nullptr), LLMSVC_OK)
          << last_error();
      out.push_back(text);
    }
  }
  if (keep_open) keep_open->insert(keep_open->end(), ctxs.begin(), ctxs.end());
  else
    for (llmsvc_context* c : ctxs) llmsvc_context_close(c);
  return out;
}

TEST(EngineBudget, EvictedChunksAreRecomputedAndAnswersUnchanged) {
  ASSERT_TRUE(std::filesystem::exists(llmsvc::test::default_model_path())) << "run tools/scripts/fetch_model.sh";
  const std::string root = std::getenv("LLMSVC_STATE_DIR");
  llmsvc_service* free_svc = bind(0, root + "/free");
  const auto reference = run_rounds(free_svc, "f", 1, 12);
  llmsvc_unbind(free_svc);

  // SmolLM2: 30 layers x 2 x 16 tokens x 192 x 2 bytes = 360 KiB per chunk; a context here
  // grows to ~6 chunks (12 calls of ~8 tokens), so 10 chunks of budget hold one context and
  // a bit.
  const uint64_t chunk = 30ull * 2 * 16 * 192 * 2;
  llmsvc_service* svc = bind(10 * chunk, root + "/tight");
  std::vector<llmsvc_context*> open;
  const auto pressed = run_rounds(svc, "t", 1, 12, &open);
  llmsvc_stats st;
  llmsvc_stats_init(&st);
  ASSERT_EQ(llmsvc_get_stats(svc, &st), LLMSVC_OK);
  EXPECT_LE(st.kv_bytes, 10 * chunk);
  EXPECT_LE(st.kv_peak_bytes, 10 * chunk);
  EXPECT_GT(st.chunks_loaded + st.chunks_recomputed, 0u);  // evicted chunks came back
  llmsvc_context_info info;
  llmsvc_context_info_init(&info);
  ASSERT_EQ(llmsvc_context_info_get(svc, "t0", &info), LLMSVC_OK);
  EXPECT_GT(info.chunks_dropped + info.chunks_swapped, 0) << "the budget never pressed: the test proves nothing";
  EXPECT_EQ(info.chunks_f16 + info.chunks_q8 + info.chunks_q4 + info.chunks_q3 + info.chunks_q2, info.chunks_resident);
  for (llmsvc_context* c : open) llmsvc_context_close(c);
  llmsvc_unbind(svc);
  EXPECT_EQ(pressed, reference);
}

// With compression at the default ratio (4 bits on average), the same conversation holds half
// the f16 bytes while its contexts are young (8 bits below policy::kAllocationHorizonChunks
// compressible chunks) and a quarter once they are past it, and keeps answering.
TEST(EngineBudget, CompressionShrinksIdleContexts) {
  ASSERT_TRUE(std::filesystem::exists(llmsvc::test::default_model_path())) << "run tools/scripts/fetch_model.sh";
  const std::string root = std::getenv("LLMSVC_STATE_DIR");
  llmsvc_service* svc = bind(0, root + "/compressed", 0.5f);
  std::vector<llmsvc_context*> open;
  const auto answers = run_rounds(svc, "c", 24, 4, &open);
  for (const std::string& a : answers) EXPECT_FALSE(a.empty());
  const uint64_t chunk = 30ull * 2 * 16 * 192 * 2;
  for (const char* id : {"c0", "c1", "c2"}) {
    llmsvc_context_info info;
    llmsvc_context_info_init(&info);
    ASSERT_EQ(llmsvc_context_info_get(svc, id, &info), LLMSVC_OK);
    ASSERT_GE(info.chunks_resident, 4) << id;
    // At most two chunks stay f16 (the partial one and the one holding the last evaluated
    // position); the rest are 8-bit while young, else 4 bits on average (plus their min/scale
    // parameters).
    EXPECT_LE(info.chunks_f16, 2) << id;
    const int compressed = info.chunks_resident - info.chunks_f16;
    const bool young = compressed < llmsvc::policy::kAllocationHorizonChunks;
    if (young) {
      EXPECT_EQ(info.chunks_q8, compressed) << id;
    }
    const uint64_t per = young ? chunk * 60 / 100 : chunk * 35 / 100;  // q8 0.58, q4 0.33 with params
    EXPECT_LT(info.kv_resident_bytes, info.chunks_f16 * chunk + compressed * per) << id;
    EXPECT_LT(info.kv_resident_bytes, static_cast<uint64_t>(info.chunks_resident) * chunk * 3 / 4) << id;
  }
  for (llmsvc_context* c : open) llmsvc_context_close(c);
  llmsvc_unbind(svc);
}

}  // namespace
