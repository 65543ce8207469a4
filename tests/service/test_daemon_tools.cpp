// SPDX-License-Identifier: Apache-2.0
// Tools through a real llmsvcd (protocol 6: CONTEXT_NEW.tools, CONTEXT_MESSAGES_REPLY.tool_calls,
// RESULT's tool figures), on the small committed model given Qwen 2.5's chat template: a reply
// that calls a tool (forced with a grammar) reports the call in its result and in the messages
// read back, as the embedded library does with the same model, and the results go back as a
// tool message before the next reply.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/model/model_image.h"
#include "tests/service/daemon_fixture.h"

namespace llmsvc::test {
namespace {

const char* kTools = R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";
const char* kCall = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

struct Read {
  std::vector<int> roles;
  std::vector<std::string> contents, calls;
};

int read_one(const llmsvc_message* m, void* user) {
  auto* r = static_cast<Read*>(user);
  r->roles.push_back(m->role);
  r->contents.emplace_back(m->content ? m->content : "", m->content_len);
  r->calls.emplace_back(m->tool_calls ? m->tool_calls : "", m->tool_calls_len);
  return 0;
}

// What one conversation gives on `svc`: the call's result figures and the messages read back
// after the tool's result went in and the next reply was generated.
struct Outcome {
  int tool_calls = -1, tool_call_errors = -1;
  Read messages;
};

Outcome converse(llmsvc_service* svc, const std::string& id) {
  Outcome out;
  llmsvc_context_options co;
  llmsvc_context_options_init(&co);
  co.id = id.c_str();
  co.tools_json = kTools;
  llmsvc_context* ctx = nullptr;
  EXPECT_EQ(llmsvc_context_new(svc, &co, &ctx), LLMSVC_OK) << last_api_error();
  if (!ctx) return out;
  llmsvc_call_options o;
  llmsvc_call_options_init(&o);
  o.max_tokens = 64;
  const std::string grammar = "root ::= " + nlohmann::json(kCall).dump();  // its one sentence
  o.grammar = grammar.c_str();
  llmsvc_call_result r;
  llmsvc_call_result_init(&r);
  const std::string q = "Weather in Paris?";
  EXPECT_EQ(llmsvc_call(ctx, q.data(), q.size(), &o, nullptr, nullptr, &r), LLMSVC_OK) << last_api_error();
  out.tool_calls = r.tool_calls;
  out.tool_call_errors = r.tool_call_errors;
  llmsvc_message m;
  llmsvc_message_init(&m);
  m.role = LLMSVC_ROLE_TOOL;
  m.content = "{\"temperature\": 21}";
  m.content_len = std::strlen(m.content);
  EXPECT_EQ(llmsvc_context_append(ctx, &m, 1), LLMSVC_OK) << last_api_error();
  llmsvc_call_options g;
  llmsvc_call_options_init(&g);
  g.max_tokens = 3;
  EXPECT_EQ(llmsvc_context_generate(ctx, &g, nullptr, nullptr, nullptr), LLMSVC_OK) << last_api_error();
  EXPECT_EQ(llmsvc_context_messages(ctx, 0, read_one, &out.messages), LLMSVC_OK) << last_api_error();
  llmsvc_context_close(ctx);
  EXPECT_EQ(llmsvc_context_delete(svc, id.c_str()), LLMSVC_OK) << last_api_error();
  return out;
}

using DaemonTools = DaemonTest;

TEST_F(DaemonTools, ACallAndItsResultGoThroughTheDaemonAsEmbedded) {
  ModelImage image = ModelImage::load(std::string(LLMSVC_TEST_DATA) + "/models/llama-Q8_0.gguf");
  std::ifstream in(std::string(LLMSVC_TEST_DATA) + "/chat_templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  std::stringstream text;
  text << in.rdbuf();
  image.set_string("tokenizer.chat_template", text.str());
  const std::string model = dir_ + "/qwen-template.gguf";
  image.write(model);
  DaemonProcess& d = start_daemon({}, [&](DaemonProcess& p) { p.set_model(model); });
  llmsvc_service* remote = bind_target(d.target());
  ASSERT_TRUE(remote);
  const Outcome daemon = converse(remote, "weather");
  llmsvc_unbind(remote);

  llmsvc_service* local = bind_embedded_model(model, dir_ + "/embedded-state");
  ASSERT_TRUE(local);
  const Outcome embedded = converse(local, "weather");
  llmsvc_unbind(local);

  EXPECT_EQ(daemon.tool_calls, 1);
  EXPECT_EQ(daemon.tool_call_errors, 0);
  ASSERT_EQ(daemon.messages.roles, (std::vector<int>{LLMSVC_ROLE_USER, LLMSVC_ROLE_ASSISTANT, LLMSVC_ROLE_TOOL,
                                                     LLMSVC_ROLE_ASSISTANT}));
  EXPECT_NE(daemon.messages.calls[1].find("\"get_weather\""), std::string::npos) << daemon.messages.calls[1];
  EXPECT_NE(daemon.messages.calls[1].find("\"city\":\"Paris\""), std::string::npos) << daemon.messages.calls[1];
  EXPECT_EQ(daemon.messages.contents[1], "");
  EXPECT_TRUE(daemon.messages.calls[0].empty() && daemon.messages.calls[2].empty());
  EXPECT_EQ(daemon.messages.contents[2], "{\"temperature\": 21}");
  EXPECT_EQ(daemon.tool_calls, embedded.tool_calls);
  EXPECT_EQ(daemon.messages.roles, embedded.messages.roles);
  EXPECT_EQ(daemon.messages.contents, embedded.messages.contents);
  EXPECT_EQ(daemon.messages.calls, embedded.messages.calls);
}

}  // namespace
}  // namespace llmsvc::test
