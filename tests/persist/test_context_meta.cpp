// SPDX-License-Identifier: Apache-2.0
// ContextMeta: JSON round trip, and every malformed field is refused by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "runtime/core/persist/context_meta.h"
#include "runtime/core/persist/state_dir.h"

namespace llmsvc::persist {
namespace {

ContextMeta sample() {
  ContextMeta m;
  m.id = "chat-1";
  m.model_hash = 0x0123456789abcdefull;
  m.vocab_hash = 0xfedcba9876543210ull;
  m.model_name = "SmolLM2";
  m.raw = true;
  m.system_prompt = "Be brief. \xC3\xA9\xF0\x9F\x98\x80";
  m.chunk_tokens = 16;
  m.created_unix = 1700000000;
  return m;
}

TEST(ContextMeta, RoundTrip) {
  auto m = parse_context_meta(to_json(sample()));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->id, "chat-1");
  EXPECT_EQ(m->model_hash, 0x0123456789abcdefull);
  EXPECT_EQ(m->vocab_hash, 0xfedcba9876543210ull);
  EXPECT_TRUE(m->raw);
  EXPECT_EQ(m->system_prompt, sample().system_prompt);
  EXPECT_EQ(m->chunk_tokens, 16);
  EXPECT_EQ(m->created_unix, 1700000000);
}

TEST(ContextMeta, MalformedFieldsAreNamed) {
  const std::string good = to_json(sample());
  struct Case {
    std::string from, to, field;
  } cases[] = {
      {"\"id\": \"chat-1\"", "\"id\": \"../etc\"", "'id'"},
      {"\"id\": \"chat-1\"", "\"id\": 5", "'id'"},
      {"\"hash\": \"0123456789abcdef\"", "\"hash\": \"0123\"", "'model.hash'"},
      {"\"hash\": \"0123456789abcdef\"", "\"hash\": \"0123456789abcdeg\"", "'model.hash'"},
      {"\"chunk_tokens\": 16", "\"chunk_tokens\": 0", "'chunk_tokens'"},
      {"\"chunk_tokens\": 16", "\"chunk_tokens\": 1e9", "'chunk_tokens'"},
      {"\"raw\": true", "\"raw\": 1", "'raw'"},
  };
  for (const Case& c : cases) {
    std::string bad = good;
    const size_t at = bad.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    bad.replace(at, c.from.size(), c.to);
    auto m = parse_context_meta(bad);
    ASSERT_FALSE(m.ok()) << c.to;
    EXPECT_NE(m.status().message().find(c.field), std::string::npos) << m.status().message();
  }
  EXPECT_FALSE(parse_context_meta("").ok());
  EXPECT_FALSE(parse_context_meta("[1,2]").ok());
  EXPECT_FALSE(parse_context_meta(good.substr(0, good.size() / 2)).ok());
  std::string future = good;
  future.replace(future.find("\"format\": 1"), 11, "\"format\": 9");
  EXPECT_EQ(parse_context_meta(future).status().code(), Code::unsupported);
}

TEST(StateDir, RootResolutionOrder) {
  const char* saved = std::getenv("LLMSVC_STATE_DIR");
  const std::string keep = saved ? saved : "";
  EXPECT_EQ(resolve_state_root("/explicit").value(), "/explicit");
  ::setenv("LLMSVC_STATE_DIR", "/from-env", 1);
  EXPECT_EQ(resolve_state_root("").value(), "/from-env");
  ::unsetenv("LLMSVC_STATE_DIR");
  ::setenv("XDG_STATE_HOME", "/xdg", 1);
  EXPECT_EQ(resolve_state_root("").value(), "/xdg/llmsvc");
  ::unsetenv("XDG_STATE_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(resolve_state_root("").value(), "/home/u/.local/state/llmsvc");
  ::setenv("LLMSVC_STATE_DIR", keep.c_str(), 1);
}

TEST(StateDir, ContextIdsAreSafeFileNames) {
  EXPECT_TRUE(valid_context_id("a"));
  EXPECT_TRUE(valid_context_id("ctx-0123.v2_x"));
  EXPECT_FALSE(valid_context_id(""));
  EXPECT_FALSE(valid_context_id("."));
  EXPECT_FALSE(valid_context_id(".."));
  EXPECT_FALSE(valid_context_id("a/b"));
  EXPECT_FALSE(valid_context_id(std::string(65, 'a')));
  EXPECT_FALSE(valid_context_id("caf\xC3\xA9"));
}

TEST(StateDir, ScopedKeysHaveOneScopeThatIsAnId) {
  EXPECT_TRUE(valid_context_key("a"));
  EXPECT_TRUE(valid_context_key("uid-1000/notes"));
  EXPECT_FALSE(valid_context_key("uid-1000/"));
  EXPECT_FALSE(valid_context_key("/notes"));
  EXPECT_FALSE(valid_context_key("../notes"));
  EXPECT_FALSE(valid_context_key("a/b/c"));
  EXPECT_FALSE(valid_context_key("a/.."));
  StateDir dir("/nonexistent-llmsvc-root");
  EXPECT_EQ(dir.context_dir("s/x"), "/nonexistent-llmsvc-root/contexts/s/x");
  auto ids = dir.list("s");
  ASSERT_TRUE(ids.ok());
  EXPECT_TRUE(ids->empty());
  EXPECT_FALSE(dir.list("../x").ok());
}

}  // namespace
}  // namespace llmsvc::persist
