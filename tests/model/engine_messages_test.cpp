// SPDX-License-Identifier: Apache-2.0
// A context's messages at the engine, on the small committed models: what they keep is bounded
// by their tokens' text (the daemon's memory bound counts on it), and contexts made before
// messages were kept (history format 1) still answer calls but refuse the message calls.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/core/engine/engine.h"
#include "runtime/core/persist/state_dir.h"
#include "tests/model/engine_util.h"

namespace llmsvc::test {
namespace {

// Every byte a context's messages keep is a byte of their tokens' text: a message of whitespace
// that the template strips (gemma3's) keeps only what is left, one the template keeps (ChatML)
// keeps all of it in as many tokens.
TEST(EngineMessages, KeptTextIsBoundedByTheTokens) {
  for (const char* model : {kGemma3, kLlama}) {
    SCOPED_TRACE(model);
    auto engine = engine_for(model, state_dir(model));
    auto id = engine->create_context({});
    ASSERT_TRUE(id.ok()) << id.status().message();
    const std::string padded = std::string(1500, ' ') + "x" + std::string(1500, '\n');
    const std::vector<ChatMessage> messages = {{MessageRole::user, padded}, {MessageRole::assistant, " ok "}};
    Status s = engine->append_messages(*id, messages, 0);
    ASSERT_TRUE(s.ok()) << s.message();
    auto kept = engine->messages(*id, 0, 10);
    ASSERT_TRUE(kept.ok());
    size_t bytes = 0;
    for (const ChatMessage& m : *kept) bytes += m.content.size();
    auto info = engine->context_info(*id);
    ASSERT_TRUE(info.ok());
    EXPECT_LE(bytes, engine->max_piece_bytes() * static_cast<size_t>(info->tokens)) << bytes << " bytes";
    if (std::string(model) == kGemma3) {
      EXPECT_EQ((*kept)[0].content, "x");
      EXPECT_EQ((*kept)[1].content, "ok");
    } else {
      EXPECT_EQ((*kept)[0].content, padded);  // ChatML keeps it whole, in as many tokens
    }
  }
}

// A history file as format 1 wrote it: the header, then one record of tokens.
void write_v1_history(const std::string& path, const std::vector<int32_t>& tokens, uint32_t turns) {
  std::string out("LLMSVCH\0", 8);
  auto put32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  put32(1);
  put32(0);
  const size_t start = out.size();
  put32(0x43455254);  // "TREC"
  put32(static_cast<uint32_t>(tokens.size()));
  put32(turns);
  put32(0);
  out.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 4);
  const uint64_t sum = XXH3_64bits(out.data() + start, out.size() - start);
  out.append(reinterpret_cast<const char*>(&sum), 8);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out;
}

// A context whose history is format 1 (made before messages were kept) answers calls as before
// and refuses the message calls with UNSUPPORTED, naming why.
TEST(EngineMessages, FormatOneContextsRefuseMessageCalls) {
  const std::string state = state_dir("v1");
  std::vector<int32_t> tokens;
  std::string id;
  {
    auto engine = engine_for(kLlama, state);
    auto made = engine->create_context({});
    ASSERT_TRUE(made.ok());
    id = *made;
    CallParams p;
    p.max_tokens = 4;
    ASSERT_TRUE(engine->call(id, "Hello", p, nullptr, nullptr).ok());
    auto info = engine->context_info(id);
    ASSERT_TRUE(info.ok());
    engine->release_context(id);
    CountParams first{true, true, "", {}};
    tokens = engine->prompt_ids("Hello", first);  // the first turn, as format 1 kept it
  }
  write_v1_history(state + "/" + persist::layout::history(id), tokens, 1);
  auto engine = engine_for(kLlama, state);
  auto listed = engine->messages(id, 0, 10);
  EXPECT_EQ(listed.status().code(), Code::unsupported) << listed.status().message();
  ASSERT_TRUE(engine->open_context(id).ok());
  EXPECT_EQ(engine->append_messages(id, std::vector<ChatMessage>{{MessageRole::user, "Hi"}}, 0).code(), Code::unsupported);
  EXPECT_EQ(engine->truncate_messages(id, 0).code(), Code::unsupported);
  CallParams p;
  p.max_tokens = 4;
  CallStats st;
  Status s = engine->call(id, "Again", p, nullptr, &st);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_GT(st.context_tokens, static_cast<int32_t>(tokens.size()));
  EXPECT_EQ(engine->messages(id, 0, 10).status().code(), Code::unsupported);
}

}  // namespace
}  // namespace llmsvc::test
