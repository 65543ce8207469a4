// SPDX-License-Identifier: Apache-2.0
// An elastic level at the compute lock: each turn's level entered (the weights it reads made
// resident first), trims under memory pressure, and a level's per cent.
#include "runtime/core/engine/engine_impl.h"

namespace llmsvc {

int EngineImpl::level_percent(int level) const {
  const ElasticSpec* spec = model_->elastic();
  return spec && level >= 0 && level < spec->full() ? spec->levels[static_cast<size_t>(level)] : 100;
}

Status EngineImpl::enter_level(int level) {
  // A trim that came while this call computed: what its own level leaves (the full level, -1,
  // leaves nothing).
  if (trim_pending_.load(std::memory_order_relaxed) && trim_pending_.exchange(false)) (void)weights_.release_above(level);
  // The weights first: a level whose rows cannot be taken back does not run.
  LLMSVC_RETURN_IF_ERROR(weights_.make_resident(level));
  return forward_->set_level(level);
}

uint64_t EngineImpl::trim_weights() {
  if (!weights_.can_release()) return 0;
  std::unique_lock<FairMutex> turn(compute_mu_, std::try_to_lock);
  if (!turn.owns_lock()) {
    trim_pending_ = true;  // the running call's next turn gives back what its level leaves
    return 0;
  }
  return weights_.release_above(0);
}

}  // namespace llmsvc
