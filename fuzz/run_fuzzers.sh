#!/usr/bin/env bash
# Builds the libFuzzer targets (CMake preset "fuzz", clang-14) into build/fuzz and runs each
# for SECONDS (default 60) over a scratch copy of its seed corpus fuzz/corpus/<name>/.
# Exits non-zero if any fuzzer finds a crash; the input is kept in build/fuzz/artifacts/.
# Usage: fuzz/run_fuzzers.sh [SECONDS]      env: JOBS (build parallelism, default 2)
set -euo pipefail
secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

cmake --preset fuzz >/dev/null
targets=()
for src in fuzz/*_fuzzer.cpp; do targets+=("$(basename "$src" .cpp)"); done
cmake --build build/fuzz -j "${JOBS:-2}" --target "${targets[@]}"

failed=0
for t in "${targets[@]}"; do
  name=${t%_fuzzer}
  work=build/fuzz/corpus/$name
  artifacts=build/fuzz/artifacts/$t/
  rm -rf "$work"
  mkdir -p "$work" "$artifacts"
  if [ -d "fuzz/corpus/$name" ]; then cp -r "fuzz/corpus/$name/." "$work/"; fi
  args=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts")
  if [ -f "fuzz/$name.dict" ]; then args+=(-dict="fuzz/$name.dict"); fi
  echo "== $t: ${secs}s"
  if ! "build/fuzz/fuzz/$t" "${args[@]}" "$work"; then
    echo "== $t: FAILED, reproducer in $artifacts" >&2
    failed=1
  fi
done
exit $failed
