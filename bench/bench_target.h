// SPDX-License-Identifier: Apache-2.0
// LLMSVC_BENCH_TARGET=AVX2 (or any Highway target name) restricts a benchmark's kernels to
// that instruction set, to compare the SIMD paths on one machine. Include after
// <benchmark/benchmark.h>.
#pragma once

#include <cstdlib>
#include <cstring>

#include "hal/host/hwy_targets.h"
#include "hwy/targets.h"

namespace llmsvc::bench {

// Applies LLMSVC_BENCH_TARGET; returns the target's name, or "best" when unset.
inline const char* select_simd_target() {
  const char* want = std::getenv("LLMSVC_BENCH_TARGET");
  if (!want) return "best";
  for (const int64_t t : hwy::SupportedAndGeneratedTargets())
    if (std::strcmp(hwy::TargetName(t), want) == 0) hwy::SetSupportedTargetsForTest(t);
  return want;
}

}  // namespace llmsvc::bench

// A Google Benchmark main() that applies LLMSVC_BENCH_TARGET first and records it.
#define LLMSVC_BENCHMARK_MAIN()                                          \
  int main(int argc, char** argv) {                                      \
    const char* target = llmsvc::bench::select_simd_target();            \
    benchmark::Initialize(&argc, argv);                                  \
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;    \
    benchmark::AddCustomContext("simd_target", target);                  \
    benchmark::RunSpecifiedBenchmarks();                                 \
    benchmark::Shutdown();                                               \
    return 0;                                                            \
  }
