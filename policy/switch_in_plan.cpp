// Switch-in planning: load what is swapped, recompute what is dropped.
#include "policy/switch_in_plan.h"

namespace llmsvc::policy {

SwitchInPlan plan_switch_in(std::span<const MissingChunk> missing, bool can_load) {
  SwitchInPlan plan;
  for (const MissingChunk& m : missing) {
    if (can_load && m.state == ChunkState::swapped) plan.load.push_back(m.index);
    else plan.recompute.push_back(m.index);
  }
  return plan;
}

}  // namespace llmsvc::policy
