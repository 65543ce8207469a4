// Runs a test body once per Highway target that is compiled in and supported here, so the
// AVX-512, AVX2, SSE4 and scalar paths are all checked on one machine.
#pragma once

#include <gtest/gtest.h>

#include "hal/cpu/quant/hwy_targets.h"  // the same target list as the library
#include "hwy/targets.h"

namespace llmsvc::test {

template <class F>
void for_each_simd_target(const F& body) {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace llmsvc::test
