#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs the Java binding's JUnit 5 suite against one target, the way CTest does.
#
#   run_junit.sh JAVA CONSOLE_JAR CLASSPATH JNI_LIBRARY TARGET
#
# TARGET: "embedded" (state in a fresh LLMSVC_STATE_DIR, removed after) or "unix:PATH" (a
# daemon already listening; scripts/with_daemon.sh starts one). The JVM runs with -Xcheck:jni,
# and any JNI warning it prints (an unchecked exception, a local reference overflow...) fails the
# run even when every test passed. LLMSVC_JAVA_KEEP=1 keeps the directory.
set -u
if [ $# -ne 5 ]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
java=$1 console=$2 classpath=$3 jni=$4 target=$5
dir=$(mktemp -d /tmp/llmsvc-java-XXXXXX) || exit 1

# LLMSVC_TARGET too: LLMService.bind() without options must pick this run's target.
LLMSVC_STATE_DIR=$dir/state LLMSVC_TARGET=$target \
  "$java" -Xcheck:jni -Dllmsvc.jni.library="$jni" -Dllmsvc.test.target="$target" \
  -jar "$console" --class-path "$classpath" --scan-class-path "$classpath" \
  --fail-if-no-tests --disable-banner --disable-ansi-colors --details=tree >"$dir/junit.log" 2>&1
rc=$?
cat "$dir/junit.log"
if grep -E "WARNING in native method|FATAL ERROR in native method|JNI local refs" "$dir/junit.log" >/dev/null; then
  echo "# -Xcheck:jni reported a problem (above)" >&2
  [ $rc -ne 0 ] || rc=1
fi
if [ "${LLMSVC_JAVA_KEEP:-0}" != 0 ]; then echo "# kept $dir" >&2; else rm -rf "$dir"; fi
exit $rc
