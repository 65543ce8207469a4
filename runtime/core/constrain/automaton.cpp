// SPDX-License-Identifier: Apache-2.0
#include "runtime/core/constrain/automaton.h"

#include <algorithm>

namespace llmsvc::constrain {
namespace {

constexpr uint32_t kNone = UINT32_MAX;

uint64_t hash_ids(std::span<const uint32_t> ids) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ ids.size();
  for (uint32_t v : ids) {
    h ^= v;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  return h;
}

}  // namespace

Automaton::Automaton(std::shared_ptr<const Grammar> grammar, AutomatonLimits limits)
    : g_(std::move(grammar)), limits_(limits) {
  reset_pools();
}

void Automaton::reset_pools() {
  nodes_.clear();
  nodes_.push_back({kNone, kNone, 0});  // kAccept
  nodes_.push_back({kNone, kNone, 0});  // kBottom
  node_ids_.clear();
  norm_off_.assign(2, kNone);
  norm_len_.assign(2, 0);
  norm_data_.clear();
  set_off_.assign({0, 0});  // set 0: the empty set
  set_data_.clear();
  set_ids_.clear();
  set_ids_.emplace(hash_ids({}), kReject);
  steps_.clear();
  stamp_.assign(2, 0);
  initial_ = kNone;
}

uint32_t Automaton::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} + 1) << 32 | parent;
  const uint32_t found = node_ids_.find(key);
  if (found != FlatMap64::kMissing) return found;
  const uint32_t depth = nodes_[parent].depth + 1;
  if (depth > limits_.max_depth || nodes_.size() >= limits_.hard_nodes) {
    overflowed_ = true;
    return kNone;
  }
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back({pos, parent, depth});
  norm_off_.push_back(kNone);
  norm_len_.push_back(0);
  stamp_.push_back(0);
  node_ids_.put(key, id);
  return id;
}

void Automaton::normalize(uint32_t stack, std::vector<uint32_t>& out) {
  if (stack <= kBottom || g_->elems[nodes_[stack].pos].kind == Element::kBytes) {
    out.push_back(stack);
    return;
  }
  if (norm_off_[stack] == kNone) {
    // Worklist rather than recursion: a chain of tail calls through thousands of rules must
    // not overflow the C++ stack. Each stack is expanded once per normalization (stamps).
    ++epoch_;
    if (epoch_ == 0) {  // wrapped: forget old stamps
      std::fill(stamp_.begin(), stamp_.end(), 0);
      epoch_ = 1;
    }
    const size_t first = norm_data_.size();
    work_.assign(1, stack);
    uint32_t steps = 0;
    while (!work_.empty()) {
      const uint32_t x = work_.back();
      work_.pop_back();
      if (stamp_[x] == epoch_) continue;
      stamp_[x] = epoch_;
      if (++steps > limits_.max_expand) {
        overflowed_ = true;
        break;
      }
      if (x <= kBottom) {
        norm_data_.push_back(x);
        continue;
      }
      const Node n = nodes_[x];
      const Element& e = g_->elems[n.pos];
      if (e.kind == Element::kBytes) {
        norm_data_.push_back(x);
      } else if (e.kind == Element::kEnd) {
        work_.push_back(n.parent);  // the alternative is done: return to the caller
      } else {
        // A reference: push the return position unless it is the alternative's end (tail call).
        uint32_t cont = n.parent;
        if (g_->elems[n.pos + 1].kind != Element::kEnd) cont = intern(n.pos + 1, n.parent);
        if (cont == kNone) continue;
        for (uint32_t alt : g_->alts[e.arg]) {
          const uint32_t s = intern(alt, cont);
          if (s != kNone) work_.push_back(s);
        }
      }
    }
    std::sort(norm_data_.begin() + static_cast<ptrdiff_t>(first), norm_data_.end());
    norm_off_[stack] = static_cast<uint32_t>(first);
    norm_len_[stack] = static_cast<uint32_t>(norm_data_.size() - first);
  }
  const uint32_t off = norm_off_[stack];
  out.insert(out.end(), norm_data_.begin() + off, norm_data_.begin() + off + norm_len_[stack]);
}

uint32_t Automaton::make_set(std::vector<uint32_t> stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > limits_.max_stacks) {
    overflowed_ = true;
    stacks.resize(limits_.max_stacks);
  }
  const uint64_t h = hash_ids(stacks);
  auto [lo, hi] = set_ids_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    const auto have = this->stacks(it->second);
    if (std::equal(have.begin(), have.end(), stacks.begin(), stacks.end())) return it->second;
  }
  const uint32_t id = static_cast<uint32_t>(set_off_.size() - 1);
  set_data_.insert(set_data_.end(), stacks.begin(), stacks.end());
  set_off_.push_back(static_cast<uint32_t>(set_data_.size()));
  set_ids_.emplace(h, id);
  return id;
}

uint32_t Automaton::make_stack(std::span<const uint32_t> positions, uint32_t base) {
  uint32_t s = base;
  for (uint32_t p : positions) {
    s = intern(p, s);
    if (s == kNone) return kNone;
  }
  return s;
}

uint32_t Automaton::initial() {
  if (initial_ == kNone) {
    std::vector<uint32_t> out;
    for (uint32_t alt : g_->alts[g_->root]) {
      const uint32_t s = intern(alt, kAccept);
      if (s != kNone) normalize(s, out);
    }
    initial_ = make_set(std::move(out));
  }
  return initial_;
}

uint32_t Automaton::step(uint32_t set, uint8_t byte) {
  if (set == kReject) return kReject;
  const uint64_t key = uint64_t{set} << 8 | byte;
  const uint32_t memo = steps_.find(key);
  if (memo != FlatMap64::kMissing) return memo;
  scratch_.clear();
  // Index loop: normalize() may grow the pools that stacks(set) points into.
  const uint32_t begin = set_off_[set], end = set_off_[set + 1];
  for (uint32_t i = begin; i < end; ++i) {
    const uint32_t s = set_data_[i];
    if (s <= kBottom) continue;
    const Node n = nodes_[s];
    if (!g_->bytes_at(n.pos).test(byte)) continue;
    const uint32_t next = intern(n.pos + 1, n.parent);
    if (next != kNone) normalize(next, scratch_);
  }
  std::vector<uint32_t> found;
  found.swap(scratch_);
  const uint32_t id = found.empty() ? kReject : make_set(std::move(found));
  steps_.put(key, id);
  return id;
}

uint32_t Automaton::advance(uint32_t set, std::string_view bytes) {
  for (unsigned char c : bytes) {
    set = step(set, c);
    if (set == kReject) break;
  }
  return set;
}

bool Automaton::accepting(uint32_t set) const {
  const auto s = stacks(set);
  return !s.empty() && s.front() == kAccept;  // sorted: kAccept (0) comes first
}

bool Automaton::has_bottom(uint32_t set) const {
  const auto s = stacks(set);
  return std::binary_search(s.begin(), s.end(), kBottom);
}

uint32_t Automaton::compact(uint32_t set) {
  // Each live stack as its positions (bottom first) and base, re-interned in fresh pools.
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> keep;
  for (uint32_t s : stacks(set)) {
    std::vector<uint32_t> pos;
    uint32_t x = s;
    while (x > kBottom) {
      pos.push_back(nodes_[x].pos);
      x = nodes_[x].parent;
    }
    std::reverse(pos.begin(), pos.end());
    keep.emplace_back(x, std::move(pos));
  }
  reset_pools();
  ++generation_;
  std::vector<uint32_t> ids;
  for (const auto& [base, pos] : keep) {
    const uint32_t s = make_stack(pos, base);
    if (s != kNone) ids.push_back(s);
  }
  return ids.empty() ? kReject : make_set(std::move(ids));
}

size_t Automaton::memory_bytes() const {
  return nodes_.capacity() * sizeof(Node) + node_ids_.memory_bytes() +
         (norm_off_.capacity() + norm_len_.capacity() + norm_data_.capacity() + set_off_.capacity() +
          set_data_.capacity() + stamp_.capacity()) * sizeof(uint32_t) +
         set_ids_.size() * 32 + steps_.memory_bytes();
}

}  // namespace llmsvc::constrain
