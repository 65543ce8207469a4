// Runs a test body once per SIMD target this CPU supports (best first), then restores the
// normal dispatch, so every Highway code path that can run here is checked.
#pragma once

#include <cstdint>
#include <string>

#include "hal/cpu/quant/hwy_targets.h"
#include <hwy/targets.h>

namespace llmsvc::test {

// fn(target_name) is called with dispatch limited to `target` and the targets below it.
template <class Fn>
void for_each_simd_target(Fn&& fn) {
  const int64_t supported = hwy::SupportedTargets();
  for (int64_t bits = supported; bits != 0; bits &= bits - 1) {
    const int64_t target = bits & -bits;
    hwy::SetSupportedTargetsForTest(supported & ~(target - 1));
    fn(std::string(hwy::TargetName(target)));
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace llmsvc::test
