// SPDX-License-Identifier: Apache-2.0
// Runs a test body once per Highway target that is compiled in and supported here, each
// alone, so the AVX-512, AVX2, SSE4 and baseline paths are all checked on one machine.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "hal/host/hwy_targets.h"  // the same target list as the library
#include "hwy/targets.h"

namespace llmsvc::test {

// body() or body(target), with dispatch limited to `target`; normal dispatch afterwards.
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

// Targets whose vector FMA is fused (x86 from AVX2, Arm NEON and SVE): where llmsvc
// reproduces llama.cpp's bits (its AVX-512 build; the kernels keep its 16-lane orders with
// narrower vectors too).
inline bool has_fma(int64_t target) {
  const std::string_view name = hwy::TargetName(target);
  return name.starts_with("AVX") || name.starts_with("NEON") || name.starts_with("SVE");
}

}  // namespace llmsvc::test
