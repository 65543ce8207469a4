// SPDX-License-Identifier: Apache-2.0
// Grammar: the byte-level context-free grammar every constraint compiles to.
//
// Both front ends (the GBNF parser and the JSON Schema compiler, which emits GBNF) produce
// this one form, so there is one automaton engine. Terminals are sets of bytes: a Unicode
// character class is expanded to alternatives of UTF-8 byte-range sequences when built, so
// matching never decodes UTF-8. Quantifiers are desugared into helper rules (x* is the
// right-recursive `R ::= x R | ()`, which the matcher runs in constant stack depth).
//
// Layout: `elems` holds every alternative of every rule as a run of elements ending in kEnd;
// a position (index into `elems`) names "the next thing to match" and is what the matcher
// keeps on its stacks. A Grammar is immutable once validated and may be shared by threads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace llmsvc::constrain {

// Bounds on what a grammar may hold (a client sends it; the daemon must stay bounded).
struct GrammarLimits {
  uint32_t max_rules = 50000;
  uint32_t max_elements = 1u << 20;
  uint32_t max_repeat = 1000;  // m and n of x{m,n}
};

// A set of bytes (256 bits).
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool test(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum Kind : uint8_t { kEnd, kBytes, kRef };
  Kind kind = kEnd;
  uint32_t arg = 0;  // kBytes: index into byte_sets; kRef: rule id
};

struct Grammar {
  std::vector<Element> elems;
  std::vector<ByteSet> byte_sets;
  std::vector<std::vector<uint32_t>> alts;  // per rule: the position of each alternative's first element
  std::vector<std::string> names;           // per rule
  uint32_t root = 0;

  const ByteSet& bytes_at(uint32_t pos) const { return byte_sets[elems[pos].arg]; }
};

// Builds a Grammar rule by rule. Rules may be referenced before they are defined.
class GrammarBuilder {
 public:
  explicit GrammarBuilder(GrammarLimits limits = {}) : limits_(limits) {}

  // Id of the rule named `name`, created (undefined) on first use.
  uint32_t rule(std::string_view name);
  // A fresh helper rule named after `base` (quantifiers, groups, character classes).
  uint32_t fresh_rule(std::string_view base);

  // One alternative under construction: a sequence of items.
  struct Seq {
    std::vector<Element> items;
    std::vector<ByteSet> sets;  // parallel to items (kBytes entries only)
  };
  static void add_bytes(Seq& seq, const ByteSet& set);
  static void add_literal(Seq& seq, std::string_view bytes);
  static void add_ref(Seq& seq, uint32_t rule);

  // Appends alternatives to `rule` (a rule may be defined once: false when it already was).
  bool define(uint32_t rule, std::vector<Seq> alternatives);
  bool defined(uint32_t rule) const { return rule < defined_.size() && defined_[rule]; }
  uint32_t n_rules() const { return static_cast<uint32_t>(names_.size()); }

  // Helpers for quantified items: `item` is one element (a terminal or a rule reference).
  // Returns a rule matching item{min,max} (max < 0: unbounded).
  Result<uint32_t> repeat(const Seq& item, uint32_t min, int64_t max, std::string_view base);
  // An item matching one code point of the (inclusive) ranges as UTF-8: one terminal when
  // every code point is ASCII, else a reference to a helper rule of byte-range sequences.
  Seq char_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, std::string_view base);

  // Validates (every rule defined, no left recursion, every rule can complete, limits)
  // and lays the grammar out. `root_name` names the start rule.
  Result<Grammar> finish(std::string_view root_name);

 private:
  Status check_size() const;

  GrammarLimits limits_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;  // named (not helper) rules
  std::vector<std::vector<Seq>> bodies_;
  std::vector<bool> defined_;
  uint64_t n_elements_ = 0;
  uint32_t fresh_ = 0;
};

}  // namespace llmsvc::constrain
