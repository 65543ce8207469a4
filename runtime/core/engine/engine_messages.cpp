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

#include "runtime/core/engine/engine_impl.h"
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

std::vector<int32_t> EngineImpl::reply_tokens(std::string_view content) const {
  const Tokenizer& tok = model_->tokenizer();
  const ChatTemplate& chat = model_->chat_template();
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

Result<EngineImpl::AddedMessages> EngineImpl::tokenize_messages(std::span<const ChatMessage> messages, bool at_start,
                                                               int turns, MessageRole next, const std::string& sys,
                                                               size_t base) const {
  AddedMessages out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string at = "message " + std::to_string(i) + " (" + role_name(m.role) + ")";
    if (m.role == MessageRole::system)
      return Status(Code::invalid_argument, at + ": the system prompt is the context's own, set when it is created");
    if (m.role == MessageRole::tool)
      return Status(Code::unsupported, at + ": tool messages come with tool calls, which this version does not make");
    if (m.role != next)
      return Status(Code::invalid_argument, at + ": the conversation takes a " + role_name(next) + " message here "
                                            "(user and assistant messages alternate, from a user message)");
    std::vector<int32_t> ids;
    if (m.role == MessageRole::user) {
      ids = turn_tokens(false, at_start && out.ids.empty(), turns + out.users == 0, sys, m.content);
      ++out.users;
    } else {
      ids = reply_tokens(m.content);
    }
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    // Kept as the template holds it (stripped where it strips content): every byte kept is a
    // byte of the message's tokens, so a context's messages stay within n_ctx token texts.
    out.logged.push_back({static_cast<uint32_t>(m.role), static_cast<uint32_t>(base + out.ids.size()),
                          model_->chat_template().user_content(m.content)});
    next = m.role == MessageRole::user ? MessageRole::assistant : MessageRole::user;
  }
  return out;
}

Result<std::vector<int32_t>> EngineImpl::message_ids(const CountParams& p) const {
  if (!p.chat) return Status(Code::invalid_argument, "messages are counted in a chat context only");
  LLMSVC_RETURN_IF_ERROR(model_->chat_template().usable(p.system_prompt));
  auto added = tokenize_messages(p.messages, p.first_turn, p.first_turn ? 0 : 1, MessageRole::user, p.system_prompt, 0);
  if (!added.ok()) return added.status();
  return std::move(added->ids);
}

Status EngineImpl::append_messages(std::string_view id, std::span<const ChatMessage> messages,
                                   int32_t max_context_tokens) {
  auto entered = enter(id);
  if (!entered.ok()) return entered.status();
  ContextState& ctx = **entered;
  kv_.store().pin(ctx.kv);
  BusyGuard guard{mu_, ctx, kv_.store()};
  LLMSVC_RETURN_IF_ERROR(check_keeps_messages(ctx));
  LLMSVC_RETURN_IF_ERROR(model_->chat_template().usable(ctx.system_prompt));
  const MessageRole next = ctx.messages.empty() || MessageRole(ctx.messages.back().role) == MessageRole::assistant
                               ? MessageRole::user : MessageRole::assistant;
  // Every message is checked and tokenized before any is kept: all go in, or none.
  auto added = tokenize_messages(messages, ctx.tokens.empty(), ctx.turns, next, ctx.system_prompt, ctx.tokens.size());
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
  auto pick = [first, max](const std::vector<persist::LoggedMessage>& all) {
    std::vector<ChatMessage> out;
    for (size_t i = first; i < all.size() && out.size() < max; ++i)
      out.push_back({MessageRole(all[i].role), all[i].content});
    return out;
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = contexts_.find(id); it != contexts_.end()) {
      const ContextState& ctx = *it->second;
      LLMSVC_RETURN_IF_ERROR(check_keeps_messages(ctx));
      std::lock_guard<std::mutex> mlock(ctx.messages_mu);
      return pick(ctx.messages);
    }
  }
  auto info = context_info(id);  // not loaded: read from storage, unlocked
  if (!info.ok()) return info.status();
  if (info->raw) return Status(Code::invalid_argument, "context '" + std::string(id) + "' is raw: it holds text, not messages");
  auto hist = persist::HistoryLog::peek(root(), persist::layout::history(id), model_->config().n_vocab);
  if (!hist.ok()) return hist.status();
  if (!hist->keeps_messages)
    return Status(Code::unsupported, "context '" + std::string(id) + "' was made before contexts kept their messages");
  return pick(hist->messages);
}

}  // namespace llmsvc
