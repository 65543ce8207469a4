// SPDX-License-Identifier: Apache-2.0
// JinjaTurns: a chat template's turn texts cut from renders of probe conversations.
#include "runtime/core/tokenizer/jinja_turns.h"

#include <algorithm>
#include <initializer_list>

#include <nlohmann/json.hpp>

#include "runtime/core/chat/jinja/chat.h"
#include "runtime/core/chat/jinja/template.h"

namespace llmsvc {
namespace {

// Message contents no template changes (no spaces to trim, nothing to escape) and no text
// contains by chance.
constexpr std::string_view kUser = "LLMSVCxUSERx7f3a";
constexpr std::string_view kEarlierUser = "LLMSVCxASKEDx7f3a";
constexpr std::string_view kReply = "LLMSVCxREPLYx7f3a";

std::string messages(std::initializer_list<std::pair<std::string_view, std::string_view>> turns,
                     std::string_view system = {}) {
  nlohmann::json list = nlohmann::json::array();
  if (!system.empty()) list.push_back({{"role", "system"}, {"content", std::string(system)}});
  for (const auto& [role, content] : turns) list.push_back({{"role", std::string(role)}, {"content", std::string(content)}});
  return list.dump();
}

// `text` split at the one place `mark` is; an error where it is not there exactly once.
Result<std::pair<std::string, std::string>> split_at(const std::string& text, std::string_view mark,
                                                     std::string_view what) {
  const size_t at = text.find(mark);
  if (at == std::string::npos || text.find(mark, at + 1) != std::string::npos)
    return Status(Code::unsupported, "chat template: " + std::string(what) + " does not hold the message text once");
  return std::pair{text.substr(0, at), text.substr(at + mark.size())};
}

// What `longer` adds to `shorter`, which must be its prefix.
Result<std::string> increment(const std::string& shorter, const std::string& longer, std::string_view what) {
  if (longer.compare(0, shorter.size(), shorter) != 0)
    return Status(Code::unsupported, "chat template: " + std::string(what) +
                                         " changes the text of the earlier turns (the conversation cannot grow a turn "
                                         "at a time)");
  return longer.substr(shorter.size());
}

}  // namespace

Result<std::string> JinjaTurns::render(std::string_view messages_json, bool add_generation_prompt) const {
  jinja::ChatInput in;
  in.messages_json = messages_json;
  in.tools_json = tools_;
  in.add_generation_prompt = add_generation_prompt;
  in.bos_token = bos_;
  in.eos_token = eos_;
  auto context = jinja::chat_context(in);
  if (!context.ok()) return context.status();
  auto text = template_->render(*context);
  if (!text.ok()) return Status(text.status().code(), "chat template: " + text.status().message());
  std::string out = std::move(text).value();
  if (!bos_.empty() && out.compare(0, bos_.size(), bos_) == 0) out.erase(0, bos_.size());
  return out;
}

Result<std::shared_ptr<const JinjaTurns>> JinjaTurns::make(std::string_view source, std::string bos,
                                                            std::string eos, std::string tools_json) {
  auto compiled = jinja::Template::compile(source);
  if (!compiled.ok()) return Status(compiled.status().code(), "chat template: " + compiled.status().message());
  std::shared_ptr<JinjaTurns> t(new JinjaTurns());  // NOLINT: the constructor is private
  t->template_ = std::make_shared<const jinja::Template>(std::move(compiled).value());
  t->bos_ = std::move(bos);
  t->eos_ = std::move(eos);
  t->tools_ = std::move(tools_json);

  // The first turn renders at each use (a template may print today's date in it); here it is
  // only checked.
  if (auto first = t->first_turn({}); !first.ok()) return first.status();

  // A reply and a second user turn: what the conversation with both adds to the one that
  // asked, [whitespace] reply [closing and next header] user text [rest up to the reply].
  auto asked = t->render(messages({{"user", kEarlierUser}}), true);
  if (!asked.ok()) return asked.status();
  auto full = t->render(messages({{"user", kEarlierUser}, {"assistant", kReply}, {"user", kUser}}), true);
  if (!full.ok()) return full.status();
  auto grown = increment(*asked, *full, "a second user turn");
  if (!grown.ok()) return grown.status();
  auto reply = split_at(*grown, kReply, "an assistant reply");
  if (!reply.ok()) return reply.status();
  // Text between the generation prompt and the reply may only be whitespace the model writes
  // itself (Mistral's " " after [/INST]); anything else is not the model's to generate.
  if (reply->first.find_first_not_of(" \n") != std::string::npos)
    return Status(Code::unsupported, "chat template: an assistant reply in the history is not what follows the "
                                     "generation prompt");
  t->reply_prefix_ = reply->first;
  auto user = split_at(reply->second, kUser, "a second user turn");
  if (!user.ok()) return user.status();
  t->next_.second = user->second;
  // Where the conversation that ends with the reply renders as a prefix of it, the closing
  // is what that render adds after the reply and the rest opens the next user turn;
  // otherwise (a template that ends a finished conversation with eos_token) both go with the
  // closing.
  t->assistant_end_ = user->first;
  auto answered = t->render(messages({{"user", kEarlierUser}, {"assistant", kReply}}), false);
  const std::string replied = *asked + reply->first + std::string(kReply);
  if (answered.ok() && answered->compare(0, replied.size(), replied) == 0 &&
      full->compare(0, answered->size(), *answered) == 0) {
    t->assistant_end_ = answered->substr(replied.size());
    t->next_.first = user->first.substr(t->assistant_end_.size());
  }

  // Whitespace around a message's content: kept, or stripped (Gemma's templates trim).
  std::string padded(1, ' ');  // (" " + ... trips GCC 12's -Wrestrict false positive)
  padded.append(kUser).push_back('\n');
  auto spaced = t->render(messages({{"user", padded}}), true);
  if (!spaced.ok()) return spaced.status();
  t->trims_ = spaced->find(padded) == std::string::npos;
  return std::shared_ptr<const JinjaTurns>(std::move(t));
}

Result<JinjaTurns::ToolResults> JinjaTurns::tool_results(size_t k, std::string_view calls_json) const {
  const nlohmann::ordered_json calls = nlohmann::ordered_json::parse(calls_json, nullptr, false);
  if (k == 0 || !calls.is_array() || calls.empty())
    return Status(Code::internal, "chat template: tool results without the calls they answer");
  // An exchange whose reply makes the calls, with and without k results after it: the results
  // add [closing and header] result [between] result ... [end, generation prompt].
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  list.push_back({{"role", "user"}, {"content", std::string(kEarlierUser)}});
  list.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}});
  auto called = render(list.dump(), false);
  if (!called.ok()) return called.status();
  std::vector<std::string> marks;
  for (size_t i = 0; i < k; ++i) {
    marks.push_back("LLMSVCxTOOLx" + std::to_string(i) + "x7f3a");
    const auto& call = calls[std::min(i, calls.size() - 1)];  // result i answers call i
    list.push_back({{"role", "tool"}, {"content", marks.back()}, {"tool_call_id", call.value("id", "")},
                    {"name", call.contains("function") ? call["function"].value("name", "") : ""}});
  }
  auto answered = render(list.dump(), true);
  if (!answered.ok()) return answered.status();
  // The history holds the reply followed by assistant_end(), as the template closes a reply
  // without calls; one that closes a call otherwise cannot continue a turn at a time.
  if (called->size() < assistant_end_.size() ||
      called->compare(called->size() - assistant_end_.size(), assistant_end_.size(), assistant_end_) != 0)
    return Status(Code::unsupported, "chat template: a reply with tool calls does not end as a reply does");
  auto grown = increment(*called, *answered, "tool results");
  if (!grown.ok()) return grown.status();
  ToolResults out;
  std::string rest = std::move(grown).value();
  for (size_t i = 0; i < k; ++i) {
    auto parts = split_at(rest, marks[i], "a tool result");
    if (!parts.ok()) return parts.status();
    // A content written with tojson (Llama 3.x: a string is iterable) comes out quoted.
    const bool quoted = !parts->first.empty() && parts->first.back() == '"' && !parts->second.empty() &&
                        parts->second.front() == '"';
    if (i > 0 && quoted != out.as_json)
      return Status(Code::unsupported, "chat template: tool results are written in two ways");
    out.as_json = quoted;
    if (quoted) parts->first.pop_back(), parts->second.erase(0, 1);
    out.texts.push_back(std::move(parts->first));
    rest = std::move(parts->second);
  }
  out.texts.push_back(std::move(rest));
  return out;
}

Result<std::string> JinjaTurns::reply_with_calls(std::string_view content, std::string_view tool_calls_json) const {
  const nlohmann::json calls = nlohmann::json::parse(tool_calls_json, nullptr, false);
  if (!calls.is_array()) return Status(Code::internal, "chat template: tool calls are not an array");
  nlohmann::json list = nlohmann::json::array();
  list.push_back({{"role", "user"}, {"content", std::string(kEarlierUser)}});
  auto asked = render(list.dump(), true);
  if (!asked.ok()) return asked.status();
  list.push_back({{"role", "assistant"}, {"content", std::string(content)}, {"tool_calls", calls}});
  auto replied = render(list.dump(), false);
  if (!replied.ok()) return replied.status();
  auto grown = increment(*asked, *replied, "a reply with tool calls");
  if (!grown.ok()) return grown.status();
  const std::string& text = *grown;
  if (text.compare(0, reply_prefix_.size(), reply_prefix_) != 0 || text.size() < reply_prefix_.size() + assistant_end_.size() ||
      text.compare(text.size() - assistant_end_.size(), assistant_end_.size(), assistant_end_) != 0)
    return Status(Code::unsupported, "chat template: a reply with tool calls is not written between the generation "
                                     "prompt and the reply's end");
  return text.substr(reply_prefix_.size(), text.size() - reply_prefix_.size() - assistant_end_.size());
}

Result<std::pair<std::string, std::string>> JinjaTurns::first_turn(std::string_view system) const {
  auto text = render(messages({{"user", kUser}}, system), true);
  if (!text.ok()) return text.status();
  return split_at(*text, kUser, system.empty() ? "the first user turn" : "the first user turn after a system prompt");
}

}  // namespace llmsvc
