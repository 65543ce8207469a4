// SPDX-License-Identifier: Apache-2.0
// The message API against llama.cpp's own chat completion: for each conversation of
// tests/data/golden/chat/*.json (tools/golden/gen_chat_golden.py: llama-cpp-python's
// create_chat_completion with the GGUF's template, greedy), the system message becomes the
// context's system prompt, the other messages are appended, and generate's reply must be the
// very text llama.cpp gave. Where this CPU does not reproduce llama.cpp's bits (no FMA, see
// exact_numerics) a reply may part from it at a near tie: there only its start is compared.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/core/engine/engine.h"
#include "tests/common/test_paths.h"
#include "tests/golden/golden_file.h"

namespace llmsvc::test {
namespace {

MessageRole role_of(const std::string& r) {
  if (r == "system") return MessageRole::system;
  if (r == "assistant") return MessageRole::assistant;
  if (r == "tool") return MessageRole::tool;
  return MessageRole::user;
}

TEST(ChatGolden, MessageApiRepliesAsLlamaCppChatCompletion) {
  const std::string dir = data_dir() + "/golden/chat";
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    ++files;
    std::ifstream in(e.path());
    const nlohmann::json g = nlohmann::json::parse(in);
    const std::string file = g.at("model_file");
    ASSERT_EQ(file.rfind("default:", 0), 0u) << file;
    EngineOptions eo;
    eo.model_path = default_model_path();
    ASSERT_TRUE(std::filesystem::exists(eo.model_path)) << eo.model_path << " (run tools/scripts/fetch_model.sh)";
    eo.n_threads = 2;
    eo.n_ctx = 2048;
    eo.state_dir = std::string(std::getenv("LLMSVC_STATE_DIR") ? std::getenv("LLMSVC_STATE_DIR") : "/tmp") + "/chat-golden";
    auto engine = Engine::create(eo);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    int n = 0;
    for (const auto& c : g.at("conversations")) {
      SCOPED_TRACE("conversation " + std::to_string(n++));
      ContextOptions co;
      std::vector<ChatMessage> messages;
      for (const auto& m : c.at("messages")) {
        const MessageRole role = role_of(m.at("role"));
        if (role == MessageRole::system) co.system_prompt = m.at("content");
        else messages.push_back({role, m.at("content")});
      }
      auto id = (*engine)->create_context(co);
      ASSERT_TRUE(id.ok()) << id.status().message();
      ASSERT_TRUE((*engine)->append_messages(*id, messages, 0).ok());
      CallParams cp;
      cp.max_tokens = g.at("max_tokens");
      cp.reply_only = true;
      std::string reply;
      CallStats st;
      Status s = (*engine)->call(*id, "", cp, [&](std::string_view piece, int32_t) {
        reply.append(piece);
        return true;
      }, &st);
      ASSERT_TRUE(s.ok()) << s.message();
      const std::string want = c.at("reply");
      if (exact_numerics()) {
        EXPECT_EQ(reply, want);
        EXPECT_EQ(st.generated_tokens, c.at("completion_tokens").get<int>() + (st.finish == FinishReason::eos ? 1 : 0))
            << "llama.cpp counts no end-of-turn token";
      } else {
        EXPECT_EQ(reply.substr(0, 8), want.substr(0, 8));
      }
      auto kept = (*engine)->messages(*id, 0, 100);
      ASSERT_TRUE(kept.ok());
      ASSERT_EQ(kept->size(), messages.size() + 1);
      EXPECT_EQ(kept->back().content, reply);
    }
  }
  EXPECT_GT(files, 0) << "no golden conversations in " << dir << " (tools/golden/gen_chat_golden.py)";
}

}  // namespace
}  // namespace llmsvc::test
