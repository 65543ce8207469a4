#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs a command against a real llmsvcd, the way conformance/run_suite.sh does:
#
#   with_daemon.sh LLMSVCD COMMAND [ARGS...]
#
# starts LLMSVCD on a fresh socket (DIR/s.sock, state in DIR/state, 2 threads), waits until it
# logs "listening on", runs COMMAND ARGS... unix:DIR/s.sock (the target as the last argument),
# then stops the daemon with SIGTERM: it must exit 0. The result is COMMAND's status, or 1 if
# the daemon misbehaved. LLMSVC_JAVA_KEEP=1 keeps DIR (the daemon's log and state).
set -u
if [ $# -lt 2 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
llmsvcd=$1
shift
dir=$(mktemp -d /tmp/llmsvc-java-daemon-XXXXXX) || exit 1
finish() {
  if [ "${LLMSVC_JAVA_KEEP:-0}" != 0 ]; then echo "# kept $dir" >&2; else rm -rf "$dir"; fi
}

# A subshell waits for the daemon and records its exit status.
(
  as_root=""  # as root (CI) llmsvcd must be told it may stay root (it drops every capability)
  [ "$(id -u)" = 0 ] && as_root=--allow-root
  "$llmsvcd" --listen "$dir/s.sock" --state-dir "$dir/state" --threads 2 $as_root >"$dir/llmsvcd.log" 2>&1 &
  echo $! >"$dir/pid"
  wait $!
  echo $? >"$dir/exit"
) &
i=0
while ! grep -q "listening on" "$dir/llmsvcd.log" 2>/dev/null; do
  if [ -f "$dir/exit" ] || [ $i -ge 2400 ]; then
    echo "# llmsvcd did not start; its log:" >&2
    sed 's/^/#   /' "$dir/llmsvcd.log" >&2
    [ -f "$dir/exit" ] || kill -KILL "$(cat "$dir/pid")" 2>/dev/null
    finish
    exit 1
  fi
  sleep 0.05
  i=$((i + 1))
done

"$@" "unix:$dir/s.sock"
rc=$?

kill -TERM "$(cat "$dir/pid")" 2>/dev/null
i=0
while [ ! -f "$dir/exit" ]; do
  if [ $i -ge 1200 ]; then
    echo "# llmsvcd did not exit within 60 s of SIGTERM" >&2
    kill -KILL "$(cat "$dir/pid")" 2>/dev/null
    rc=1
    break
  fi
  sleep 0.05
  i=$((i + 1))
done
if [ -f "$dir/exit" ] && [ "$(cat "$dir/exit")" != 0 ]; then
  echo "# llmsvcd exited $(cat "$dir/exit") after SIGTERM; its log:" >&2
  sed 's/^/#   /' "$dir/llmsvcd.log" >&2
  rc=1
fi
finish
exit $rc
