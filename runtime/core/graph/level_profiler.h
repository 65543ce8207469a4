// SPDX-License-Identifier: Apache-2.0
// The costs of an elastic model's levels (policy/planning/level_cost.h): measured on the
// model's device (what `llmsvc profile` writes as level-profile.json), or estimated from the
// weight bytes each level's matmuls read when there is no profile for the model.
#pragma once

#include <string>

#include "base/status.h"
#include "hal/device.h"
#include "policy/planning/level_cost.h"
#include "runtime/core/model/model.h"

namespace llmsvc {

// Per level: prefills of 16, 64 and 256 fresh tokens fitted to fixed + n * per-token by least
// squares, and the median decode step at context 64. `reps` rounds over every level
// (alternating order); each point is the full level's median times the median of the level's
// per-round ratios to it. A plain model has one level, the full one.
Result<policy::LevelCosts> profile_levels(const Model& model, hal::Device& device, int reps = 3);

// Without a profile: each level's costs as the full model's times the share of weight bytes
// it reads (decode streams the weights; prefill's work scales with them too). The full
// model's costs are unknown here, so they are relative: 1 ms per token, 1 ms per step.
policy::LevelCosts estimate_level_costs(const Model& model);

// The identity a profile is kept for (the model file's content hash, hex).
std::string level_profile_identity(const Model& model);

}  // namespace llmsvc
