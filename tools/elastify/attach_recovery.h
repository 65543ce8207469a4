// SPDX-License-Identifier: Apache-2.0
// Stores recovery adapters in an elastic model: LoRA adapters trained for its levels
// (tools/elastify/torch/train_recovery.py, each naming its level in llmsvc.recovery.level_percent)
// become tensors "rcv.<percent>.<tensor>" and the keys llmsvc.elastic.recovery / recovery_alpha
// (runtime/core/model/elastic_spec.h), so one file runs every level with its recovery.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace llmsvc::elastify {

struct AttachOptions {
  std::string input;                  // an elastic model (llmsvc elastify's output)
  std::string output;                 // the model with the adapters stored (may be `input`)
  std::vector<std::string> adapters;  // one per level, at most one per level
};

struct AttachReport {
  std::vector<int> levels;   // the levels with a recovery adapter in the output, ascending
  uint64_t adapter_bytes = 0;
};

// Each adapter is checked against the model as any adapter is (LoraAdapter::load) and must name
// one of its levels below the full one, each level once. Recovery adapters the input already has
// are kept unless an adapter replaces its level's. The output is loaded back and each level's
// recovery adapter found before it returns.
Result<AttachReport> attach_recovery(const AttachOptions& options);

}  // namespace llmsvc::elastify
