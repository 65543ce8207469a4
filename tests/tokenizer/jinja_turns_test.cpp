// SPDX-License-Identifier: Apache-2.0
// A model's own Jinja template cut into turns (JinjaTurns): for every template of the chat
// template data set (tests/data/chat_templates, 63 real templates), the turns the engine feeds
// one call at a time add up to the template's render of the whole conversation; a template
// that cannot be cut so is an error naming why, and the families apps use are all served.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/core/chat/jinja/chat.h"
#include "runtime/core/tokenizer/chat_template.h"
#include "runtime/core/tokenizer/jinja_turns.h"
#include "tests/common/test_paths.h"

namespace llmsvc::test {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Case {
  std::string name, family, source, bos, eos;
};

std::vector<Case> cases() {
  const std::string dir = data_dir() + "/chat_templates/";
  const auto manifest = nlohmann::json::parse(read_file(dir + "manifest.json"));
  std::vector<Case> out;
  for (const auto& t : manifest["templates"]) {
    if (!t["context"].empty()) continue;  // needs variables of its own (functions, datetime...)
    out.push_back({t["name"], t["family"], read_file(dir + "templates/" + t["name"].get<std::string>() + ".jinja"),
                   t["bos_token"], t["eos_token"]});
  }
  return out;
}

// The template's render of the messages, less a leading bos_token (as JinjaTurns cuts it).
std::string render(const Case& c, const nlohmann::json& messages, bool add_generation_prompt) {
  const std::string json = messages.dump();
  jinja::ChatInput in;
  in.messages_json = json;
  in.add_generation_prompt = add_generation_prompt;
  in.bos_token = c.bos;
  in.eos_token = c.eos;
  auto text = jinja::render_chat(c.source, in);
  EXPECT_TRUE(text.ok()) << c.name << ": " << text.status().message();
  std::string out = text.ok() ? *text : std::string();
  if (!c.bos.empty() && out.rfind(c.bos, 0) == 0) out.erase(0, c.bos.size());
  return out;
}

nlohmann::json msg(const char* role, const std::string& content) { return {{"role", role}, {"content", content}}; }

TEST(JinjaTurns, TurnsAddUpToTheWholeConversation) {
  const std::string u1 = "Hello there!", a1 = "Hi! How can I help?", u2 = "Tell me a joke, please.";
  std::set<std::string> served;
  std::map<std::string, std::string> refused;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    auto turns = JinjaTurns::make(c.source, c.bos, c.eos);
    if (!turns.ok()) {
      EXPECT_FALSE(turns.status().message().empty());
      refused[c.name] = turns.status().message();
      continue;
    }
    served.insert(c.family);
    const JinjaTurns& t = **turns;
    const auto first = t.first_turn({});
    ASSERT_TRUE(first.ok()) << first.status().message();
    const std::string text = first->first + u1 + first->second + t.reply_prefix() + a1 + t.assistant_end() +
                             t.next_turn().first + u2 + t.next_turn().second;
    EXPECT_EQ(text, render(c, {msg("user", u1), msg("assistant", a1), msg("user", u2)}, true));
    // With a system prompt, where the template takes one.
    const auto with_system = t.first_turn("You are terse.");
    if (with_system.ok()) {
      EXPECT_EQ(with_system->first + u1 + with_system->second,
                render(c, {msg("system", "You are terse."), msg("user", u1)}, true));
    }
  }
  // Refused: tool-use templates that need `tools`, reasoning templates that rewrite earlier
  // replies (DeepSeek-R1, QwQ, Qwen3), templates that put more than whitespace before a reply.
  for (const auto& [name, why] : refused) std::printf("refused %s: %s\n", name.c_str(), why.c_str());
  std::printf("%zu families served\n", served.size());
  // The families apps use are served (Gemma and ChatML models also have turns written out).
  for (const char* family : {"Llama 3.x", "Llama 2", "Mistral", "Mixtral", "Qwen", "Phi", "Gemma", "SmolLM2",
                             "DeepSeek", "Granite", "ChatML", "Command-R", "Hermes"})
    EXPECT_TRUE(served.count(family)) << family << " is not served";
  EXPECT_GE(served.size(), 15u);
}

TEST(JinjaTurns, ATemplateThatCannotRunIsAnErrorNamingWhy) {
  auto bad = JinjaTurns::make("{% for m in messages %}{{ m.content | batch(2) }}{% endfor %}", "", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("batch"), std::string::npos) << bad.status().message();
  auto raises = JinjaTurns::make("{{ raise_exception('no chat here') }}", "", "");
  ASSERT_FALSE(raises.ok());
  EXPECT_NE(raises.status().message().find("no chat here"), std::string::npos) << raises.status().message();
  // Renders whose earlier turns change as the conversation grows cannot be fed a turn at a time.
  auto unstable = JinjaTurns::make("{{ messages | length }}{% for m in messages %}{{ m.content }}{% endfor %}", "", "");
  ASSERT_FALSE(unstable.ok());
  EXPECT_NE(unstable.status().message().find("earlier turns"), std::string::npos) << unstable.status().message();
}

TEST(JinjaTurns, ARefusedSystemPromptIsAnErrorOfTheContext) {
  ChatTemplate t;
  t.format = ChatFormat::jinja;
  auto turns = JinjaTurns::make(
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
      "[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}",
      "", "");
  ASSERT_TRUE(turns.ok()) << turns.status().message();
  t.jinja = *turns;
  EXPECT_TRUE(t.usable("").ok());
  const Status refused = t.usable("Be brief.");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("System role not supported"), std::string::npos) << refused.message();
  EXPECT_EQ(t.user_turn("Hi", "", true), "[user] Hi\n[assistant] ");
  EXPECT_EQ(t.user_turn("Again", "", false), "[user] Again\n[assistant] ");
  EXPECT_EQ(t.assistant_end(), "\n");
}

}  // namespace
}  // namespace llmsvc::test
