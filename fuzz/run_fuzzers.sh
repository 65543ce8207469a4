#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets (CMake preset "fuzz", clang-14) into build/fuzz and runs each
# for SECONDS (default 60) over a scratch copy of its seed corpus fuzz/corpus/<name>/.
# FUZZ_JOBS of them run at once (default: the CPU count), each on its own core, so the stage
# takes ceil(targets / FUZZ_JOBS) x SECONDS: on CI's 2 cores the 10 fuzzers (gguf, chunk_file, chunk_table,
# history_log, protocol, protocol_session, jinja, schema, tool_call, lora_adapter) take 5 x SECONDS. Each one's output is
# printed when it ends.
# Exits non-zero if any fuzzer finds a crash; the input is kept in build/fuzz/artifacts/.
# Usage: fuzz/run_fuzzers.sh [SECONDS]      env: JOBS (build parallelism, default 2), FUZZ_JOBS
set -euo pipefail
secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

cmake --preset fuzz >/dev/null
targets=()
for src in fuzz/*_fuzzer.cpp; do targets+=("$(basename "$src" .cpp)"); done
cmake --build build/fuzz -j "${JOBS:-2}" --target "${targets[@]}"

slots=${FUZZ_JOBS:-$(nproc)}
[ "$slots" -ge 1 ] || slots=1
logs=build/fuzz/logs
rm -rf "$logs"
mkdir -p "$logs"

# One fuzzer: its output to $logs/<target>.log, its exit status to $logs/<target>.rc.
run_one() {
  local t=$1 name=${1%_fuzzer}
  local work=build/fuzz/corpus/$name artifacts=build/fuzz/artifacts/$t/
  rm -rf "$work"
  mkdir -p "$work" "$artifacts"
  if [ -d "fuzz/corpus/$name" ]; then cp -r "fuzz/corpus/$name/." "$work/"; fi
  local args=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts")
  if [ -f "fuzz/$name.dict" ]; then args+=(-dict="fuzz/$name.dict"); fi
  local rc=0
  "build/fuzz/fuzz/$t" "${args[@]}" "$work" >"$logs/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$logs/$t.rc"
}

failed=0
report() {  # prints a finished fuzzer's output and verdict
  local t=$1
  echo "== $t: ${secs}s"
  cat "$logs/$t.log"
  if [ "$(cat "$logs/$t.rc")" != 0 ]; then
    echo "== $t: FAILED, reproducer in build/fuzz/artifacts/$t/" >&2
    failed=1
  fi
}

running=()
for t in "${targets[@]}"; do
  while [ "${#running[@]}" -ge "$slots" ]; do
    wait -n || true
    still=()
    for r in "${running[@]}"; do
      if [ -f "$logs/$r.rc" ]; then report "$r"; else still+=("$r"); fi
    done
    running=("${still[@]}")
  done
  echo "== $t: started (${secs}s)"
  run_one "$t" &
  running+=("$t")
done
wait
for r in "${running[@]}"; do report "$r"; done
exit $failed
