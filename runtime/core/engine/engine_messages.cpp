// SPDX-License-Identifier: Apache-2.0
// EngineImpl, a context's conversation: messages appended without generating, a rewind to
// message n, and the messages read back.
//
// A message is the tokens its turn adds to the history, so the conversation and the token
// history never disagree: appending tokenizes each message's turn as a call would (a user
// message with its template, the first one with the system turn; an assistant message's text
// and the turn's end), and rewinding cuts the history where message n ended, keeping every KV
// chunk before it.
#include <algorithm>
#include <optional>

#include "runtime/core/engine/engine_impl.h"

#include <nlohmann/json.hpp>

#include "runtime/core/chat/tool_calls.h"
#include "runtime/core/chat/tool_spec.h"
#include "runtime/core/persist/context_meta.h"
#include "runtime/core/tokenizer/jinja_turns.h"
#include "runtime/core/tokenizer/chat_template.h"
#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc {
size_t EngineImpl::max_piece_bytes() const { return model_->tokenizer().max_piece_bytes(); }

Status EngineImpl::check_keeps_messages(const ContextState& ctx) const {
  if (ctx.raw) return Status(Code::invalid_argument, "context '" + ctx.id + "' is raw: it holds text, not messages");
  if (!ctx.keeps_messages)
    return Status(Code::unsupported, "context '" + ctx.id + "' was made before contexts kept their messages "
                                     "(history format 1): its turns cannot be listed or rewound; make a new one");
  return Status::Ok();
}

std::vector<int32_t> EngineImpl::reply_tokens(const ChatTemplate& chat, std::string_view content) const {
  const Tokenizer& tok = model_->tokenizer();
  const std::string text = chat.reply_text(content);
  const std::string end = chat.assistant_end();
  // As a user turn: the text never becomes special tokens, and without special-token text in
  // it the turn is tokenized whole, as a rendered template is.
  if (tok.encode(text, false, true) == tok.encode(text, false, false)) return tok.encode(text + end, false, true);
  std::vector<int32_t> out = tok.encode(text, false, /*parse_special=*/false);
  std::vector<int32_t> tail = tok.encode(end, false, /*parse_special=*/true);
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

Result<std::vector<int32_t>> EngineImpl::tool_result_tokens(const ChatTemplate& chat, std::string_view reply,
                                                            std::span<const ChatMessage> results) const {
  if (!chat.jinja) return Status(Code::internal, "tool results in a context without tools");
  const chat::ParsedReply parsed = chat::parse_tool_calls(chat.tool_format, reply);
  auto turns = chat.jinja->tool_results(results.size(),
                                        chat::tool_calls_json(parsed.calls, chat::template_arguments(chat.tool_format)));
  if (!turns.ok()) return turns.status();
  // The texts around the results are the template's (special tokens parsed), the results the
  // app's (never parsed); without special-token text in them all, tokenized whole.
  const Tokenizer& tok = model_->tokenizer();
  std::vector<std::string> contents;
  bool plain = true;
  for (const ChatMessage& m : results) {
    contents.push_back(turns->as_json ? nlohmann::json(m.content).dump() : chat.user_content(m.content));
    plain = plain && tok.encode(contents.back(), false, true) == tok.encode(contents.back(), false, false);
  }
  if (plain) {
    std::string whole = turns->texts[0];
    for (size_t i = 0; i < contents.size(); ++i) whole += contents[i] + turns->texts[i + 1];
    return tok.encode(whole, false, true);
  }
  std::vector<int32_t> out = tok.encode(turns->texts[0], false, true);
  for (size_t i = 0; i < contents.size(); ++i) {
    std::vector<int32_t> mid = tok.encode(contents[i], false, false);
    std::vector<int32_t> tail = tok.encode(turns->texts[i + 1], false, true);
    out.insert(out.end(), mid.begin(), mid.end());
    out.insert(out.end(), tail.begin(), tail.end());
  }
  return out;
}

namespace {

// Whether an assistant message's text holds tool calls (a context with tools).
bool calls_tools(const ChatTemplate& chat, const std::string& tools, std::string_view content) {
  return !tools.empty() && !chat::parse_tool_calls(chat.tool_format, content).calls.empty();
}

}  // namespace

MessageRole EngineImpl::next_role(const ContextState& ctx) const {
  if (ctx.messages.empty()) return MessageRole::user;
  const persist::LoggedMessage& last = ctx.messages.back();
  switch (MessageRole(last.role)) {
    case MessageRole::user:
    case MessageRole::tool: return MessageRole::assistant;
    default: return calls_tools(chat_of(ctx), ctx.tools, last.content) ? MessageRole::tool : MessageRole::user;
  }
}

Result<EngineImpl::AddedMessages> EngineImpl::tokenize_messages(const ChatTemplate& chat, const std::string& tools,
                                                               std::span<const ChatMessage> messages, bool at_start,
                                                               int turns, MessageRole next, const std::string& sys,
                                                               std::string_view last_reply, size_t base) const {
  AddedMessages out;
  std::string reply(last_reply);  // the text of the last reply, whose calls tool results answer
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string at = "message " + std::to_string(i) + " (" + role_name(m.role) + ")";
    if (m.role == MessageRole::system)
      return Status(Code::invalid_argument, at + ": the system prompt is the context's own, set when it is created");
    if (m.role != MessageRole::assistant && !m.tool_calls.empty())
      return Status(Code::invalid_argument, at + ": only an assistant message carries tool calls");
    if (m.role == MessageRole::tool && next != MessageRole::tool)
      return Status(Code::invalid_argument,
                    at + (tools.empty() ? ": the context declares no tools" :
                          ": tool results answer a reply that called tools: they come right after it, all in one "
                          "append"));
    if (m.role != next)
      return Status(Code::invalid_argument, at + ": the conversation takes a " + role_name(next) + " message here "
                                            "(user and assistant messages alternate, from a user message; a reply "
                                            "that calls tools is followed by their results)");
    std::vector<int32_t> ids;
    std::optional<std::string> logged_text;  // what the history keeps, where not the content
    size_t n_same = 1;
    if (m.role == MessageRole::user) {
      ids = turn_tokens(chat, false, at_start && out.ids.empty(), turns + out.users == 0, sys, m.content);
      ++out.users;
      next = MessageRole::assistant;
    } else if (m.role == MessageRole::tool) {
      // A reply's results render together (a template may join them into one turn).
      while (i + n_same < messages.size() && messages[i + n_same].role == MessageRole::tool) ++n_same;
      auto r = tool_result_tokens(chat, reply, messages.subspan(i, n_same));
      if (!r.ok()) return Status(r.status().code(), at + ": " + r.status().message());
      ids = std::move(r).value();
      next = MessageRole::assistant;
    } else if (!m.tool_calls.empty()) {
      // A reply of the app's history with calls: written as the model writes them (the
      // template's own rendering), so that reading it back parses the same calls.
      if (tools.empty() || !chat.jinja) return Status(Code::invalid_argument, at + ": the context declares no tools");
      auto calls = chat::parse_app_tool_calls(m.tool_calls);
      if (!calls.ok()) return Status(calls.status().code(), at + ": " + calls.status().message());
      auto text = chat.jinja->reply_with_calls(m.content, chat::tool_calls_json(*calls, chat::template_arguments(chat.tool_format)));
      if (!text.ok()) return Status(text.status().code(), at + ": " + text.status().message());
      if (chat::parse_tool_calls(chat.tool_format, *text).calls.size() != calls->size())
        return Status(Code::unsupported, at + ": the template writes these calls in a form this library does not "
                                              "read back");
      ids = reply_tokens(chat, *text);
      logged_text = std::move(text).value();
      reply = *logged_text;
      next = calls->empty() ? MessageRole::user : MessageRole::tool;
    } else {
      ids = reply_tokens(chat, m.content);
      next = calls_tools(chat, tools, m.content) ? MessageRole::tool : MessageRole::user;
      reply = m.content;
    }
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    // Kept as the template holds it (stripped where it strips content): every byte kept is a
    // byte of the message's tokens, so a context's messages stay within n_ctx token texts.
    // A reply's tool results all end where the last one's tokens end.
    for (size_t k = 0; k < n_same; ++k)
      out.logged.push_back({static_cast<uint32_t>(messages[i + k].role), static_cast<uint32_t>(base + out.ids.size()),
                            logged_text ? *logged_text : chat.user_content(messages[i + k].content)});
    i += n_same - 1;
  }
  return out;
}

Result<std::vector<int32_t>> EngineImpl::message_ids(const CountParams& p) const {
  if (!p.chat) return Status(Code::invalid_argument, "messages are counted in a chat context only");
  const ChatTemplate& chat = model_->chat_template();
  LLMSVC_RETURN_IF_ERROR(chat.usable(p.system_prompt));
  auto added = tokenize_messages(chat, {}, p.messages, p.first_turn, p.first_turn ? 0 : 1, MessageRole::user,
                                 p.system_prompt, {}, 0);
  if (!added.ok()) return added.status();
  return std::move(added->ids);
}

ChatMessage EngineImpl::read_message(const persist::LoggedMessage& m, const std::string& tools) const {
  ChatMessage out{MessageRole(m.role), m.content};
  if (tools.empty() || out.role != MessageRole::assistant) return out;
  const ChatTemplate& chat = model_->chat_template();  // (its tool syntax is the model's)
  chat::ParsedReply parsed = chat::parse_tool_calls(chat.tool_format, m.content);
  if (parsed.calls.empty()) return out;
  out.content = std::move(parsed.content);
  out.tool_calls = chat::tool_calls_json(parsed.calls);
  return out;
}

Status EngineImpl::append_messages(std::string_view id, std::span<const ChatMessage> messages,
                                   int32_t max_context_tokens) {
  auto entered = enter(id);
  if (!entered.ok()) return entered.status();
  ContextState& ctx = **entered;
  kv_.store().pin(ctx.kv);
  BusyGuard guard{mu_, ctx, kv_.store()};
  LLMSVC_RETURN_IF_ERROR(check_keeps_messages(ctx));
  const ChatTemplate& chat = chat_of(ctx);
  LLMSVC_RETURN_IF_ERROR(chat.usable(ctx.system_prompt));
  // Every message is checked and tokenized before any is kept: all go in, or none.
  const std::string last_reply =
      !ctx.messages.empty() && MessageRole(ctx.messages.back().role) == MessageRole::assistant ? ctx.messages.back().content
                                                                                               : std::string();
  auto added = tokenize_messages(chat, ctx.tools, messages, ctx.tokens.empty(), ctx.turns, next_role(ctx),
                                 ctx.system_prompt, last_reply, ctx.tokens.size());
  if (!added.ok()) return added.status();
  const size_t total = ctx.tokens.size() + added->ids.size();
  if (total + 1 > static_cast<size_t>(n_ctx_))
    return Status(Code::context_overflow, "the messages add " + std::to_string(added->ids.size()) +
                                              " tokens, and the context holds " + std::to_string(ctx.tokens.size()) +
                                              " of at most " + std::to_string(n_ctx_));
  if (max_context_tokens > 0 && total + 1 > static_cast<size_t>(max_context_tokens))
    return Status(Code::quota_exceeded, "the messages add " + std::to_string(added->ids.size()) +
                                            " tokens, and the context holds " + std::to_string(ctx.tokens.size()) +
                                            " of at most " + std::to_string(max_context_tokens) + " (the app's quota)");
  if (added->logged.empty()) return Status::Ok();
  // Kept as tokens not yet evaluated: the next call computes their KV with its own prompt.
  ctx.tokens.insert(ctx.tokens.end(), added->ids.begin(), added->ids.end());
  ctx.turns += added->users;
  {
    std::lock_guard<std::mutex> lock(ctx.messages_mu);
    ctx.messages.insert(ctx.messages.end(), added->logged.begin(), added->logged.end());
  }
  return persist(ctx);
}

Status EngineImpl::truncate_messages(std::string_view id, size_t n) {
  auto entered = enter(id);
  if (!entered.ok()) return entered.status();
  ContextState& ctx = **entered;
  kv_.store().pin(ctx.kv);  // as a call's: the store leaves its chunks alone while they change
  BusyGuard guard{mu_, ctx, kv_.store()};
  LLMSVC_RETURN_IF_ERROR(check_keeps_messages(ctx));
  if (n > ctx.messages.size())
    return Status(Code::invalid_argument, "the conversation has " + std::to_string(ctx.messages.size()) +
                                              " messages, not " + std::to_string(n));
  if (n == ctx.messages.size()) return Status::Ok();
  if (n > 0 && MessageRole(ctx.messages[n - 1].role) == MessageRole::tool &&
      MessageRole(ctx.messages[n].role) == MessageRole::tool)
    return Status(Code::invalid_argument, "message " + std::to_string(n) + " is one of a reply's tool results, which "
                                          "go together: keep all of them or none");
  const uint32_t keep = n == 0 ? 0 : ctx.messages[n - 1].token_end;
  int turns = 0;
  for (size_t i = 0; i < n; ++i) turns += MessageRole(ctx.messages[i].role) == MessageRole::user;
  // Durable first: a crash after this leaves the rewound conversation, never half of it.
  LLMSVC_RETURN_IF_ERROR(ctx.log->truncate(keep, turns, static_cast<uint32_t>(n)));
  {
    std::lock_guard<std::mutex> lock(ctx.messages_mu);
    ctx.messages.resize(n);
  }
  ctx.n_persisted_messages = n;
  ctx.tokens.resize(keep);
  ctx.n_persisted = keep;
  ctx.turns = ctx.persisted_turns = turns;
  // The chunks before the cut stay as they are (resident, swapped or compressed); the last
  // one, if the cut falls inside it, has its later rows written over by the next call.
  ctx.n_evaluated = std::min(ctx.n_evaluated, static_cast<int>(keep));
  ctx.n_evaluated = ctx.kv.truncate(ctx.n_evaluated);
  // The chunk table now, so that a restart before the next call restores no chunk past the cut.
  CallStats st;
  kv_.swap_out(ctx, st);
  return Status::Ok();
}

Result<std::vector<ChatMessage>> EngineImpl::messages(std::string_view id, size_t first, size_t max) const {
  auto pick = [this, first, max](const std::vector<persist::LoggedMessage>& all, const std::string& tools) {
    std::vector<ChatMessage> out;
    for (size_t i = first; i < all.size() && out.size() < max; ++i) out.push_back(read_message(all[i], tools));
    return out;
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = contexts_.find(id); it != contexts_.end()) {
      const ContextState& ctx = *it->second;
      LLMSVC_RETURN_IF_ERROR(check_keeps_messages(ctx));
      std::lock_guard<std::mutex> mlock(ctx.messages_mu);
      return pick(ctx.messages, ctx.tools);
    }
  }
  auto info = context_info(id);  // not loaded: read from storage, unlocked
  if (!info.ok()) return info.status();
  if (info->raw) return Status(Code::invalid_argument, "context '" + std::string(id) + "' is raw: it holds text, not messages");
  auto hist = persist::HistoryLog::peek(root(), persist::layout::history(id), model_->config().n_vocab);
  if (!hist.ok()) return hist.status();
  if (!hist->keeps_messages)
    return Status(Code::unsupported, "context '" + std::string(id) + "' was made before contexts kept their messages");
  auto meta = persist::read_context_meta(root(), persist::layout::meta(id));
  if (!meta.ok()) return meta.status();
  return pick(hist->messages, meta->tools);
}

}  // namespace llmsvc
