// SPDX-License-Identifier: Apache-2.0
// Measures this device's switch costs (policy/planning/switch_cost.h) for the swap-recompute planner:
// recompute time of n tokens over a context of m positions (Forward::recompute), and cold
// reads of layers of chunk files (SwapStore over SwapIo), each fitted by least squares to
// the linear models. What `llmsvc profile` runs.
#pragma once

#include <string>
#include <vector>

#include "base/safe_dir.h"
#include "base/status.h"
#include "policy/planning/switch_cost.h"
#include "runtime/core/graph/profile_fit.h"
#include "runtime/core/model/model.h"

namespace llmsvc {


struct SwitchProfile {
  policy::SwitchCost cost;
  std::vector<ProfileSample> samples;
};

// scratch: a directory on the storage that swap files will live on (the state root); the
// profiler writes chunk files in its "switch-profile.tmp/" and removes them, reaching them
// beneath it (no link followed). reps: repetitions per point.
Result<SwitchProfile> profile_switch_cost(const Model& model, hal::Device& device, const fileio::SafeDir& scratch,
                                          int reps = 3);

}  // namespace llmsvc
