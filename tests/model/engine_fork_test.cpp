// SPDX-License-Identifier: Apache-2.0
// Engine::fork_context on the small committed model: forks share the parent's KV chunks (the
// store counts them once: N forks of a long prefix grow by their suffixes only), answer as
// their parent would, diverge without touching it, outlive it, persist, and refuse what they
// cannot do with a clear status.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/core/engine/engine.h"
#include "tests/model/engine_util.h"

namespace llmsvc::test {
namespace {

// A prompt of about n tokens of varied words.
std::string long_text(int words) {
  static const char* kWords[] = {"river", "stone", "lamp", "seven", "quiet", "orbit", "maple", "copper", "north", "echo"};
  std::string s;
  for (int i = 0; i < words; ++i) s += std::string(kWords[(i * 7 + i / 3) % 10]) + (i % 13 == 12 ? ". " : " ");
  return s;
}

std::vector<int32_t> answer(Engine& e, const std::string& id, const std::string& prompt, int n = 6) {
  CallParams p;
  p.max_tokens = n;
  CallStats st;
  Status s = e.call(id, prompt, p, [](std::string_view, int32_t) { return true; }, &st);
  EXPECT_TRUE(s.ok()) << id << ": " << s.message();
  return st.generated_ids;
}

uint64_t kv_bytes(Engine& e) { return e.stats().kv_bytes; }

TEST(EngineFork, ForksOfALongPrefixGrowByTheirSuffixesOnly) {
  auto e = engine_for(kLlama, state_dir("fork-grow"));
  ContextOptions o;
  o.raw = true;
  auto parent = e->create_context(o);
  ASSERT_TRUE(parent.ok()) << parent.status().message();
  answer(*e, *parent, long_text(900), 1);
  auto pinfo = e->context_info(*parent);
  ASSERT_TRUE(pinfo.ok());
  ASSERT_GE(pinfo->tokens, 1000);
  const uint64_t before = kv_bytes(*e);
  const uint64_t per_token = pinfo->kv_resident_bytes / static_cast<uint64_t>(pinfo->tokens);
  constexpr int kForks = 4;
  std::vector<std::string> forks;
  for (int i = 0; i < kForks; ++i) {
    auto f = e->fork_context(*parent, "");
    ASSERT_TRUE(f.ok()) << f.status().message();
    forks.push_back(*f);
  }
  EXPECT_EQ(kv_bytes(*e), before);  // forking alone costs nothing
  auto finfo = e->context_info(forks[0]);
  ASSERT_TRUE(finfo.ok());
  EXPECT_EQ(finfo->tokens, pinfo->tokens);
  EXPECT_GT(finfo->chunks_shared, 0);
  EXPECT_EQ(finfo->chunks_shared, finfo->chunks_resident);
  // Each fork goes on with its own suffix: the store grows by the suffixes (and each fork's
  // copy of the parent's partial last chunk, f16), not by the prefix.
  for (int i = 0; i < kForks; ++i) answer(*e, forks[i], "branch " + std::to_string(i) + " " + long_text(20), 4);
  const uint64_t grown = kv_bytes(*e) - before;
  const uint64_t prefix = pinfo->kv_resident_bytes;
  EXPECT_LT(grown, prefix) << "4 forks of a " << pinfo->tokens << "-token prefix grew the KV by " << grown << " bytes";
  const auto chunk_f16 = static_cast<uint64_t>(16) * per_token * 4;  // generous: f16 is up to 4x a q4 token
  EXPECT_LE(grown, kForks * 4 * chunk_f16);
  for (const auto& f : forks) {
    auto info = e->context_info(f);
    ASSERT_TRUE(info.ok());
    EXPECT_GT(info->chunks_shared, 0) << f;
  }
}

TEST(EngineFork, AForkAnswersAsItsParentAndOutlivesIt) {
  auto e = engine_for(kLlama, state_dir("fork-answer"));
  ContextOptions o;
  o.system_prompt = "You answer briefly.";
  auto parent = e->create_context(o);
  ASSERT_TRUE(parent.ok());
  answer(*e, *parent, "Tell me about " + long_text(60), 4);
  auto a = e->fork_context(*parent, "fork-a");
  auto b = e->fork_context(*parent, "fork-b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, "fork-a");
  // The conversation is the parent's.
  auto pm = e->messages(*parent, 0, 100), am = e->messages(*a, 0, 100);
  ASSERT_TRUE(pm.ok() && am.ok());
  ASSERT_EQ(pm->size(), am->size());
  for (size_t i = 0; i < pm->size(); ++i) EXPECT_EQ((*pm)[i].content, (*am)[i].content);
  const std::string next = "And then?";
  const auto from_a = answer(*e, *a, next);
  const auto from_parent = answer(*e, *parent, next);
  ASSERT_FALSE(from_a.empty());
  EXPECT_EQ(from_a.front(), from_parent.front());  // later tokens may part at near ties (other micro-batches)
  // The parent went on; b is as it was forked. Deleting the parent leaves b intact.
  const auto a_tokens = e->context_info(*a)->tokens;
  ASSERT_TRUE(e->delete_context(*parent).ok());
  EXPECT_EQ(e->context_info(*a)->tokens, a_tokens);
  const auto from_b = answer(*e, *b, next);
  EXPECT_EQ(from_b, from_a);  // b, with the parent gone, answers as its twin a did
  // Rewinding a fork cuts into shared chunks without touching the other holders.
  ASSERT_TRUE(e->truncate_messages(*b, 1).ok());
  auto again = e->context_info(*a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->tokens, a_tokens);
  EXPECT_EQ(answer(*e, *a, "Why?").size(), 6u);
}

TEST(EngineFork, AForkPersistsAcrossARestart) {
  const std::string dir = state_dir("fork-restart");
  std::string fork_id;
  std::vector<ChatMessage> msgs;
  int tokens = 0;
  {
    auto e = engine_for(kLlama, dir);
    auto parent = e->create_context({});
    ASSERT_TRUE(parent.ok());
    answer(*e, *parent, "Hello there, " + long_text(40), 3);
    auto f = e->fork_context(*parent, "");
    ASSERT_TRUE(f.ok());
    fork_id = *f;
    msgs = *e->messages(fork_id, 0, 100);
    tokens = e->context_info(fork_id)->tokens;
  }
  auto e = engine_for(kLlama, dir);
  auto info = e->context_info(fork_id);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->tokens, tokens);
  auto m = e->messages(fork_id, 0, 100);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->size(), msgs.size());
  EXPECT_EQ(answer(*e, fork_id, "More.").size(), 6u);  // its KV recomputed from its tokens
}

TEST(EngineFork, RefusalsAreClearAndLeaveNothingBehind) {
  auto e = engine_for(kLlama, state_dir("fork-bad"));
  EXPECT_EQ(e->fork_context("nope", "").status().code(), Code::not_found);
  auto parent = e->create_context({});
  ASSERT_TRUE(parent.ok());
  answer(*e, *parent, "Hi", 2);
  auto taken = e->create_context([] { ContextOptions o; o.id = "taken"; return o; }());
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(e->fork_context(*parent, "taken").status().code(), Code::exists);
  EXPECT_EQ(e->fork_context(*parent, "bad id!").status().code(), Code::invalid_argument);
  // Inside a call on the parent (its streaming callback), the fork is refused as busy.
  Status inside;
  CallParams p;
  p.max_tokens = 2;
  CallStats st;
  ASSERT_TRUE(e->call(*parent, "Again", p,
                      [&](std::string_view, int32_t) {
                        if (inside.ok()) inside = e->fork_context(*parent, "during").status();
                        return true;
                      },
                      &st)
                  .ok());
  EXPECT_EQ(inside.code(), Code::busy) << inside.message();
  auto listed = e->list_contexts();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 2u);  // the parent and "taken": no half-made fork
}

}  // namespace
}  // namespace llmsvc::test
