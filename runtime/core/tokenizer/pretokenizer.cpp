// SPDX-License-Identifier: Apache-2.0
// Hand-written pre-tokenizer splitters equivalent to llama.cpp's regex lists (see pretokenizer.h).
//
// Text is decoded to code points first; each regex of a list splits every segment the
// previous one produced, as unicode_regex_split does: what a regex matches becomes a
// segment and so does each unmatched gap between matches. Look-ahead such as (?!\S) sees
// only the segment, so a segment end counts as end of text.
#include "runtime/core/tokenizer/pretokenizer.h"

#include <array>

#include "runtime/core/tokenizer/unicode_class.h"

namespace llmsvc {
namespace {

// The code points of a fragment and their classes; segments are [ini, end) in code points.
struct Cpts {
  std::vector<uint32_t> cpt;
  std::vector<uint8_t> cls;
};

// Class tests of positions within one segment; positions past its end test false, as
// llama.cpp's splitters see nothing beyond the segment.
class Segment {
 public:
  Segment(const Cpts& c, size_t end) : c_(c), end_(end) {}
  bool in(size_t p) const { return p < end_; }
  uint32_t cpt(size_t p) const { return in(p) ? c_.cpt[p] : 0xFFFFFFFFu; }
  bool letter(size_t p) const { return in(p) && unicode::category_of(c_.cls[p]) == unicode::kLetter; }
  bool number(size_t p) const { return in(p) && unicode::category_of(c_.cls[p]) == unicode::kNumber; }
  bool space(size_t p) const { return in(p) && unicode::is_whitespace(c_.cls[p]); }
  // [^\s\p{L}\p{N}] inside the segment.
  bool other(size_t p) const { return in(p) && !space(p) && !letter(p) && !number(p); }

 private:
  const Cpts& c_;
  size_t end_;
};

using Lens = std::vector<uint32_t>;  // segment lengths in code points

// Emits tokens as consecutive lengths: each call ends the current token at `to`.
class Emitter {
 public:
  Emitter(Lens& out, size_t start) : out_(out), prev_(start) {}
  void to(size_t end) {
    if (end > prev_) out_.push_back(static_cast<uint32_t>(end - prev_));
    prev_ = end;
  }

 private:
  Lens& out_;
  size_t prev_;
};

// 's|'t|'re|'ve|'m|'ll|'d (case-insensitive when `fold`): length of the match at `pos` or 0.
// ASCII folding is enough: gen_unicode_table.py checks that no other code point lowercases
// to these letters in llama.cpp's tables.
size_t contraction(const Segment& s, size_t pos, bool fold) {
  if (s.cpt(pos) != '\'' || !s.in(pos + 1)) return 0;
  const auto lower = [fold](uint32_t c) { return fold && c >= 'A' && c <= 'Z' ? c + 32 : c; };
  const uint32_t a = lower(s.cpt(pos + 1));
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (!s.in(pos + 2)) return 0;
  const uint32_t b = lower(s.cpt(pos + 2));
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (llama.cpp's own splitter for it, whose trailing \s+ it adds implicitly).
void split_gpt2(const Cpts& c, size_t ini, size_t end, Lens& out) {
  const Segment s(c, end);
  Emitter emit(out, ini);
  size_t pos = ini;
  while (pos < end) {
    if (const size_t n = contraction(s, pos, false)) {
      pos += n;
      emit.to(pos);
      continue;
    }
    const size_t q = s.cpt(pos) == ' ' ? pos + 1 : pos;  // the optional leading space
    if (s.letter(q) || s.number(q) || s.other(q)) {
      const bool letter = s.letter(q), number = s.number(q);
      pos = q;
      if (letter) {
        while (s.letter(pos)) ++pos;
      } else if (number) {
        while (s.number(pos)) ++pos;
      } else {
        while (s.other(pos)) ++pos;
      }
      emit.to(pos);
      continue;
    }
    size_t nws = 0;
    while (s.space(pos + nws)) ++nws;
    if (nws > 1 && s.in(pos + nws)) {
      pos += nws - 1;  // \s+(?!\S): leave the last space to the word after it
    } else if (nws > 0) {
      pos += nws;
    } else {
      pos += 1;
    }
    emit.to(pos);
  }
}

// Llama 3 and Qwen2 (max_digits 3 and 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void split_llama3(const Cpts& c, size_t ini, size_t end, Lens& out, size_t max_digits) {
  const Segment s(c, end);
  Emitter emit(out, ini);
  const auto newline = [&](size_t p) { return s.cpt(p) == '\r' || s.cpt(p) == '\n'; };
  size_t pos = ini;
  while (pos < end) {
    if (const size_t n = contraction(s, pos, true)) {
      pos += n;
      emit.to(pos);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!newline(pos) && !s.number(pos) && (s.letter(pos) || s.letter(pos + 1))) {
      ++pos;
      while (s.letter(pos)) ++pos;
      emit.to(pos);
      continue;
    }
    // \p{N}{1,max}
    if (s.number(pos)) {
      size_t run = 0;
      while (s.number(pos) && run < max_digits) {
        ++pos;
        ++run;
      }
      emit.to(pos);
      continue;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*  (a lone space at the segment end also lands here, as in llama.cpp)
    const size_t q = s.cpt(pos) == ' ' ? pos + 1 : pos;
    if (s.other(q) || !s.in(q)) {
      pos = q;
      while (s.other(pos)) ++pos;
      while (newline(pos)) ++pos;
      emit.to(pos);
      continue;
    }
    size_t nws = 0, last_newline_end = 0;
    while (s.space(pos + nws)) {
      if (newline(pos + nws)) last_newline_end = pos + nws + 1;
      ++nws;
    }
    if (last_newline_end > 0) {
      pos = last_newline_end;  // \s*[\r\n]+
    } else if (nws > 1 && s.in(pos + nws)) {
      pos += nws - 1;  // \s+(?!\S)
    } else if (nws > 0) {
      pos += nws;  // \s+
    } else {
      pos += 1;
    }
    emit.to(pos);
  }
}

// A regex that matches runs at given positions: matches and the gaps between them become
// segments (std::regex_iterator over the segment, as llama.cpp's fallback path).
template <class Match>
void split_matches(size_t ini, size_t end, Lens& out, Match match) {
  size_t start = ini, pos = ini;
  while (pos < end) {
    const size_t n = match(pos, end);
    if (n == 0) {
      ++pos;
      continue;
    }
    if (pos > start) out.push_back(static_cast<uint32_t>(pos - start));
    out.push_back(static_cast<uint32_t>(n));
    pos += n;
    start = pos;
  }
  if (start < end) out.push_back(static_cast<uint32_t>(end - start));
}

// [\p{P}\$\+<=>\^~\|] with llama.cpp's collapsed \p{P}: ASCII punctuation as listed there,
// other code points by category (non-ASCII whitespace never counts).
bool default_punct(const Cpts& c, size_t p) {
  const uint32_t x = c.cpt[p];
  if (x < 128) {
    return (x >= 0x21 && x <= 0x23) || (x >= 0x25 && x <= 0x2A) || (x >= 0x2C && x <= 0x2F) ||
           x == 0x3A || x == 0x3B || x == 0x3F || x == 0x40 || (x >= 0x5B && x <= 0x5D) || x == 0x5F ||
           x == 0x7B || x == 0x7D || x == '$' || x == '+' || x == '<' || x == '=' || x == '>' ||
           x == '^' || x == '~' || x == '|';
  }
  return !unicode::is_whitespace(c.cls[p]) && unicode::category_of(c.cls[p]) == unicode::kPunctuation;
}

bool number_at(const Cpts& c, size_t p) { return unicode::category_of(c.cls[p]) == unicode::kNumber; }

enum class Stage { gpt2, llama3, qwen2, number_single, number_run, default_punct, ascii_digits3 };

void run_stage(Stage st, const Cpts& c, size_t ini, size_t end, Lens& out) {
  switch (st) {
    case Stage::gpt2: return split_gpt2(c, ini, end, out);
    case Stage::llama3: return split_llama3(c, ini, end, out, 3);
    case Stage::qwen2: return split_llama3(c, ini, end, out, 1);
    case Stage::number_single:
      return split_matches(ini, end, out, [&](size_t p, size_t) -> size_t { return number_at(c, p) ? 1 : 0; });
    case Stage::number_run:
      return split_matches(ini, end, out, [&](size_t p, size_t e) -> size_t {
        size_t q = p;
        while (q < e && number_at(c, q)) ++q;
        return q - p;
      });
    case Stage::default_punct:
      return split_matches(ini, end, out, [&](size_t p, size_t e) -> size_t {
        size_t q = p;
        while (q < e && default_punct(c, q)) ++q;
        return q - p;
      });
    case Stage::ascii_digits3:
      return split_matches(ini, end, out, [&](size_t p, size_t e) -> size_t {
        const auto digit = [&](size_t q) { return q < e && c.cpt[q] >= '0' && c.cpt[q] <= '9'; };
        return digit(p) && digit(p + 1) && digit(p + 2) ? 3 : 0;
      });
  }
}

struct StageList {
  std::array<Stage, 4> stages;
  size_t count;
};

StageList stages_of(PreTokenizerKind k) {
  switch (k) {
    case PreTokenizerKind::gpt2: return {{Stage::gpt2}, 1};
    case PreTokenizerKind::smollm: return {{Stage::number_single, Stage::gpt2}, 2};
    case PreTokenizerKind::qwen2: return {{Stage::qwen2}, 1};
    case PreTokenizerKind::llama3: return {{Stage::llama3}, 1};
    case PreTokenizerKind::bpe_default:
      return {{Stage::default_punct, Stage::gpt2, Stage::number_run, Stage::ascii_digits3}, 4};
  }
  return {{Stage::gpt2}, 1};
}

}  // namespace

std::optional<PreTokenizerInfo> pretokenizer_for(std::string_view name) {
  using K = PreTokenizerKind;
  const auto any = [&](std::initializer_list<std::string_view> names) {
    for (auto n : names) {
      if (name == n) return true;
    }
    return false;
  };
  if (name.empty() || name == "default") return PreTokenizerInfo{K::bpe_default};
  if (any({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})) {
    return PreTokenizerInfo{K::llama3, true, true};
  }
  if (any({"dbrx", "smaug-bpe"})) return PreTokenizerInfo{K::llama3};
  if (any({"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "exaone4"})) return PreTokenizerInfo{K::gpt2};
  if (any({"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"})) {
    return PreTokenizerInfo{K::smollm};
  }
  if (any({"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"})) return PreTokenizerInfo{K::qwen2};
  return std::nullopt;
}

void pretokenize(PreTokenizerKind kind, std::string_view text, std::string& norm,
                 std::vector<uint32_t>& word_ends) {
  Cpts c;
  c.cpt.reserve(text.size());
  for (size_t off = 0; off < text.size();) c.cpt.push_back(unicode::decode_lenient(text, off));
  c.cls.resize(c.cpt.size());
  for (size_t i = 0; i < c.cpt.size(); ++i) c.cls[i] = unicode::cpt_class(c.cpt[i]);

  Lens segs{static_cast<uint32_t>(c.cpt.size())}, next;
  const StageList list = stages_of(kind);
  for (size_t i = 0; i < list.count; ++i) {
    next.clear();
    size_t start = 0;
    for (uint32_t len : segs) {
      run_stage(list.stages[i], c, start, start + len, next);
      start += len;
    }
    segs.swap(next);
  }

  norm.clear();
  norm.reserve(text.size());
  word_ends.clear();
  size_t p = 0;
  for (uint32_t len : segs) {
    for (size_t e = p + len; p < e; ++p) unicode::append_utf8(norm, c.cpt[p]);
    word_ends.push_back(static_cast<uint32_t>(norm.size()));
  }
}

}  // namespace llmsvc
