// SPDX-License-Identifier: Apache-2.0
// Constraint: structured output for one generation — what the sampler loop calls.
//
//   auto c = Constraint::from_json_schema(schema, vocab);   // vocab: TokenVocab::from_tokenizer
//   while (!done) {
//     forward(...) -> logits;
//     c->apply(logits);                 // disallowed tokens -> -inf (or read c->allowed())
//     token = sampler.sample(logits);
//     c->accept(token);                 // advances the matcher; error if not allowed
//     if (tokenizer.is_end_of_generation(token)) break;   // only allowed once c->done()
//   }
//
// The compiled grammar (`CompiledGrammar`) is immutable and may be shared by constraints on
// several threads; a Constraint itself is used by one call at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <span>
#include <string_view>

#include "base/status.h"
#include "runtime/core/constrain/automaton.h"
#include "runtime/core/constrain/completion.h"
#include "runtime/core/constrain/grammar.h"
#include "runtime/core/constrain/token_mask.h"
#include "runtime/core/constrain/token_vocab.h"

namespace llmsvc::constrain {

using CompiledGrammar = std::shared_ptr<const Grammar>;

// The budget filter runs when the tokens left are within this many of the completion
// distance: one token raising the distance by more than this could still overrun a budget.
inline constexpr uint64_t kBudgetSlack = 64;

// Front ends (errors: Code::invalid_argument, or Code::unsupported for schema features
// that are not implemented; the message names the place).
Result<CompiledGrammar> compile_json_schema(std::string_view schema);
Result<CompiledGrammar> compile_gbnf(std::string_view grammar);

struct ConstraintStats {
  uint64_t masks = 0;         // allowed() computations
  uint64_t mask_ns = 0;       // time spent in them
  uint64_t accepts = 0;       // tokens accepted
  uint64_t accept_ns = 0;
  MaskStats mask;             // the masker's own counters
  size_t memory_bytes = 0;    // automaton pools and mask caches
};

class Constraint {
  struct Key {};  // only create() constructs

 public:
  Constraint(Key, CompiledGrammar grammar, std::shared_ptr<const TokenVocab> vocab, MaskOptions options);
  static Result<std::unique_ptr<Constraint>> create(CompiledGrammar grammar, std::shared_ptr<const TokenVocab> vocab,
                                                    MaskOptions options = {});
  static Result<std::unique_ptr<Constraint>> from_json_schema(std::string_view schema,
                                                              std::shared_ptr<const TokenVocab> vocab);
  static Result<std::unique_ptr<Constraint>> from_grammar(std::string_view gbnf, std::shared_ptr<const TokenVocab> vocab);

  // The tokens allowed next (end-of-generation ones iff done()). Valid until accept().
  const TokenMask& allowed();
  // Sets the logits of disallowed tokens to -infinity (logits.size() == vocabulary size).
  void apply(std::span<float> logits);
  // Advances by `token`. A token that is not allowed is Code::invalid_argument and leaves the
  // state unchanged; after an end-of-generation token the constraint is finished.
  Status accept(int32_t token);
  // Tokens that may still be generated, this one included (negative: no limit). Near the
  // end, allowed() keeps only tokens after which the output can still be completed in time
  // (see completion.h), so a reply is never cut off mid-JSON by max_tokens.
  void set_budget(int tokens_left);
  // Advances by raw bytes (text forced into the reply, e.g. a prefix the app supplies).
  Status accept_bytes(std::string_view bytes);

  bool done() const;        // the output so far is complete (end of generation allowed)
  bool finished() const { return ended_; }  // an end-of-generation token was accepted
  void reset();             // back to the start, caches kept

  ConstraintStats stats() const;

 private:
  const TokenMask& narrow_to_budget(const TokenMask& base);

  // The completion distance after each allowed token of a state, the budget filter's costly
  // part (one automaton step a token), kept per state: the states near the end of a reply
  // recur from call to call, and a string's content returns to one state after each character.
  struct BudgetRow {
    // Tokens farther than `closest` (the closest ones go only when just an end token stays):
    // (token, distance) farthest first while few; past vocabulary/64 of them, a mask per
    // distinct distance of the tokens at it or farther (a string's first token: all but one).
    std::vector<std::pair<int32_t, uint64_t>> by_distance;
    std::vector<uint64_t> distances;  // mask form: distinct, farthest first
    std::vector<TokenMask> at_or_beyond;  // mask form: per distances[i]
    uint64_t closest = UINT64_MAX;
    bool eog = false;  // an end-of-generation token is allowed (distance 0)
    size_t bytes() const;
  };
  const BudgetRow& budget_row(const TokenMask& base);

  std::shared_ptr<const TokenVocab> vocab_;
  Automaton automaton_;
  TokenMasker masker_;
  uint32_t state_ = Automaton::kReject;
  const TokenMask* mask_ = nullptr;  // allowed() of the current state, once computed
  TokenMask empty_;                  // allowed() once finished
  TokenMask budget_mask_;            // allowed() narrowed by the budget
  CompletionDistance distance_;
  std::unordered_map<uint32_t, BudgetRow> budget_rows_;  // by state, for budget_generation_
  uint64_t budget_generation_ = 0;
  size_t budget_rows_bytes_ = 0;
  size_t budget_rows_limit_;
  int budget_ = -1;
  bool ended_ = false;
  ConstraintStats stats_;
};

}  // namespace llmsvc::constrain
