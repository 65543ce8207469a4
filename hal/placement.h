// SPDX-License-Identifier: Apache-2.0
// Placement: which device runs each op of a graph, and the transfers that follow from it.
//
// Each op goes to the device the embedder's rule names for its kind or its layer, else to the
// device with the lowest estimate (its compute, from Op::work and the device's throughput, plus
// moving the inputs it lacks); a device that cannot run an op (its capabilities, or the
// `can_run` test for weight types) never gets it: the first device that can does (the CPU,
// last in every list, runs everything). Then each tensor read in a memory space that lacks its
// current contents gets a copy there (a `copy` op on the reading device's queue), so every
// physical tensor lives in one space. Bound tensors (token ids, positions, logits) are host
// memory, read and written in place by host-visible devices and staged by the others
// (hal::Device::begin / end).
#pragma once

#include <array>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "hal/device.h"
#include "hal/graph.h"

namespace llmsvc::hal {

struct PlacementRule {
  std::vector<int> layer_device;                  // per layer: a device index, or -1 (absent: none)
  std::array<int, kOpKinds> kind_device = fill(); // per op kind: a device index, or -1; wins over the layer's
  static std::array<int, kOpKinds> fill() {
    std::array<int, kOpKinds> a;
    a.fill(-1);
    return a;
  }
};

struct PlacedGraph {
  Graph graph;                 // ops with devices, copies inserted; tensors with spaces
  std::vector<int> device_space;  // per device: its space index
  int n_spaces = 0;
  int copies = 0;              // copy ops inserted
};

// Extra test for op on device (its weights' types); null: the capabilities decide alone.
using CanRun = std::function<bool(const Op& op, const Device& device)>;

// Code::unsupported when some op has no device, or a device that is not host-visible would
// touch a bound tensor (transfers of bound tensors come with the first such device).
Result<PlacedGraph> place(const Graph& logical, std::span<Device* const> devices, const PlacementRule& rule,
                          const CanRun& can_run = {});

// A rule from a spec: "" (auto), "layers:N" (layers below N on device 0, the rest on device 1),
// "ops:KIND[+KIND...]" (those op kinds on device 1, the rest on device 0).
Result<PlacementRule> parse_placement(std::string_view spec, int n_layer, int n_devices);

}  // namespace llmsvc::hal
