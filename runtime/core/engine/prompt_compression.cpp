// SPDX-License-Identifier: Apache-2.0
// Prompt words, their unigram information, and the text without the least informative.
#include "runtime/core/engine/prompt_compression.h"

#include <algorithm>
#include <cmath>

namespace llmsvc {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// A word that ends a sentence: its last bytes (after closing quotes or brackets) are . ! ? or :.
bool ends_sentence(std::string_view word) {
  while (!word.empty() && (word.back() == '"' || word.back() == '\'' || word.back() == ')' || word.back() == ']'))
    word.remove_suffix(1);
  return !word.empty() && (word.back() == '.' || word.back() == '!' || word.back() == '?' || word.back() == ':');
}

}  // namespace

PromptWords::PromptWords(const Tokenizer& tok, std::string_view text) : text_(text) {
  for (size_t i = 0; i < text.size();) {
    Word w;
    w.begin = i;
    while (i < text.size() && is_space(text[i])) ++i;
    w.space = i - w.begin;
    while (i < text.size() && !is_space(text[i])) ++i;
    w.end = i;
    words_.push_back(w);
  }
  // The last sentence: back from the end to the word after the previous sentence's end or line.
  // (White space alone at the end is no word of it.)
  size_t tail = words_.size();
  bool has_word = false;
  while (tail > 0 && words_.size() - tail < kProtectedWords) {
    const Word& w = words_[tail - 1];
    const std::string_view lead = text.substr(w.begin, w.space);
    const std::string_view body = text.substr(w.begin + w.space, w.end - w.begin - w.space);
    if (has_word && ends_sentence(body)) break;
    --tail;
    has_word = has_word || !body.empty();
    if (has_word && lead.find('\n') != std::string_view::npos) break;
  }
  // A number's tokens are frequent, its value is not: it scores as the rarest token would.
  const float rarest = static_cast<float>(std::log2(static_cast<double>(tok.n_vocab()) + 2.0));
  for (size_t k = 0; k < tail; ++k) {
    Word& w = words_[k];
    const std::string_view lead = text.substr(w.begin, w.space);
    if (sentences_.empty() || lead.find('\n') != std::string_view::npos ||
        (k > 0 && ends_sentence(body_of(words_[k - 1])))) {
      sentences_.push_back(Sentence{k, k, 0, 0});
    }
    Sentence& s = sentences_.back();
    s.end = k + 1;
    w.sentence = static_cast<int>(sentences_.size()) - 1;
    const std::string_view body = body_of(w);
    if (body.empty()) continue;  // white space alone
    // Tokenized with one space before it, as a word inside a text is (SentencePiece adds its own).
    std::string word;
    word.reserve(body.size() + 1);
    if (w.space > 0) word.push_back(' ');
    word.append(body);
    const std::vector<TokenId> ids = tok.encode(word, false, false);
    w.tokens = static_cast<int>(ids.size());
    // A word carries at least what its rarest token does: a mean would let the comma after a
    // word (a frequent token) make the word look dispensable.
    for (TokenId id : ids) w.information = std::max(w.information, tok.information(id));
    w.has_digit = std::any_of(body.begin(), body.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (w.has_digit) w.information = rarest;
    s.tokens += w.tokens;
    s.information += w.information;
    droppable_tokens_ += w.tokens;
  }
  for (Sentence& s : sentences_) s.information /= static_cast<float>(std::max<size_t>(1, s.end - s.begin));
}

std::string_view PromptWords::body_of(const Word& w) const {
  return text_.substr(w.begin + w.space, w.end - w.begin - w.space);
}

std::string PromptWords::without(int drop_tokens) const {
  std::vector<bool> dropped(words_.size(), false);
  int need = drop_tokens;
  // Whole sentences first, the least informative (mean over words) first: a small model reads
  // the sentences left as it reads any text, where one missing its function words reads as
  // noise (bench_prompt_keep). A sentence more than twice what is still to drop is passed over
  // while smaller ones may do.
  std::vector<size_t> order(sentences_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sentences_[a].information < sentences_[b].information; });
  for (size_t i : order) {
    const Sentence& s = sentences_[i];
    if (need <= 0) break;
    if (s.tokens > 2 * need) continue;
    for (size_t k = s.begin; k < s.end; ++k) dropped[k] = true;
    need -= s.tokens;
  }
  // The rest in words of the sentences left, the least informative first (numbers stay).
  std::vector<size_t> words;
  for (size_t k = 0; k < words_.size(); ++k)
    if (words_[k].sentence >= 0 && !dropped[k] && words_[k].tokens > 0 && !words_[k].has_digit) words.push_back(k);
  std::stable_sort(words.begin(), words.end(),
                   [&](size_t a, size_t b) { return words_[a].information < words_[b].information; });
  for (size_t k : words) {
    if (need <= 0) break;
    dropped[k] = true;
    need -= words_[k].tokens;
  }
  std::string out;
  out.reserve(text_.size());
  bool pending_break = false;  // a dropped word's line break, written before the next kept word
  for (size_t k = 0; k < words_.size(); ++k) {
    const Word& w = words_[k];
    const std::string_view lead = text_.substr(w.begin, w.space);
    if (dropped[k]) {
      pending_break = pending_break || lead.find('\n') != std::string_view::npos;
      continue;
    }
    const bool after_drop = k > 0 && dropped[k - 1];
    if (pending_break && lead.find('\n') == std::string_view::npos) {
      out.push_back('\n');
      out.append(text_.substr(w.begin + w.space, w.end - w.begin - w.space));
    } else if (out.empty() && after_drop) {  // the text starts at this word: no space before it
      out.append(text_.substr(w.begin + w.space, w.end - w.begin - w.space));
    } else {
      out.append(text_.substr(w.begin, w.end - w.begin));
    }
    pending_break = false;
  }
  if (pending_break) out.push_back('\n');
  return out;
}

}  // namespace llmsvc
