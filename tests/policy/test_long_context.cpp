// SPDX-License-Identifier: Apache-2.0
// A long context under a small KV budget: with the default n_ctx (the model's trained length,
// no longer capped at 4096) one SmolLM2 context grows to 6,000 tokens under a KV budget that
// holds a quarter of its f16 cache. The chunk store pages: each call's new chunks are f16
// while the call runs (pinned), and compression after each call narrows the older ones, so
// the context fits where its f16 cache never would. Through the public C API, as an app.
//
// Slow under ASan (6,000 tokens of prefill): the asan preset leaves it out, the release run
// keeps it (CMakePresets.json).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "llmsvc/llmsvc.h"
#include "tests/common/test_paths.h"

namespace {

constexpr int kTarget = 6000;      // tokens the context reaches: past the 4096 n_ctx once capped at
constexpr int kTokensPerCall = 200;  // each call's prompt, about: its f16 chunks must fit beside the rest

std::string last_error() { return llmsvc_last_error(); }

// Natural-looking text that does not repeat (a repeated prompt would let the model coast).
std::string passage(int call, int sentences) {
  static const char* const kSubjects[] = {"The harbour", "A small library", "The old mill", "Our neighbour",
                                          "The river", "A travelling musician", "The village school"};
  static const char* const kVerbs[] = {"opened", "was rebuilt", "closed for the winter", "welcomed visitors",
                                       "flooded", "changed hands", "was painted blue"};
  std::string s;
  for (int i = 0; i < sentences; ++i) {
    const int k = call * 131 + i * 17;
    s += std::string(" ") + kSubjects[k % 7] + " " + kVerbs[(k / 7) % 7] + " in " + std::to_string(1700 + k % 300) +
         ", and " + std::to_string(k % 97) + " people remember it.";
  }
  return s;
}

int32_t count_raw(llmsvc_service* svc, const std::string& text) {
  int32_t n = -1;
  EXPECT_EQ(llmsvc_count_tokens(svc, text.data(), text.size(), nullptr, &n), LLMSVC_OK) << last_error();
  return n;
}

TEST(LongContext, SixThousandTokensUnderAQuarterBudget) {
  const std::string model = llmsvc::test::default_model_path();
  ASSERT_TRUE(std::filesystem::exists(model)) << "the default model is not in the cache: " << model
                                              << " (tools/scripts/fetch_model.sh; tools/scripts/test.sh fetches it)";
  // The model's f16 KV bytes per token, from a first binding without a budget.
  llmsvc_bind_options o;
  llmsvc_bind_options_init(&o);
  o.target = "embedded";
  o.model_path = model.c_str();
  o.n_threads = 2;
  llmsvc_service* probe = nullptr;
  ASSERT_EQ(llmsvc_bind(&o, &probe), LLMSVC_OK) << last_error();
  llmsvc_model_info info;
  llmsvc_model_info_init(&info);
  ASSERT_EQ(llmsvc_model_info_get(probe, &info), LLMSVC_OK) << last_error();
  llmsvc_unbind(probe);
  ASSERT_GE(info.n_ctx, kTarget + 64) << "n_ctx defaults to the trained length (" << info.n_ctx_train << ")";
  const uint64_t f16_per_token =
      2ull * info.n_layer * info.n_head_kv * (info.n_embd / info.n_head) * sizeof(uint16_t);  // K and V
  const uint64_t budget = f16_per_token * kTarget / 4;

  // Compression to 2 bits on average (2-bit chunks take 0.21 of f16 with their scales) leaves
  // room for each call's new f16 chunks.
  o.kv_budget_bytes = budget;
  o.kv_ratio = 0.25f;
  llmsvc_service* svc = nullptr;
  ASSERT_EQ(llmsvc_bind(&o, &svc), LLMSVC_OK) << last_error();
  llmsvc_context_options co;
  llmsvc_context_options_init(&co);
  co.raw = 1;
  llmsvc_context* ctx = nullptr;
  ASSERT_EQ(llmsvc_context_new(svc, &co, &ctx), LLMSVC_OK) << last_error();

  int32_t tokens = 0;
  for (int call = 0; tokens < kTarget; ++call) {
    std::string prompt = passage(call, 1);
    while (count_raw(svc, prompt) < kTokensPerCall) prompt += passage(call + 1000, 1);
    const bool last = tokens + kTokensPerCall >= kTarget;
    llmsvc_call_options opts;
    llmsvc_call_options_init(&opts);
    opts.max_tokens = last ? 8 : 0;  // prefill only, but for the last call
    llmsvc_call_result r;
    llmsvc_call_result_init(&r);
    std::string reply;
    ASSERT_EQ(llmsvc_call(ctx, prompt.data(), prompt.size(), &opts,
                          [](const char* p, size_t n, int32_t, void* u) {
                            static_cast<std::string*>(u)->append(p, n);
                            return 0;
                          },
                          &reply, &r),
              LLMSVC_OK)
        << "at " << tokens << " tokens: " << last_error();
    tokens = r.context_tokens;
    if (last) {
      EXPECT_EQ(r.generated_tokens, 8);
      EXPECT_FALSE(reply.empty());
    }
  }
  EXPECT_GE(tokens, kTarget);

  llmsvc_context_info ci;
  llmsvc_context_info_init(&ci);
  ASSERT_EQ(llmsvc_context_info_get(svc, llmsvc_context_id(ctx), &ci), LLMSVC_OK) << last_error();
  EXPECT_EQ(ci.tokens, tokens);
  // The KV never held more than the budget, which is a quarter of what f16 would take.
  llmsvc_stats st;
  llmsvc_stats_init(&st);
  ASSERT_EQ(llmsvc_get_stats(svc, &st), LLMSVC_OK) << last_error();
  EXPECT_LE(st.kv_peak_bytes, budget);
  EXPECT_LT(ci.kv_resident_bytes, f16_per_token * static_cast<uint64_t>(tokens) / 4);
  EXPECT_GT(ci.chunks_q2, ci.chunks_total / 2) << "the old chunks were narrowed";
  llmsvc_context_close(ctx);
  llmsvc_unbind(svc);
}

}  // namespace
