#!/usr/bin/env bash
# The whole test suite: install what is missing, fetch the model, build Release and
# ASan+UBSan and run every test in both, run the concurrent parts (thread pool, swap I/O,
# chunk store, the C API's threads, the daemon with its clients) under ThreadSanitizer, and run each fuzzer
# for a short fixed time.
set -euo pipefail
cd "$(dirname "$0")/../.."
tools/scripts/install_deps.sh
tools/scripts/fetch_model.sh >/dev/null
jobs=$(nproc)
for preset in release asan tsan; do
  echo "== $preset: build" >&2
  tools/scripts/build.sh "$preset"
  echo "== $preset: test" >&2
  ctest --preset "$preset" -j "$jobs"
done
if [ -x fuzz/run_fuzzers.sh ]; then
  echo "== fuzz" >&2
  fuzz/run_fuzzers.sh "${LLMSVC_FUZZ_SECONDS:-60}"
fi
