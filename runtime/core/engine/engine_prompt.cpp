// SPDX-License-Identifier: Apache-2.0
// A call's prompt as tokens: the chat template around the user's text, and the elastic level
// and prompt compression the call runs with.
#include "runtime/core/engine/engine_impl.h"

#include <algorithm>

namespace llmsvc {

std::vector<int32_t> EngineImpl::prompt_ids(std::string_view text, const CountParams& p) const {
  return turn_tokens(model_->chat_template(), !p.chat, p.first_turn, p.first_turn, p.system_prompt, text);
}

std::vector<int32_t> EngineImpl::prompt_tokens(const ContextState& ctx, std::string_view prompt) const {
  return turn_tokens(chat_of(ctx), ctx.raw, ctx.tokens.empty(), ctx.turns == 0, ctx.system_prompt, prompt);
}

std::vector<int32_t> EngineImpl::turn_tokens(const ChatTemplate& chat, bool raw, bool at_start, bool first,
                                             const std::string& sys, std::string_view prompt) const {
  const Tokenizer& tok = model_->tokenizer();
  if (raw) return tok.encode(prompt, at_start, /*parse_special=*/true);
  auto [before, after] = chat.user_turn_parts(sys, first);
  if (first) before = chat.system_prefix(sys) + before;
  const std::string user = chat.user_content(prompt);
  // The user's text must never become special tokens. When it holds no special-token text,
  // the whole turn is tokenized at once (exactly as llama.cpp tokenizes a rendered
  // template); otherwise the template parts and the user text are tokenized apart.
  if (tok.encode(user, false, true) == tok.encode(user, false, false)) {
    return tok.encode(before + user + after, at_start, /*parse_special=*/true);
  }
  std::vector<int32_t> out = tok.encode(before, at_start, /*parse_special=*/true);
  std::vector<int32_t> mid = tok.encode(user, false, /*parse_special=*/false);
  std::vector<int32_t> tail = tok.encode(after, false, /*parse_special=*/true);
  out.insert(out.end(), mid.begin(), mid.end());
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

std::vector<std::pair<int, int>> EngineImpl::context_levels(const ContextState& ctx) {
  std::vector<std::pair<int, int>> by_level;
  const int C = ctx.kv.geometry().chunk_tokens;
  for (int c = 0; c < ctx.kv.n_chunks() && c * C < ctx.n_evaluated; ++c) {
    const int tokens = std::min(C, ctx.n_evaluated - c * C), level = ctx.kv.level(c);
    auto it = std::find_if(by_level.begin(), by_level.end(), [&](const auto& e) { return e.first == level; });
    if (it == by_level.end()) {
      by_level.emplace_back(level, tokens);
    } else {
      it->second += tokens;
    }
  }
  return by_level;
}

Result<LevelSelector::Choice> EngineImpl::call_level(const CallParams& params, policy::PromptShape prompt) {
  auto choice = levels_.choose(params.level_percent, params.slo_ttft_ratio, params.slo_tpot_ratio, prompt,
                               params.prompt_keep, &weights_);
  if (!choice.ok() || choice->index < 0) return choice;
  // Whether the Forward can run it (one device that slices weights); each evaluation sets it.
  Status runnable = forward_->check_level(choice->index);
  if (runnable.ok()) return choice;
  if (params.level_percent != 0) return runnable;
  LevelSelector::Choice full;
  full.keep = choice->keep;
  full.slo_missed = true;
  return full;
}

}  // namespace llmsvc
