// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/constrain/constraint.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <limits>
#include <vector>

#include "runtime/core/constrain/gbnf.h"
#include "runtime/core/constrain/json_schema.h"

namespace llmsvc::constrain {
namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

}  // namespace

Result<CompiledGrammar> compile_gbnf(std::string_view grammar) {
  auto g = parse_gbnf(grammar);
  if (!g.ok()) return g.status();
  return CompiledGrammar(std::make_shared<const Grammar>(std::move(g).value()));
}

Result<CompiledGrammar> compile_json_schema(std::string_view schema) {
  auto text = json_schema_to_gbnf(schema);
  if (!text.ok()) return text.status();
  auto g = compile_gbnf(*text);
  // The schema compiler's own output failing to parse would be our bug; a schema whose
  // recursion never terminates fails here too ("rule ... can never complete").
  if (!g.ok()) return Status(g.status().code(), "json schema: " + g.status().message());
  return g;
}

Constraint::Constraint(Key, CompiledGrammar grammar, std::shared_ptr<const TokenVocab> vocab, MaskOptions options)
    : vocab_(vocab),
      automaton_(grammar),
      masker_(std::move(vocab), options),
      distance_(*grammar),
      budget_rows_limit_(options.max_cache_bytes / 4) {
  state_ = automaton_.initial();
}

Result<std::unique_ptr<Constraint>> Constraint::create(CompiledGrammar grammar, std::shared_ptr<const TokenVocab> vocab,
                                                       MaskOptions options) {
  if (!grammar || !vocab) return Status(Code::invalid_argument, "constraint: no grammar or vocabulary");
  auto c = std::make_unique<Constraint>(Key{}, std::move(grammar), std::move(vocab), options);
  if (c->state_ == Automaton::kReject)
    return Status(Code::invalid_argument, "constraint: the grammar's start exceeds the matcher's bounds");
  return c;
}

Result<std::unique_ptr<Constraint>> Constraint::from_json_schema(std::string_view schema,
                                                                 std::shared_ptr<const TokenVocab> vocab) {
  auto g = compile_json_schema(schema);
  if (!g.ok()) return g.status();
  return create(std::move(g).value(), std::move(vocab));
}

Result<std::unique_ptr<Constraint>> Constraint::from_grammar(std::string_view gbnf, std::shared_ptr<const TokenVocab> vocab) {
  auto g = compile_gbnf(gbnf);
  if (!g.ok()) return g.status();
  return create(std::move(g).value(), std::move(vocab));
}

const TokenMask& Constraint::allowed() {
  if (!mask_) {
    const uint64_t t0 = now_ns();
    if (ended_) {
      empty_.resize(vocab_->size());
      mask_ = &empty_;
    } else {
      mask_ = &masker_.compute(automaton_, state_);
      if (budget_ >= 0 && static_cast<uint64_t>(budget_) <= distance_.of_state(automaton_, state_) + kBudgetSlack)
        mask_ = &narrow_to_budget(*mask_);
    }
    ++stats_.masks;
    stats_.mask_ns += now_ns() - t0;
  }
  return *mask_;
}

const Constraint::BudgetRow& Constraint::budget_row(const TokenMask& base) {
  if (automaton_.generation() != budget_generation_) {  // state ids were renumbered
    budget_rows_.clear();
    budget_rows_bytes_ = 0;
    budget_generation_ = automaton_.generation();
  }
  if (auto it = budget_rows_.find(state_); it != budget_rows_.end()) return it->second;
  BudgetRow row;
  const auto& words = base.words();
  for (size_t w = 0; w < words.size(); ++w) {
    for (uint64_t bits = words[w]; bits; bits &= bits - 1) {
      const auto t = static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(bits)));
      if (vocab_->is_eog(t)) {
        row.eog = true;
        continue;
      }
      const uint32_t after = automaton_.advance(state_, vocab_->piece(t));
      const uint64_t d = after == Automaton::kReject ? UINT64_MAX : distance_.of_state(automaton_, after);
      row.by_distance.emplace_back(t, d);
      row.closest = std::min(row.closest, d);
    }
  }
  // The closest tokens go only when nothing but an end token is kept (narrow_to_budget), so
  // the row keeps the farther ones: inside a string almost every token is a closest one.
  std::erase_if(row.by_distance, [&](const auto& e) { return e.second == row.closest; });
  std::sort(row.by_distance.begin(), row.by_distance.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (row.by_distance.size() > static_cast<size_t>(base.size()) / 64) {  // masks are smaller
    TokenMask acc;
    acc.resize(base.size());
    for (size_t i = 0; i < row.by_distance.size(); ++i) {
      acc.set(row.by_distance[i].first);
      const bool last_at_d = i + 1 == row.by_distance.size() || row.by_distance[i + 1].second != row.by_distance[i].second;
      if (last_at_d) {
        row.distances.push_back(row.by_distance[i].second);
        row.at_or_beyond.push_back(acc);
      }
    }
    row.by_distance = {};
  }
  row.by_distance.shrink_to_fit();
  // Bounded like the masks' caches: past the bound the rows start over.
  const size_t bytes = row.bytes();
  if (budget_rows_bytes_ + bytes > budget_rows_limit_) {
    budget_rows_.clear();
    budget_rows_bytes_ = 0;
  }
  budget_rows_bytes_ += bytes;
  return budget_rows_.emplace(state_, std::move(row)).first->second;
}

size_t Constraint::BudgetRow::bytes() const {
  size_t n = sizeof(BudgetRow) + by_distance.capacity() * sizeof(by_distance[0]) + distances.capacity() * sizeof(uint64_t);
  for (const auto& m : at_or_beyond) n += m.words().size() * sizeof(uint64_t);
  return n + 64;  // the map's node
}

const TokenMask& Constraint::narrow_to_budget(const TokenMask& base) {
  // After t, budget_ - 1 tokens remain for the completion's bytes and the end token. When no
  // token fits (a budget below the byte bound), the ones closest to completion stay: the
  // mask is never emptied.
  const uint64_t fits = budget_ >= 2 ? static_cast<uint64_t>(budget_) - 2 : 0;
  const BudgetRow& row = budget_row(base);
  if (row.eog && row.closest > fits) {  // only ending fits: the end tokens alone
    budget_mask_.resize(base.size());
    for (int32_t t : vocab_->eog())
      if (base.test(t)) budget_mask_.set(t);
    return budget_mask_;
  }
  const uint64_t keep = std::max(fits, row.closest);
  budget_mask_ = base;
  for (const auto& [t, d] : row.by_distance) {
    if (d <= keep) break;  // farthest first: the rest are kept
    budget_mask_.reset(t);
  }
  // Mask form: the nearest distance still beyond `keep` names every token to drop.
  size_t i = 0;
  while (i < row.distances.size() && row.distances[i] > keep) ++i;
  if (i > 0) budget_mask_.clear_all_of(row.at_or_beyond[i - 1]);
  return budget_mask_;
}

void Constraint::set_budget(int tokens_left) {
  if (tokens_left != budget_) mask_ = nullptr;
  budget_ = tokens_left;
}

void Constraint::apply(std::span<float> logits) {
  const TokenMask& m = allowed();
  const auto& words = m.words();
  const size_t n = std::min(logits.size(), static_cast<size_t>(m.size()));
  for (size_t w = 0; w * 64 < n; ++w) {
    if (words[w] == ~uint64_t{0}) continue;  // all allowed
    const size_t end = std::min(n, w * 64 + 64);
    for (size_t i = w * 64; i < end; ++i)
      if (!((words[w] >> (i & 63)) & 1)) logits[i] = -std::numeric_limits<float>::infinity();
  }
  for (size_t i = n; i < logits.size(); ++i) logits[i] = -std::numeric_limits<float>::infinity();
}

Status Constraint::accept(int32_t token) {
  if (token < 0 || token >= vocab_->size())
    return Status(Code::invalid_argument, "constraint: token " + std::to_string(token) + " out of range");
  if (ended_) return Status(Code::invalid_argument, "constraint: the output already ended");
  if (vocab_->is_eog(token)) {
    if (!done()) return Status(Code::invalid_argument, "constraint: end of generation before the output is complete");
    ended_ = true;
    mask_ = nullptr;
    ++stats_.accepts;
    return Status::Ok();
  }
  const std::string& piece = vocab_->piece(token);
  if (piece.empty() || piece.size() > TokenVocab::kMaxPieceBytes)
    return Status(Code::invalid_argument, "constraint: token " + std::to_string(token) + " is not allowed here");
  Status s = accept_bytes(piece);
  if (!s.ok()) return Status(Code::invalid_argument, "constraint: token " + std::to_string(token) + " is not allowed here");
  return s;
}

Status Constraint::accept_bytes(std::string_view bytes) {
  if (ended_) return Status(Code::invalid_argument, "constraint: the output already ended");
  const uint64_t t0 = now_ns();
  const uint32_t next = automaton_.advance(state_, bytes);
  if (next == Automaton::kReject) return Status(Code::invalid_argument, "constraint: the text does not fit the grammar");
  state_ = next;
  // Between tokens is the one safe point to shrink the pools (no set id is held elsewhere).
  if (automaton_.needs_compaction()) state_ = automaton_.compact(state_);
  mask_ = nullptr;
  ++stats_.accepts;
  stats_.accept_ns += now_ns() - t0;
  return Status::Ok();
}

bool Constraint::done() const { return !ended_ && automaton_.accepting(state_); }

void Constraint::reset() {
  state_ = automaton_.initial();
  ended_ = false;
  mask_ = nullptr;
}

ConstraintStats Constraint::stats() const {
  ConstraintStats s = stats_;
  s.mask = masker_.stats();
  s.memory_bytes = automaton_.memory_bytes() + masker_.memory_bytes() + budget_rows_bytes_;
  return s;
}

}  // namespace llmsvc::constrain
