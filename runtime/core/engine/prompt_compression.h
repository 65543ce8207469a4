// SPDX-License-Identifier: Apache-2.0
// Prompt compression with no model run (issue 23, ElastiLM's prompt levels): the least
// informative parts of a prompt's text dropped, informative meaning unigram self-information
// (Tokenizer::information; a word scores its rarest token, a number the rarest of all).
// LLMLingua scores tokens by a small LM's surprisal and ElastiLM by a trained scorer; both cost a
// forward pass over the prompt, which is the time compression is there to save, and the scorer
// needs training data we do not have.
//
// Whole sentences go first (the lowest mean first), then words of the sentences left: dropping
// function words across a text cost a 135M model three times the perplexity that dropping
// sentences did (docs/measurements/2026-12-02-prompt-compression.md). Kept whatever the share:
// the last sentence (up to kProtectedWords words: the question or instruction, as LLMLingua
// keeps it), every line break, and, when words are dropped, the words with a digit. The chat
// template is not part of the text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/tokenizer/tokenizer.h"

namespace llmsvc {

class PromptWords {
 public:
  static constexpr int kProtectedWords = 24;

  // Splits `text` (valid UTF-8) into words (a word: its leading white space and the run of
  // other bytes after it) and scores each by its tokens.
  PromptWords(const Tokenizer& tok, std::string_view text);

  // Tokens of the words compression may drop: those before the last sentence (an estimate:
  // each word tokenized alone).
  int droppable_tokens() const { return droppable_tokens_; }

  // The text without the least informative sentences, then words, whose tokens add up to at
  // least `drop_tokens` (or all that may go). A dropped word's line breaks stay.
  std::string without(int drop_tokens) const;

 private:
  struct Word {
    size_t begin = 0, end = 0;  // bytes of the text, leading white space included
    size_t space = 0;           // bytes of leading white space
    int tokens = 0;
    float information = 0;      // bits: its most informative token's
    int sentence = -1;          // index into sentences_; -1: the protected tail
    bool has_digit = false;
  };
  struct Sentence {
    size_t begin = 0, end = 0;  // words
    int tokens = 0;
    float information = 0;      // the mean of its words'
  };
  std::string_view body_of(const Word& w) const;

  std::string_view text_;
  std::vector<Word> words_;
  std::vector<Sentence> sentences_;  // of the words before the protected tail
  int droppable_tokens_ = 0;
};

}  // namespace llmsvc
