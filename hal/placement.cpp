// SPDX-License-Identifier: Apache-2.0
// Placement: device choice per op, then copies where a tensor is read outside its space.
#include "hal/placement.h"

#include <charconv>
#include <limits>
#include <map>

namespace llmsvc::hal {
namespace {

bool can_place(const Op& op, const Device& d, const CanRun& can_run) {
  return d.runs(op.kind) && (!can_run || can_run(op, d));
}

// Seconds op would take on d: its work at one row (the decode step, which placement serves
// first) plus moving in what it reads from elsewhere.
double estimate(const Graph& g, const Op& op, int space, const std::vector<int>& where, const Device& d) {
  const Capabilities& c = d.caps();
  const double flops = c.matmul_gflops > 0 ? c.matmul_gflops * 1e9 : 50e9;
  double s = op.work / flops;
  for (int32_t t : op.in) {
    if (t < 0 || g.tensors[t].role != TensorRole::activation || where[t] < 0 || where[t] == space) continue;
    const double bytes = static_cast<double>(g.tensors[t].cols) * 4;
    s += c.transfer_gbps > 0 ? bytes / (c.transfer_gbps * 1e9) : bytes / 10e9;
  }
  return s;
}

}  // namespace

Result<PlacedGraph> place(const Graph& logical, std::span<Device* const> devices, const PlacementRule& rule,
                          const CanRun& can_run) {
  if (devices.empty()) return Status(Code::internal, "placement: no devices");
  PlacedGraph out;
  std::map<std::string, int> spaces;
  for (Device* d : devices) {
    auto [it, added] = spaces.emplace(d->memory().space(), static_cast<int>(spaces.size()));
    out.device_space.push_back(it->second);
  }
  out.n_spaces = static_cast<int>(spaces.size());
  const int n_dev = static_cast<int>(devices.size());

  Graph& g = out.graph;
  g.tensors = logical.tensors;
  // where[t]: the space holding logical tensor t's current contents (-1: not yet written);
  // copy_in[t][space]: its physical tensor there.
  std::vector<int> where(logical.tensors.size(), -1);
  std::vector<std::vector<int32_t>> copy_in(logical.tensors.size(), std::vector<int32_t>(out.n_spaces, kNoTensor));
  std::vector<std::vector<bool>> current(logical.tensors.size(), std::vector<bool>(out.n_spaces, false));

  for (const Op& lop : logical.ops) {
    // The device: the rule's, if it can; else the cheapest that can.
    int dev = lop.kind == OpKind::copy ? -1 : rule.kind_device[static_cast<int>(lop.kind)];
    if (dev < 0 && lop.layer >= 0 && lop.layer < static_cast<int>(rule.layer_device.size())) dev = rule.layer_device[lop.layer];
    if (dev >= n_dev || (dev >= 0 && !can_place(lop, *devices[dev], can_run))) dev = -1;
    if (dev < 0) {
      double best = std::numeric_limits<double>::infinity();
      for (int d = 0; d < n_dev; ++d) {
        if (!can_place(lop, *devices[d], can_run)) continue;
        const double e = estimate(logical, lop, out.device_space[d], where, *devices[d]);
        if (e < best) best = e, dev = d;
      }
    }
    if (dev < 0) {
      std::string what = "placement: no device here runs ";
      what += op_name(lop.kind);
      if (lop.layer >= 0) what.append(" of layer ").append(std::to_string(lop.layer));
      return Status(Code::unsupported, what);
    }
    const int space = out.device_space[dev];
    Op op = lop;
    op.device = dev;
    auto physical = [&](int32_t t) {
      if (copy_in[t][space] == kNoTensor) {
        if (where[t] < 0 || where[t] == space) {
          copy_in[t][space] = t;  // first written here: the logical tensor itself lives here
          g.tensors[t].space = space;
        } else {
          Tensor mirror = logical.tensors[t];
          mirror.name.append("@").append(std::to_string(space));
          mirror.space = space;
          mirror.logical = t;
          g.tensors.push_back(std::move(mirror));
          copy_in[t][space] = static_cast<int32_t>(g.tensors.size() - 1);
        }
      }
      return copy_in[t][space];
    };
    for (int32_t& t : op.in) {
      if (t < 0) continue;
      // Bound tensors (token ids, logits) are the caller's host memory: a device that cannot
      // reach it stages them itself (hal::Device::begin / end).
      if (logical.tensors[t].role != TensorRole::activation) continue;
      if (where[t] < 0) return Status(Code::internal, "placement: " + logical.tensors[t].name + " is read before it is written");
      const int32_t phys = physical(t);
      if (!current[t][space]) {
        Op copy;
        copy.kind = OpKind::copy;
        copy.layer = lop.layer;
        copy.rows = lop.rows;
        copy.in[0] = copy_in[t][where[t]];
        copy.out[0] = phys;
        copy.i[0] = where[t];  // the source space
        copy.device = dev;     // the reading device's queue moves it
        g.ops.push_back(copy);
        ++out.copies;
        current[t][space] = true;
      }
      t = phys;
    }
    for (int32_t& t : op.out) {
      if (t < 0) continue;
      if (logical.tensors[t].role != TensorRole::activation) continue;
      const int32_t logical_id = t;
      t = physical(logical_id);
      where[logical_id] = space;
      for (int s = 0; s < out.n_spaces; ++s) current[logical_id][s] = s == space;
    }
    g.ops.push_back(op);
  }
  return out;
}

Result<PlacementRule> parse_placement(std::string_view spec, int n_layer, int n_devices) {
  PlacementRule rule;
  if (spec.empty() || spec == "auto") return rule;
  auto bad = [&](const std::string& why) {
    return Status(Code::invalid_argument, "placement '" + std::string(spec.substr(0, 64)) + "': " + why);
  };
  if (n_devices < 2) return bad("it needs two devices");
  if (spec.starts_with("layers:")) {
    const std::string_view num = spec.substr(7);
    int split = -1;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), split);
    if (ec != std::errc() || p != num.data() + num.size() || split < 0 || split > n_layer)
      return bad("layers:N wants N from 0 to " + std::to_string(n_layer));
    rule.layer_device.resize(n_layer);
    for (int il = 0; il < n_layer; ++il) rule.layer_device[il] = il < split ? 0 : 1;
    return rule;
  }
  if (spec.starts_with("ops:")) {
    std::string_view rest = spec.substr(4);
    if (rest.empty()) return bad("ops: names no op kind");
    while (!rest.empty()) {
      const size_t plus = rest.find('+');
      const std::string_view name = rest.substr(0, plus);
      bool found = false;
      for (int k = 0; k < kOpKinds; ++k)
        if (op_name(static_cast<OpKind>(k)) == name && static_cast<OpKind>(k) != OpKind::copy) {
          rule.kind_device[k] = 1;
          found = true;
        }
      if (!found) return bad("no op kind '" + std::string(name.substr(0, 32)) + "'");
      rest = plus == std::string_view::npos ? std::string_view() : rest.substr(plus + 1);
    }
    for (int& d : rule.kind_device)
      if (d < 0) d = 0;
    rule.kind_device[static_cast<int>(OpKind::copy)] = -1;
    return rule;
  }
  return bad("expected auto, layers:N or ops:KIND[+KIND...]");
}

}  // namespace llmsvc::hal
