// SPDX-License-Identifier: Apache-2.0
// Tool calls at the engine, on the small committed model given real chat templates that render
// tools (Qwen 2.5's Hermes syntax, Llama 3.1's JSON): the tools go into the first turn, a reply
// that calls a tool (forced with a grammar: the random model would not) is parsed into calls,
// its results go in as tool messages, and the history is then, token for token, the text the
// template renders for that conversation; the mistakes get clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/core/chat/jinja/chat.h"
#include "runtime/core/engine/engine.h"
#include "runtime/core/persist/history_log.h"
#include "runtime/core/persist/state_dir.h"
#include "tests/model/engine_util.h"

namespace llmsvc::test {
namespace {

const char* kTools = R"([{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Family {
  const char* name;
  const char* template_file;  // under tests/data/chat_templates/templates
  const char* call_text;      // the reply the grammar forces: one call of get_weather(city="Paris")
};

const Family kFamilies[] = {
    {"qwen25", "Qwen-Qwen2.5-7B-Instruct.jinja",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
    {"llama31", "meta-llama-Llama-3.1-8B-Instruct.jinja",
     "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"},
};

// A GBNF grammar whose only sentence is `text`.
std::string exactly(const std::string& text) { return "root ::= " + nlohmann::json(text).dump(); }

class EngineTools : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override {
    ModelImage m = ModelImage::load(test_model(kLlama));
    source_ = read_text(std::string(LLMSVC_TEST_DATA) + "/chat_templates/templates/" + GetParam().template_file);
    ASSERT_FALSE(source_.empty());
    m.set_string("tokenizer.chat_template", source_);
    model_ = dir_.file("model.gguf");
    m.write(model_);
    engine_ = make(state_dir((std::string("tools-") + GetParam().name).c_str()));
  }

  std::unique_ptr<Engine> make(const std::string& state) {
    EngineOptions eo;
    eo.model_path = model_;
    eo.n_threads = 2;
    eo.n_ctx = 4096;
    eo.state_dir = state;
    auto e = Engine::create(eo);
    if (!e.ok()) throw std::runtime_error(e.status().message());
    return std::move(e).value();
  }

  std::string new_context(const std::string& id) {
    ContextOptions o;
    o.id = id;
    o.tools = kTools;
    auto made = engine_->create_context(o);
    EXPECT_TRUE(made.ok()) << made.status().message();
    return made.ok() ? *made : std::string();
  }

  // The context's history as text (special tokens written out), without the leading BOS.
  std::string history_text(const std::string& id) {
    auto h = persist::HistoryLog::peek(state_dir((std::string("tools-") + GetParam().name).c_str()) + "/" +
                                           persist::layout::history(id),
                                       engine_->tokenizer().n_vocab());
    EXPECT_TRUE(h.ok()) << h.status().message();
    std::string text;
    if (!h.ok()) return text;
    for (size_t i = 0; i < h->tokens.size(); ++i) {
      if (i == 0 && h->tokens[i] == engine_->tokenizer().bos()) continue;
      text += engine_->tokenizer().token_to_piece(h->tokens[i], true);
    }
    return text;
  }

  // The template's render of `messages` with the tools (bos_token empty: BOS is a token).
  std::string rendered(const nlohmann::json& messages, bool generation_prompt) {
    jinja::ChatInput in;
    const std::string m = messages.dump(), t = nlohmann::ordered_json::parse(kTools).dump();
    in.messages_json = m;
    in.tools_json = t;
    in.add_generation_prompt = generation_prompt;
    in.eos_token = "<|im_end|>";
    auto r = jinja::render_chat(source_, in);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : std::string();
  }

  CallStats call_forced(const std::string& id, const std::string& prompt, const std::string& text) {
    CallParams p;
    p.max_tokens = 64;
    p.grammar = exactly(text);
    p.reply_only = prompt.empty();
    CallStats st;
    Status s = engine_->call(id, prompt, p, [](std::string_view, int32_t) { return true; }, &st);
    EXPECT_TRUE(s.ok()) << s.message();
    return st;
  }

  ScratchDir dir_;
  std::string model_, source_;
  std::unique_ptr<Engine> engine_;
};

TEST_P(EngineTools, ACallIsParsedItsResultAppendedAndTheHistoryIsTheTemplatesRender) {
  const std::string id = new_context("weather");
  const std::string question = "What is the weather in Paris?";
  // Before any reply: the tools are in the first turn, as the template puts them.
  const CallStats st = call_forced(id, question, GetParam().call_text);
  EXPECT_EQ(st.tool_calls, 1);
  EXPECT_EQ(st.tool_call_errors, 0);
  auto msgs = engine_->messages(id, 0, 10);
  ASSERT_TRUE(msgs.ok()) << msgs.status().message();
  ASSERT_EQ(msgs->size(), 2u);
  const ChatMessage& reply = (*msgs)[1];
  EXPECT_EQ(reply.role, MessageRole::assistant);
  EXPECT_EQ(reply.content, "");
  const auto calls = nlohmann::json::parse(reply.tool_calls);
  ASSERT_EQ(calls.size(), 1u) << reply.tool_calls;
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"], nlohmann::json({{"city", "Paris"}}));

  // A prompt now would skip the results; the results go in, then the reply.
  CallParams p;
  p.max_tokens = 4;
  EXPECT_EQ(engine_->call(id, "Hello?", p, [](std::string_view, int32_t) { return true; }, nullptr).code(),
            Code::invalid_argument);
  const std::string result = R"({"temperature": 21, "sky": "clear"})";
  ASSERT_TRUE(engine_->append_messages(id, std::vector<ChatMessage>{{MessageRole::tool, result}}, 0).ok());
  nlohmann::json conv = nlohmann::json::array();
  conv.push_back({{"role", "user"}, {"content", question}});
  nlohmann::json call = calls[0];
  conv.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", nlohmann::json::array({call})}});
  conv.push_back({{"role", "tool"}, {"content", result}, {"tool_call_id", call["id"]}, {"name", "get_weather"}});
  EXPECT_EQ(history_text(id), rendered(conv, true));
  auto back = engine_->messages(id, 2, 10);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].role, MessageRole::tool);
  EXPECT_EQ((*back)[0].content, result);

  // The reply to the results, then a user turn: still the template's render.
  const CallStats answered = call_forced(id, "", "It is 21 degrees and clear.");
  EXPECT_EQ(answered.tool_calls, 0);
  const std::string next = "Thanks!";
  CallParams q;
  q.max_tokens = 1;
  ASSERT_TRUE(engine_->call(id, next, q, [](std::string_view, int32_t) { return true; }, nullptr).ok());
  conv.push_back({{"role", "assistant"}, {"content", "It is 21 degrees and clear."}});
  conv.push_back({{"role", "user"}, {"content", next}});
  const std::string all = history_text(id);
  const std::string want = rendered(conv, true);
  EXPECT_EQ(all.substr(0, want.size()), want);  // (then the one token generated and the end)
}

TEST_P(EngineTools, SeveralResultsGoInOneAppendAndPersist) {
  const std::string id = new_context("two");
  std::string two_calls = GetParam().call_text;
  two_calls += GetParam().name == std::string("qwen25") ? "\n" + two_calls : "";
  const CallStats st = call_forced(id, "Weather in Paris, twice?", two_calls);
  const int n = st.tool_calls;
  ASSERT_GE(n, 1);
  std::vector<ChatMessage> results;
  for (int i = 0; i < n; ++i) results.push_back({MessageRole::tool, "{\"temperature\": " + std::to_string(20 + i) + "}"});
  // One at a time is refused: a template may join a reply's results into one turn.
  if (n == 2) {
    ASSERT_TRUE(engine_->append_messages(id, std::span(results).first(1), 0).ok());
    EXPECT_EQ(engine_->append_messages(id, std::span(results).subspan(1), 0).code(), Code::invalid_argument);
    // Cutting between them is refused too; cutting before them works.
    ASSERT_TRUE(engine_->truncate_messages(id, 2).ok());
  }
  ASSERT_TRUE(engine_->append_messages(id, results, 0).ok());
  if (n == 2) {
    EXPECT_EQ(engine_->truncate_messages(id, 3).code(), Code::invalid_argument);
  }
  const std::string before = history_text(id);
  engine_.reset();
  engine_ = make(state_dir((std::string("tools-") + GetParam().name).c_str()));
  auto msgs = engine_->messages(id, 0, 10);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs->size(), 2u + results.size());
  EXPECT_FALSE((*msgs)[1].tool_calls.empty());
  EXPECT_EQ(history_text(id), before);
  EXPECT_EQ(call_forced(id, "", "Fine.").generated_tokens > 0, true);  // the reopened context goes on
}

TEST_P(EngineTools, MistakesGetClearErrors) {
  ContextOptions o;
  o.tools = R"([{"type": "function", "function": {"name": "bad name!"}}])";
  auto bad = engine_->create_context(o);
  EXPECT_EQ(bad.status().code(), Code::invalid_argument);
  EXPECT_NE(bad.status().message().find("tools[0]"), std::string::npos) << bad.status().message();
  o.tools = "{\"not\": \"a list\"}";
  EXPECT_EQ(engine_->create_context(o).status().code(), Code::invalid_argument);
  o.tools = std::string(100, '[') + std::string(100, ']');
  EXPECT_EQ(engine_->create_context(o).status().code(), Code::invalid_argument);
  o.tools = kTools;
  o.raw = true;
  EXPECT_EQ(engine_->create_context(o).status().code(), Code::invalid_argument);
  // A tool message where no reply called a tool, in a context with tools and one without.
  const std::string id = new_context("plain");
  ASSERT_TRUE(engine_->append_messages(id, std::vector<ChatMessage>{{MessageRole::user, "Hi"}, {MessageRole::assistant, "Hello."}}, 0).ok());
  EXPECT_EQ(engine_->append_messages(id, std::vector<ChatMessage>{{MessageRole::tool, "{}"}}, 0).code(), Code::invalid_argument);
  ContextOptions plain;
  auto without = engine_->create_context(plain);
  ASSERT_TRUE(without.ok());
  auto refused = engine_->append_messages(*without, std::vector<ChatMessage>{{MessageRole::tool, "{}"}}, 0);
  EXPECT_EQ(refused.code(), Code::invalid_argument);
  EXPECT_NE(refused.message().find("no tools"), std::string::npos) << refused.message();
  // A reply that starts a call it does not finish stays text, counted as an error.
  const std::string broken = GetParam().name == std::string("qwen25") ? "<tool_call>\n{\"name\": \"get_weather\""
                                                                      : "{\"name\": \"get_weather\", \"parameters\": {";
  const std::string id2 = new_context("broken");
  const CallStats st = call_forced(id2, "Weather?", broken);
  EXPECT_EQ(st.tool_calls, 0);
  EXPECT_EQ(st.tool_call_errors, 1);
  auto msgs = engine_->messages(id2, 1, 1);
  ASSERT_TRUE(msgs.ok());
  EXPECT_TRUE((*msgs)[0].tool_calls.empty());
  EXPECT_EQ((*msgs)[0].content, broken);
}

// An app's own history with a call (OpenAI's form: arguments as text) goes in as the model
// would have written it: the history is the template's render, and the call reads back.
TEST_P(EngineTools, AnAppendedReplyWithCallsIsWrittenAsTheModelWould) {
  const std::string id = new_context("seeded");
  ChatMessage asked{MessageRole::user, "What is the weather in Paris?"};
  ChatMessage called{MessageRole::assistant, ""};
  called.tool_calls = R"([{"id": "call_7", "type": "function",
    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}])";
  ChatMessage result{MessageRole::tool, "{\"temperature\": 21}"};
  ASSERT_TRUE(engine_->append_messages(id, std::vector<ChatMessage>{asked, called, result}, 0).ok());
  nlohmann::json conv = nlohmann::json::array();
  const nlohmann::json call = {{"id", "call_7"}, {"type", "function"},
                               {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}};
  conv.push_back({{"role", "user"}, {"content", asked.content}});
  conv.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", nlohmann::json::array({call})}});
  conv.push_back({{"role", "tool"}, {"content", result.content}, {"tool_call_id", "call_7"}, {"name", "get_weather"}});
  EXPECT_EQ(history_text(id), rendered(conv, true));
  auto back = engine_->messages(id, 1, 1);
  ASSERT_TRUE(back.ok());
  const auto calls = nlohmann::json::parse((*back)[0].tool_calls);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["function"]["arguments"], nlohmann::json({{"city", "Paris"}}));
  EXPECT_EQ(call_forced(id, "", "Fine.").finish, FinishReason::eos);
  // Calls on a user message, calls that are not calls: refused, nothing appended.
  ChatMessage wrong{MessageRole::user, "Hi"};
  wrong.tool_calls = called.tool_calls;
  EXPECT_EQ(engine_->append_messages(id, std::vector<ChatMessage>{wrong}, 0).code(), Code::invalid_argument);
  ChatMessage broken{MessageRole::assistant, ""};
  broken.tool_calls = R"([{"function": {"name": "get_weather", "arguments": "not json"}}])";
  auto refused = engine_->append_messages(id, std::vector<ChatMessage>{{MessageRole::user, "Again?"}, broken}, 0);
  EXPECT_EQ(refused.code(), Code::invalid_argument);
  EXPECT_NE(refused.message().find("tool_calls[0]"), std::string::npos) << refused.message();
  EXPECT_EQ(engine_->messages(id, 0, 10)->size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Templates, EngineTools, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<Family>& i) { return std::string(i.param.name); });

// Every template of the test set that mentions tools: a context with tools is made, or refused
// with a clear status (a template whose renders are not prefix-stable with tools, Mistral
// Nemo's tools before the last user message, cannot grow a turn at a time); where made, a
// forced call in the template's own syntax (rendered by it) and a result go through. The
// summary is printed for the record.
TEST(EngineToolsSurvey, EveryToolTemplateServesToolsOrSaysWhy) {
  ScratchDir dir;
  const std::string root = std::string(LLMSVC_TEST_DATA) + "/chat_templates/templates/";
  std::vector<std::string> served, refused;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const std::string source = read_text(entry.path().string());
    if (source.find("tools") == std::string::npos) continue;
    ModelImage m = ModelImage::load(test_model(kLlama));
    m.set_string("tokenizer.chat_template", source);
    const std::string model = dir.file("m.gguf");
    m.write(model);
    EngineOptions eo;
    eo.model_path = model;
    eo.n_threads = 2;
    eo.n_ctx = 4096;
    eo.state_dir = dir.file("state-" + entry.path().stem().string());
    auto e = Engine::create(eo);
    ASSERT_TRUE(e.ok()) << e.status().message();
    ContextOptions o;
    o.tools = kTools;
    auto made = (*e)->create_context(o);
    const std::string name = entry.path().stem().string();
    if (!made.ok()) {
      EXPECT_TRUE(made.status().code() == Code::unsupported || made.status().code() == Code::invalid_argument)
          << name << ": " << made.status().message();
      EXPECT_FALSE(made.status().message().empty());
      refused.push_back(name + " (" + made.status().message().substr(0, 90) + ")");
      continue;
    }
    // The app's own reply with a call, then its result: the template writes both.
    ChatMessage called{MessageRole::assistant, ""};
    called.tool_calls = R"([{"id": "a1b2c3d4e", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])";
    Status s = (*e)->append_messages(*made, std::vector<ChatMessage>{{MessageRole::user, "Weather?"}, called,
                                                                     {MessageRole::tool, "{\"t\": 21}"}}, 0);
    if (!s.ok()) {
      EXPECT_NE(s.code(), Code::internal) << name << ": " << s.message();
      refused.push_back(name + " (calls: " + s.message().substr(0, 90) + ")");
      continue;
    }
    served.push_back(name);
  }
  std::printf("tools served by %zu templates:\n", served.size());
  for (const auto& n : served) std::printf("  %s\n", n.c_str());
  std::printf("refused by %zu:\n", refused.size());
  for (const auto& n : refused) std::printf("  %s\n", n.c_str());
  EXPECT_GE(served.size(), 2u);
}

// A model whose template renders no tools refuses them (the committed model's ChatML).
TEST(EngineToolsUnsupported, ATemplateWithoutToolsRefusesThem) {
  auto e = engine_for(kLlama, state_dir("tools-none"));
  ContextOptions o;
  o.tools = kTools;
  auto made = e->create_context(o);
  EXPECT_EQ(made.status().code(), Code::unsupported);
  EXPECT_NE(made.status().message().find("does not render tools"), std::string::npos) << made.status().message();
}

}  // namespace
}  // namespace llmsvc::test
