// Runs a test body once per Highway target that is compiled in and supported here, so the
// AVX-512, AVX2, SSE4 and scalar paths are all checked on one machine.
#pragma once

#include <gtest/gtest.h>

#include <type_traits>

#include "hal/cpu/quant/hwy_targets.h"  // the same target list as the library
#include "hwy/targets.h"

namespace llmsvc::test {

// body() or body(target).
template <class F>
void for_each_simd_target(const F& body) {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    if constexpr (std::is_invocable_v<const F&, int64_t>) {
      body(target);
    } else {
      body();
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// x86 targets with FMA (AVX2 and up): where llmsvc reproduces llama.cpp's bits (its
// AVX-512 build; the kernels keep its 16-lane orders with narrower vectors too).
inline bool has_fma(int64_t target) { return target <= HWY_AVX2; }

}  // namespace llmsvc::test
