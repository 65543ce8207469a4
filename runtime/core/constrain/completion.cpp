// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/constrain/completion.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace llmsvc::constrain {

CompletionDistance::CompletionDistance(const Grammar& g) {
  constexpr uint64_t kInf = UINT64_MAX / 4;
  const size_t n = g.alts.size();
  // Each alternative: its terminal count and how many references are still unresolved.
  struct Use {
    uint32_t rule, alt;
  };
  std::vector<std::vector<Use>> users(n);
  std::vector<std::vector<uint64_t>> sum(n);
  std::vector<std::vector<uint32_t>> left(n);
  std::vector<uint64_t> best(n, kInf), len(n, kInf);
  using Item = std::pair<uint64_t, uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  for (size_t r = 0; r < n; ++r) {
    for (size_t a = 0; a < g.alts[r].size(); ++a) {
      uint64_t terminals = 0;
      uint32_t refs = 0;
      for (uint32_t p = g.alts[r][a]; g.elems[p].kind != Element::kEnd; ++p) {
        if (g.elems[p].kind == Element::kBytes) {
          ++terminals;
        } else {
          ++refs;
          users[g.elems[p].arg].push_back({static_cast<uint32_t>(r), static_cast<uint32_t>(a)});
        }
      }
      sum[r].push_back(terminals);
      left[r].push_back(refs);
      if (refs == 0 && terminals < best[r]) {
        best[r] = terminals;
        heap.emplace(terminals, static_cast<uint32_t>(r));
      }
    }
  }
  while (!heap.empty()) {
    const auto [l, r] = heap.top();
    heap.pop();
    if (len[r] != kInf) continue;
    len[r] = l;
    for (const Use& u : users[r]) {
      sum[u.rule][u.alt] += l;
      if (--left[u.rule][u.alt] == 0 && sum[u.rule][u.alt] < best[u.rule] && len[u.rule] == kInf) {
        best[u.rule] = sum[u.rule][u.alt];
        heap.emplace(best[u.rule], u.rule);
      }
    }
  }
  // Positions, from each alternative's end backwards.
  rest_.assign(g.elems.size(), 0);
  for (size_t p = g.elems.size(); p-- > 0;) {
    const Element& e = g.elems[p];
    if (e.kind == Element::kEnd) continue;
    const uint64_t own = e.kind == Element::kBytes ? 1 : len[e.arg];
    rest_[p] = std::min(kInf, own + rest_[p + 1]);
  }
}

uint64_t CompletionDistance::of_state(const Automaton& a, uint32_t set) {
  if (a.generation() != generation_) {
    generation_ = a.generation();
    memo_.clear();
  }
  if (set < memo_.size() && memo_[set] != UINT64_MAX) return memo_[set];
  uint64_t best = UINT64_MAX;
  for (uint32_t s : a.stacks(set)) {
    uint64_t d = 0;
    // kBottom never occurs in a matcher's own states; count it as nothing left.
    for (uint32_t x = s; x > Automaton::kBottom; x = a.below(x)) d += rest_[a.top(x)];
    best = std::min(best, d);
  }
  if (set >= memo_.size()) memo_.resize(set + 1, UINT64_MAX);
  memo_[set] = best;
  return best;
}

}  // namespace llmsvc::constrain
