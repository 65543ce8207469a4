#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs examples/Chat.java the way bindings/java/README.md tells a user to (from its source, the
# JNI library found through java.library.path), embedded, in a fresh state directory:
#
#   chat_example.sh JAVA LLMSVC_JAR CHAT_JAVA JNI_LIBRARY
#
# Two turns in one run, then a second run on the same --context: each reply is non-empty, and
# the second run continues the first run's conversation (the context then holds 3 turns).
set -u
if [ $# -ne 4 ]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
java=$1 jar=$2 chat=$3 jni=$4
dir=$(mktemp -d /tmp/llmsvc-java-chat-XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
export LLMSVC_STATE_DIR="$dir/state"
unset LLMSVC_TARGET
run() {
  "$java" -Xcheck:jni -Djava.library.path="$(dirname "$jni")" -cp "$jar" "$chat" \
    --context ada --max-tokens 12 --system "You are terse."
}

printf 'My name is Ada.\nWhat is two plus two?\n' | run >"$dir/out1" 2>"$dir/err1"
rc=$?
printf 'What is my name?\n' | run >"$dir/out2" 2>"$dir/err2"
rc2=$?
for n in 1 2; do
  echo "--- run $n: stdout"; cat "$dir/out$n"
  echo "--- run $n: stderr"; cat "$dir/err$n"
done
fail() { echo "# $1" >&2; exit 1; }
[ $rc -eq 0 ] && [ $rc2 -eq 0 ] || fail "chat exited $rc, $rc2"
[ "$(grep -c . "$dir/out1")" -ge 2 ] || fail "run 1: expected two replies"
[ "$(grep -c . "$dir/out2")" -ge 1 ] || fail "run 2: expected a reply"
grep -q "context ada: [0-9]* tokens, 2 turns" "$dir/err1" || fail "run 1: expected 2 turns"
grep -q "context ada: [0-9]* tokens, 3 turns" "$dir/err2" || fail "run 2: expected the conversation continued (3 turns)"
if grep -E "WARNING in native method|FATAL ERROR in native method|JNI local refs" "$dir/err1" "$dir/err2" "$dir/out1" "$dir/out2"; then
  fail "-Xcheck:jni reported a problem"
fi
echo "# ok"
