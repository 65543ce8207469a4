// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/constrain/grammar.h"

#include <map>

#include "runtime/core/constrain/utf8_ranges.h"

namespace llmsvc::constrain {
namespace {

Status grammar_error(std::string msg) { return {Code::invalid_argument, "grammar: " + std::move(msg)}; }

}  // namespace

uint32_t GrammarBuilder::rule(std::string_view name) {
  auto [it, added] = ids_.try_emplace(std::string(name), static_cast<uint32_t>(names_.size()));
  if (!added) return it->second;
  names_.emplace_back(name);
  bodies_.emplace_back();
  defined_.push_back(false);
  return static_cast<uint32_t>(names_.size() - 1);
}

uint32_t GrammarBuilder::fresh_rule(std::string_view base) {
  // Helper names contain '#', which GBNF names cannot, so they never collide with user rules.
  names_.push_back(std::string(base) + "#" + std::to_string(fresh_++));
  bodies_.emplace_back();
  defined_.push_back(false);
  return static_cast<uint32_t>(names_.size() - 1);
}

void GrammarBuilder::add_bytes(Seq& seq, const ByteSet& set) {
  seq.items.push_back({Element::kBytes, static_cast<uint32_t>(seq.sets.size())});
  seq.sets.push_back(set);
}

void GrammarBuilder::add_literal(Seq& seq, std::string_view bytes) {
  for (unsigned char c : bytes) {
    ByteSet s;
    s.set(c);
    add_bytes(seq, s);
  }
}

void GrammarBuilder::add_ref(Seq& seq, uint32_t rule) { seq.items.push_back({Element::kRef, rule}); }

bool GrammarBuilder::define(uint32_t rule, std::vector<Seq> alternatives) {
  if (defined_[rule]) return false;
  defined_[rule] = true;
  for (const auto& a : alternatives) n_elements_ += a.items.size() + 1;
  bodies_[rule] = std::move(alternatives);
  return true;
}

Result<uint32_t> GrammarBuilder::repeat(const Seq& item, uint32_t min, int64_t max, std::string_view base) {
  if (min > limits_.max_repeat || max > int64_t{limits_.max_repeat})
    return grammar_error("repetition count above " + std::to_string(limits_.max_repeat));
  if (max >= 0 && max < min) return grammar_error("repetition {m,n} with n < m");
  // The tail after the min copies: x* (right recursive) or a chain of nested optionals
  // opt_k ::= x opt_{k-1} | () so x{0,n} needs n small rules and no ambiguity.
  uint32_t tail = 0;
  bool has_tail = true;
  if (max < 0) {
    tail = fresh_rule(base);
    Seq loop = item;
    add_ref(loop, tail);
    define(tail, {loop, Seq{}});
  } else if (max > min) {
    uint32_t prev = 0;
    for (int64_t k = 0; k < max - min; ++k) {
      const uint32_t r = fresh_rule(base);
      Seq one = item;
      if (k > 0) add_ref(one, prev);
      define(r, {one, Seq{}});
      prev = r;
    }
    tail = prev;
  } else {
    has_tail = false;
  }
  Seq body;
  for (uint32_t i = 0; i < min; ++i) {
    body.items.insert(body.items.end(), item.items.begin(), item.items.end());
    // Item-local set indices shift by the sets already in body.
    const uint32_t shift = static_cast<uint32_t>(body.sets.size());
    for (size_t j = body.items.size() - item.items.size(); j < body.items.size(); ++j)
      if (body.items[j].kind == Element::kBytes) body.items[j].arg += shift;
    body.sets.insert(body.sets.end(), item.sets.begin(), item.sets.end());
  }
  if (has_tail) add_ref(body, tail);
  const uint32_t r = fresh_rule(base);
  define(r, {body});
  LLMSVC_RETURN_IF_ERROR(check_size());
  return r;
}

GrammarBuilder::Seq GrammarBuilder::char_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges,
                                               std::string_view base) {
  const auto seqs = utf8_sequences(ranges);
  Seq out;
  bool ascii = true;
  for (const auto& s : seqs) ascii = ascii && s.size() == 1;
  if (ascii) {
    ByteSet set;
    for (const auto& s : seqs) set.set_range(s[0].first, s[0].second);
    add_bytes(out, set);
    return out;
  }
  std::vector<Seq> alts;
  // Sequences of one byte merge into a single terminal: fewer alternatives, fewer stacks.
  ByteSet ascii_set;
  bool any_ascii = false;
  for (const auto& s : seqs) {
    if (s.size() == 1) {
      ascii_set.set_range(s[0].first, s[0].second);
      any_ascii = true;
      continue;
    }
    Seq a;
    for (auto [lo, hi] : s) {
      ByteSet set;
      set.set_range(lo, hi);
      add_bytes(a, set);
    }
    alts.push_back(std::move(a));
  }
  if (any_ascii) {
    Seq a;
    add_bytes(a, ascii_set);
    alts.insert(alts.begin(), std::move(a));
  }
  const uint32_t r = fresh_rule(base);
  define(r, std::move(alts));
  add_ref(out, r);
  return out;
}

Status GrammarBuilder::check_size() const {
  if (names_.size() > limits_.max_rules) return grammar_error("more than " + std::to_string(limits_.max_rules) + " rules");
  if (n_elements_ > limits_.max_elements)
    return grammar_error("more than " + std::to_string(limits_.max_elements) + " elements");
  return Status::Ok();
}

Result<Grammar> GrammarBuilder::finish(std::string_view root_name) {
  LLMSVC_RETURN_IF_ERROR(check_size());
  const auto root_it = ids_.find(std::string(root_name));
  const uint32_t root = root_it == ids_.end() ? 0 : root_it->second;
  if (root_it == ids_.end() || !defined_[root]) return grammar_error("no rule '" + std::string(root_name) + "'");
  const size_t n = names_.size();
  for (size_t r = 0; r < n; ++r)
    if (!defined_[r]) return grammar_error("rule '" + names_[r] + "' is used but not defined");

  // Nullable and productive rules: worklists over per-alternative counters of the items not
  // yet known nullable / productive (linear; a naive fixpoint is quadratic on rule chains).
  struct Use {
    uint32_t rule, alt;
  };
  std::vector<std::vector<Use>> users(n);
  std::vector<std::vector<uint32_t>> prod_left(n), null_left(n);
  constexpr uint32_t kNever = UINT32_MAX;
  std::vector<bool> nullable(n, false), productive(n, false);
  std::vector<uint32_t> prod_queue, null_queue;
  for (size_t r = 0; r < n; ++r) {
    for (size_t a = 0; a < bodies_[r].size(); ++a) {
      uint32_t refs = 0;
      bool terminal = false;
      for (const auto& e : bodies_[r][a].items) {
        if (e.kind == Element::kRef) {
          ++refs;
          users[e.arg].push_back({static_cast<uint32_t>(r), static_cast<uint32_t>(a)});
        } else {
          terminal = true;
        }
      }
      prod_left[r].push_back(refs);
      null_left[r].push_back(terminal ? kNever : refs);
      if (refs == 0 && !productive[r]) { productive[r] = true; prod_queue.push_back(static_cast<uint32_t>(r)); }
      if (!terminal && refs == 0 && !nullable[r]) { nullable[r] = true; null_queue.push_back(static_cast<uint32_t>(r)); }
    }
  }
  while (!prod_queue.empty()) {
    const uint32_t r = prod_queue.back();
    prod_queue.pop_back();
    for (const Use& u : users[r]) {
      if (--prod_left[u.rule][u.alt] == 0 && !productive[u.rule]) {
        productive[u.rule] = true;
        prod_queue.push_back(u.rule);
      }
    }
  }
  while (!null_queue.empty()) {
    const uint32_t r = null_queue.back();
    null_queue.pop_back();
    for (const Use& u : users[r]) {
      if (null_left[u.rule][u.alt] != kNever && --null_left[u.rule][u.alt] == 0 && !nullable[u.rule]) {
        nullable[u.rule] = true;
        null_queue.push_back(u.rule);
      }
    }
  }
  for (size_t r = 0; r < n; ++r)
    if (!productive[r]) return grammar_error("rule '" + names_[r] + "' can never complete (no finite derivation)");

  // Left recursion: a rule reachable from itself through left corners (references preceded
  // only by nullable items) would make the matcher's expansion loop forever.
  // Iterative depth-first search (a chain of 50,000 rules must not overflow the stack).
  std::vector<uint8_t> mark(n, 0);  // 0 new, 1 on the path, 2 done
  struct Frame { size_t rule, alt, item; };
  for (size_t start = 0; start < n; ++start) {
    if (mark[start]) continue;
    std::vector<Frame> path{{start, 0, 0}};
    mark[start] = 1;
    while (!path.empty()) {
      Frame& f = path.back();
      const auto& alts = bodies_[f.rule];
      if (f.alt >= alts.size()) {
        mark[f.rule] = 2;
        path.pop_back();
        continue;
      }
      const auto& items = alts[f.alt].items;
      // The next left corner of this alternative, if the items before it are all nullable.
      if (f.item >= items.size() || items[f.item].kind != Element::kRef ||
          (f.item > 0 && !nullable[items[f.item - 1].arg])) {
        ++f.alt;
        f.item = 0;
        continue;
      }
      const uint32_t next = items[f.item++].arg;
      if (mark[next] == 1) return grammar_error("rule '" + names_[next] + "' is left-recursive");
      if (mark[next] == 0) {
        mark[next] = 1;
        path.push_back({next, 0, 0});
      }
    }
  }

  Grammar g;
  g.root = root;
  g.names = names_;
  g.alts.resize(n);
  std::map<std::array<uint64_t, 4>, uint32_t> set_ids;
  g.elems.reserve(n_elements_);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& a : bodies_[r]) {
      g.alts[r].push_back(static_cast<uint32_t>(g.elems.size()));
      for (const auto& e : a.items) {
        if (e.kind == Element::kRef) {
          g.elems.push_back(e);
          continue;
        }
        auto [it, added] = set_ids.try_emplace(a.sets[e.arg].bits, static_cast<uint32_t>(g.byte_sets.size()));
        if (added) g.byte_sets.push_back(a.sets[e.arg]);
        g.elems.push_back({Element::kBytes, it->second});
      }
      g.elems.push_back({Element::kEnd, 0});
    }
    if (g.alts[r].empty()) return grammar_error("rule '" + names_[r] + "' has no alternatives");
  }
  return g;
}

}  // namespace llmsvc::constrain
