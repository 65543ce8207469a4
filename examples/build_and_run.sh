#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the C examples the way an app would, against an *installed* llmsvc, and runs them:
#  1. `cmake --install BUILD_DIR` into a temporary prefix (staged with DESTDIR, so nothing lands
#     outside it whatever absolute paths an install rule holds; the tree is relocatable);
#  2. each example out of tree with CMake (find_package(llmsvc), CMAKE_PREFIX_PATH=prefix) and
#     with pkg-config (PKG_CONFIG_PATH=prefix/lib/pkgconfig), warnings as errors, and checks
#     that both link the installed libllmsvc.so.1;
#  3. embedded_chat on the default model: two turns in a persistent context, then the same
#     context resumed by the other build (the installed `llmsvc ctx show` counts the turns);
#  4. a real llmsvcd from the prefix, daemon_client against it (--target and $LLMSVC_TARGET)
#     and its error messages, then SIGTERM: the daemon must exit 0;
#  and between 2 and 3, the conformance suite (conformance/) compiled the same way against the
#  prefix, and its lifecycle requirements run embedded.
#
#   examples/build_and_run.sh [BUILD_DIR]      (default: build/release, built)
#
# Exit 77 (CTest's skip code) when the default model is not fetched (tools/scripts/fetch_model.sh).
# LLMSVC_EXAMPLES_KEEP=1 keeps the temporary directory (logs, outputs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=$(cd "${1:-$root/build/release}" && pwd)
cc=${CC:-cc}
examples=(embedded_chat daemon_client)

die() {
  echo "build_and_run: FAIL: $*" >&2
  exit 1
}
step() { echo "== $*"; }
# Runs a command with its output in $work/NAME.out and NAME.err; on failure shows both.
run() {
  local name=$1
  shift
  if ! "$@" >"$work/$name.out" 2>"$work/$name.err"; then
    cat "$work/$name.out" "$work/$name.err" >&2
    die "$name: '$*' failed"
  fi
}
# Fails unless FILE has a letter or digit: the model wrote something.
has_text() { grep -q '[[:alnum:]]' "$1" || die "$1: no text"; }

model="${LLMSVC_MODEL_DIR:-$HOME/.cache/llmsvc/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
  echo "build_and_run: the default model is not at $model (tools/scripts/fetch_model.sh): skipped" >&2
  exit 77
fi

work=$(mktemp -d /tmp/llmsvc-examples-XXXXXX)
daemon_pid=""
cleanup() {
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then kill -KILL "$daemon_pid"; fi
  if [ "${LLMSVC_EXAMPLES_KEEP:-0}" != 0 ]; then echo "build_and_run: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
unset LLMSVC_TARGET
export LLMSVC_STATE_DIR=$work/state

step "install $build"
run install env DESTDIR="$work/stage" cmake --install "$build" --prefix /llmsvc
prefix=$work/stage/llmsvc
pc=$(find "$prefix" -path '*/pkgconfig/llmsvc.pc' | head -n 1)
[ -n "$pc" ] || die "no llmsvc.pc under $prefix"
libdir=$(dirname "$(dirname "$pc")")
[ -f "$libdir/libllmsvc.so.1" ] || die "no libllmsvc.so.1 in $libdir"
llmsvcd=$prefix/sbin/llmsvcd
cli=$prefix/bin/llmsvc
[ -x "$llmsvcd" ] && [ -x "$cli" ] || die "llmsvcd or llmsvc not installed in $prefix"

# Fails unless BIN (run with the rest of the arguments as environment) loads the installed library.
links_installed() {
  local bin=$1
  shift
  local libs
  libs=$(env "$@" ldd "$bin")
  grep -qF "libllmsvc.so.1 => $libdir/libllmsvc.so.1 " <<<"$libs" || { echo "$libs" >&2; die "$bin does not load $libdir/libllmsvc.so.1"; }
}

for ex in "${examples[@]}"; do
  step "$ex: CMake, find_package(llmsvc)"
  run "$ex-cmake-configure" cmake -S "$here/$ex" -B "$work/cmake/$ex" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS=-Werror
  found=$(sed -n 's/^llmsvc_DIR:PATH=//p' "$work/cmake/$ex/CMakeCache.txt")
  [[ $found == "$prefix"/* ]] || die "$ex: find_package found llmsvc in '$found', not in $prefix"
  run "$ex-cmake-build" cmake --build "$work/cmake/$ex"
  links_installed "$work/cmake/$ex/$ex"

  step "$ex: pkg-config"
  # The one-line build the examples document.
  run "$ex-pkgconfig" env PKG_CONFIG_PATH="$(dirname "$pc")" sh -c \
    "$cc -std=c11 -Wall -Wextra -Werror '$here/$ex/main.c' \$(pkg-config --cflags --libs llmsvc) -o '$work/$ex'"
  links_installed "$work/$ex" LD_LIBRARY_PATH="$libdir"
done
step "conformance suite: built against the installed tree (its sources, llmsvc.h, libllmsvc.so.1)"
run conformance-build env PKG_CONFIG_PATH="$(dirname "$pc")" sh -c \
  "$cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I'$root/conformance' '$root'/conformance/*.c \$(pkg-config --cflags --libs llmsvc) -pthread -lm -o '$work/llmsvc_conformance'"
links_installed "$work/llmsvc_conformance" LD_LIBRARY_PATH="$libdir"
# Its lifecycle requirements, embedded (CTest's Conformance.* run all of them, both transports).
run conformance-lifecycle env LD_LIBRARY_PATH="$libdir" LLMSVC_STATE_DIR="$work/conformance-state" \
  "$work/llmsvc_conformance" embedded --only 'LIFE-*'
grep -q '^[1-9][0-9]* passed, 0 failed$' "$work/conformance-lifecycle.out" || {
  cat "$work/conformance-lifecycle.out" >&2
  die "the conformance suite built against the installed tree failed"
}
tail -n 1 "$work/conformance-lifecycle.out" | sed 's/^/  | /'

chat_cmake=$work/cmake/embedded_chat/embedded_chat
chat_pc=(env LD_LIBRARY_PATH="$libdir" "$work/embedded_chat")
client_cmake=$work/cmake/daemon_client/daemon_client
client_pc=(env LD_LIBRARY_PATH="$libdir" "$work/daemon_client")

# The turns the persistent context ID holds, as the installed CLI reports them.
turns() {
  "$cli" ctx show "$1" --json --state-dir "$LLMSVC_STATE_DIR" | sed -n 's/^ *"turns": *\([0-9]*\).*/\1/p'
}

step "embedded_chat: two turns in the persistent context 'ada'"
printf 'My name is Ada.\nWhat is my name?\n' >"$work/turns.txt"
run chat1 "$chat_cmake" --context ada --max-tokens 12 <"$work/turns.txt"
has_text "$work/chat1.out"
sed 's/^/  | /' "$work/chat1.out"
[ "$(turns ada)" = 2 ] || die "context 'ada' holds $(turns ada) turns after the first chat, not 2"

step "embedded_chat (pkg-config build): 'ada' resumed, and a session without --context"
run chat2 "${chat_pc[@]}" --context ada --max-tokens 12 <<<"Tell me again."
has_text "$work/chat2.out"
[ "$(turns ada)" = 3 ] || die "context 'ada' holds $(turns ada) turns after resuming, not 3"
run chat3 "${chat_pc[@]}" --max-tokens 4 <<<"Hello."
has_text "$work/chat3.out"
"$cli" ctx list --state-dir "$LLMSVC_STATE_DIR" | awk '{ print $1 }' >"$work/contexts.txt"  # "ID  N tokens  N turns"
[ "$(cat "$work/contexts.txt")" = ada ] || die "contexts after a session without --context: $(cat "$work/contexts.txt")"

step "llmsvcd: start"
sock=$work/llmsvcd.sock
as_root=()  # as root (CI) llmsvcd must be told it may stay root (it drops every capability)
[ "$(id -u)" = 0 ] && as_root=(--allow-root)
"$llmsvcd" --listen "$sock" --state-dir "$work/daemon-state" --threads 2 "${as_root[@]}" >"$work/llmsvcd.log" 2>&1 &
daemon_pid=$!
for ((i = 0; ; i++)); do
  grep -q "listening on" "$work/llmsvcd.log" && break
  if ! kill -0 "$daemon_pid" 2>/dev/null || [ "$i" -ge 1200 ]; then
    cat "$work/llmsvcd.log" >&2
    die "llmsvcd did not start listening"
  fi
  sleep 0.1
done

step "daemon_client: --target unix:PATH"
run client1 "$client_cmake" --target "unix:$sock" --max-tokens 12 "Write a haiku about the sea."
has_text "$work/client1.out"
sed 's/^/  | /' "$work/client1.out" "$work/client1.err"
grep -q '^call: [0-9]* prompt tokens, [1-9][0-9]* generated' "$work/client1.err" || die "client1: no call figures"
grep -q '^service: [1-9][0-9]* calls' "$work/client1.err" || die "client1: no service figures"

step "daemon_client (pkg-config build): \$LLMSVC_TARGET"
run client2 env LLMSVC_TARGET="unix:$sock" "${client_pc[@]}" --max-tokens 8 "Hello"
has_text "$work/client2.out"
grep -q '^service: [1-9][0-9]* calls' "$work/client2.err" || die "client2: no service figures"

step "daemon_client: error messages"
if "$client_cmake" --target "unix:$work/none.sock" "Hello" >/dev/null 2>"$work/client3.err"; then
  die "daemon_client succeeded without a daemon"
fi
grep -q 'bind: LLMSVC_ERR_UNAVAILABLE: ' "$work/client3.err" || { cat "$work/client3.err" >&2; die "no status and detail for a missing daemon"; }
sed 's/^/  | /' "$work/client3.err"
if "$client_cmake" "Hello" >/dev/null 2>"$work/client4.err"; then die "daemon_client succeeded without a target"; fi
grep -q 'LLMSVC_TARGET' "$work/client4.err" || { cat "$work/client4.err" >&2; die "no hint for a missing target"; }

step "llmsvcd: SIGTERM"
kill -TERM "$daemon_pid"
for ((i = 0; ; i++)); do
  kill -0 "$daemon_pid" 2>/dev/null || break
  if [ "$i" -ge 600 ]; then
    cat "$work/llmsvcd.log" >&2
    die "llmsvcd still runs 60 s after SIGTERM"
  fi
  sleep 0.1
done
status=0
wait "$daemon_pid" || status=$?
daemon_pid=""
if [ "$status" != 0 ]; then
  cat "$work/llmsvcd.log" >&2
  die "llmsvcd exited $status after SIGTERM"
fi
echo "build_and_run: ok: ${examples[*]} built with find_package and pkg-config against the installed tree, and run; the conformance suite built against it"
