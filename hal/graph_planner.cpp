// SPDX-License-Identifier: Apache-2.0
// Liveness intervals, then first fit of each tensor into the lowest gap its interval allows.
#include "hal/graph_planner.h"

#include <algorithm>

namespace llmsvc::hal {

ActivationPlan plan_activations(const Graph& g, const Shape& max_shape, int n_spaces) {
  const size_t n = g.tensors.size();
  std::vector<int> first(n, -1), last(n, -1);
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    const Op& op = g.ops[i];
    auto touch = [&](int32_t t) {
      if (t < 0) return;
      if (first[t] < 0) first[t] = i;
      last[t] = i;  // inclusive: a tensor read by op i never shares memory with one op i writes
    };
    for (int32_t t : op.in) touch(t);
    for (int32_t t : op.out) touch(t);
  }
  ActivationPlan plan;
  plan.offset.assign(n, -1);
  plan.arena_bytes.assign(std::max(1, n_spaces), 0);
  std::vector<int32_t> order;
  for (size_t t = 0; t < n; ++t)
    if (g.tensors[t].role == TensorRole::activation && first[t] >= 0) order.push_back(static_cast<int32_t>(t));
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return first[a] < first[b]; });

  struct Placed {
    int64_t offset, bytes;
    int last;
  };
  std::vector<std::vector<Placed>> live(plan.arena_bytes.size());
  for (int32_t t : order) {
    const Tensor& tensor = g.tensors[t];
    const int64_t bytes = (tensor.bytes_at(max_shape) + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
    plan.naive_bytes += bytes;
    auto& in_space = live[tensor.space];
    std::erase_if(in_space, [&](const Placed& p) { return p.last < first[t]; });
    std::sort(in_space.begin(), in_space.end(), [](const Placed& a, const Placed& b) { return a.offset < b.offset; });
    int64_t at = 0;
    for (const Placed& p : in_space) {
      if (p.offset - at >= bytes) break;
      at = std::max(at, p.offset + p.bytes);
    }
    in_space.push_back(Placed{at, bytes, last[t]});
    plan.offset[t] = at;
    plan.arena_bytes[tensor.space] = std::max<uint64_t>(plan.arena_bytes[tensor.space], at + bytes);
  }
  return plan;
}

}  // namespace llmsvc::hal
