// SPDX-License-Identifier: Apache-2.0
// A model's own Jinja chat template, executed (runtime/core/chat/jinja), cut into the turn
// texts the engine feeds one call at a time: the first user turn (with the system prompt and
// what the template opens with), a later user turn, and what closes an assistant reply.
//
// The texts come from renders of probe conversations whose contents are sentinels: a user
// turn is the render with the turn minus the render without it, split at the sentinel. That
// needs a template whose render of a conversation starts with its render of any earlier part
// (true of the chat templates in use; checked when the template is loaded, so one that is not
// is an error, never a silently different prompt). With tools (an OpenAI-style JSON array)
// every probe renders them, and the texts around a reply's tool results come from probes too.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace llmsvc {

namespace jinja { class Template; }

class JinjaTurns {
 public:
  // Compiles `source` and probes it; an error names what failed (a construct the interpreter
  // lacks, the template's own raise_exception, a render that is not prefix-stable).
  // bos / eos: the vocabulary's texts, the template's bos_token and eos_token. A leading
  // bos_token is cut from every render: BOS is the tokenizer's to add.
  static Result<std::shared_ptr<const JinjaTurns>> make(std::string_view source, std::string bos, std::string eos,
                                                        std::string tools_json = {});

  // The first user turn around its text: the system turn (the template's default where
  // `system` is empty), the user header; then what follows the text up to the assistant's
  // first token. Errors: a template that refuses a system message, or renders it otherwise
  // than as a prefix.
  Result<std::pair<std::string, std::string>> first_turn(std::string_view system) const;
  // A later user turn around its text (after an assistant reply and assistant_end()).
  const std::pair<std::string, std::string>& next_turn() const { return next_; }
  // What follows an assistant reply's text in the history.
  const std::string& assistant_end() const { return assistant_end_; }
  // Whitespace the template puts between the generation prompt and a reply in the history
  // (Mistral's " "): the model writes it, or the history differs from the render by it.
  const std::string& reply_prefix() const { return reply_prefix_; }
  // Whether the template strips the whitespace around a message's content.
  bool trims_content() const { return trims_; }
  // The texts around k >= 1 tool results that answer an assistant reply with tool calls (after
  // the reply and assistant_end()): k + 1 texts, the last ending with the generation prompt;
  // as_json: the template writes a result's content as a JSON string (tojson), quotes and
  // all, not as it is. `calls_json`: the reply's calls in the template's form (their ids and
  // names go with the results, in order: templates print or check them). Errors: a template
  // that renders no tool message, or not as a prefix of the next turn.
  struct ToolResults {
    std::vector<std::string> texts;
    bool as_json = false;
  };
  Result<ToolResults> tool_results(size_t k, std::string_view calls_json) const;
  // An assistant reply with `content` and the calls `tool_calls_json` (the template's form) as
  // the history holds it: the text between the generation prompt and assistant_end(), what
  // the model would have written. Errors: a template that renders such a reply otherwise.
  Result<std::string> reply_with_calls(std::string_view content, std::string_view tool_calls_json) const;

 private:
  JinjaTurns() = default;
  Result<std::string> render(std::string_view messages_json, bool add_generation_prompt) const;

  std::shared_ptr<const jinja::Template> template_;
  std::string bos_, eos_, tools_;
  std::pair<std::string, std::string> next_;
  std::string assistant_end_, reply_prefix_;
  bool trims_ = false;
};

}  // namespace llmsvc
