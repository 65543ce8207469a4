#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite: install what is missing, fetch the model, check the source rules
# (tools/scripts/check_layers.py, spdx.py), build Release and
# ASan+UBSan and run every test in both (but the full-text perplexity run under ASan, where
# it alone neared its 15-minute limit; Release checks the numerics), run the concurrent parts
# (thread pool, swap I/O, chunk store, the C API's threads, the daemon with its clients)
# under ThreadSanitizer, and run each fuzzer for a short fixed time. The checking builds
# compile the SIMD kernels for fewer targets (LLMSVC_CHECK_BUILD in CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/../.."
tools/scripts/install_deps.sh
tools/scripts/fetch_model.sh >/dev/null
tools/scripts/fetch_gemma.sh >/dev/null  # the second real model (the GPU's perplexity test)
jobs=$(nproc)
# One cache of compiled OpenCL programs for the whole run (every preset, test and daemon):
# PoCL compiles each program once instead of in every test that opens a device.
export LLMSVC_CL_CACHE_DIR="$PWD/build/cl-cache"
start=$SECONDS
stage() { echo "== $1 (at $((SECONDS - start)) s)" >&2; }
stage "source rules: layers, SPDX lines"
tools/scripts/check_layers.py --self-test
tools/scripts/check_layers.py
tools/scripts/spdx.py --check
for preset in release asan tsan; do
  stage "$preset: build"
  tools/scripts/build.sh "$preset"
  stage "$preset: test"
  ctest --preset "$preset" -j "$jobs"
done
if [ -x fuzz/run_fuzzers.sh ]; then
  stage fuzz
  # 20 s each keeps the whole run under an hour on two cores; longer runs: LLMSVC_FUZZ_SECONDS.
  fuzz/run_fuzzers.sh "${LLMSVC_FUZZ_SECONDS:-20}"
fi
stage done
