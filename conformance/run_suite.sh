#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs the conformance suite the way CTest does, each run in a fresh directory.
#
#   run_suite.sh embedded SUITE [ARGS...]          embedded, state in a fresh LLMSVC_STATE_DIR
#   run_suite.sh daemon SUITE LLMSVCD [ARGS...]    a real llmsvcd on unix:DIR/s.sock, compared
#                                                  with embedded; the suite may restart it
#   run_suite.sh restart DIR LLMSVCD               (for the suite) SIGTERM the daemon, start it again
#
# The daemon is stopped with SIGTERM at the end and must exit 0. LLMSVC_CONF_KEEP=1 keeps the
# directory (logs, state). The model: llmsvcd's and the library's default ($LLMSVC_MODEL_DIR).
# LLMSVC_CONF_DEVICES="opencl,cpu" runs the model there: the suite's embedded bindings take it as
# their device list, the daemon's configuration as its devices. LLMSVC_CONF_ADAPTERS="NAME=PATH;..."
# offers LoRA adapters: the embedded bindings' llmsvc_bind_options.adapters, the daemon's [adapters].
set -u

# Starts llmsvcd in $1 (socket s.sock, state state/, log llmsvcd.N.log) and waits until it
# listens. A subshell waits for it and writes its exit status to exit.N: the daemon is not a
# child of a later "restart" process, which can only wait for that file.
start_daemon() {
  dir=$1 llmsvcd=$2
  n=$(($(cat "$dir/starts" 2>/dev/null || echo 0) + 1))
  echo "$n" >"$dir/starts"
  (
    # As root (CI) llmsvcd must be told it may stay root (it drops every capability).
    as_root=""
    [ "$(id -u)" = 0 ] && as_root=--allow-root
    "$llmsvcd" --listen "$dir/s.sock" --state-dir "$dir/state" --threads 2 --config "$dir/llmsvcd.toml" $as_root \
      >"$dir/llmsvcd.$n.log" 2>&1 &
    echo $! >"$dir/pid"
    wait $!
    echo $? >"$dir/exit.$n"
  ) &
  i=0
  while ! grep -q "listening on" "$dir/llmsvcd.$n.log" 2>/dev/null; do
    if [ -f "$dir/exit.$n" ] || [ $i -ge 2400 ]; then
      echo "# llmsvcd did not start; its log:" >&2
      sed 's/^/#   /' "$dir/llmsvcd.$n.log" >&2
      return 1
    fi
    sleep 0.05
    i=$((i + 1))
  done
}

# SIGTERMs the running daemon and waits for its exit status (0 expected).
stop_daemon() {
  dir=$1
  n=$(cat "$dir/starts")
  kill -TERM "$(cat "$dir/pid")" 2>/dev/null
  i=0
  while [ ! -f "$dir/exit.$n" ]; do
    if [ $i -ge 1200 ]; then
      echo "# llmsvcd did not exit within 60 s of SIGTERM" >&2
      kill -KILL "$(cat "$dir/pid")" 2>/dev/null
      return 1
    fi
    sleep 0.05
    i=$((i + 1))
  done
  # Not "rc": these functions share the caller's variables (POSIX sh has no locals).
  exit_status=$(cat "$dir/exit.$n")
  if [ "$exit_status" != 0 ]; then
    echo "# llmsvcd exited $exit_status after SIGTERM; its log:" >&2
    sed 's/^/#   /' "$dir/llmsvcd.$n.log" >&2
    return 1
  fi
}

finish() {
  if [ "${LLMSVC_CONF_KEEP:-0}" != 0 ]; then echo "# kept $1" >&2; else rm -rf "$1"; fi
}

quota_contexts=48
mode=${1:-}
case "$mode" in
  embedded)
    suite=$2
    shift 2
    dir=$(mktemp -d /tmp/llmsvc-conf-XXXXXX) || exit 1
    LLMSVC_STATE_DIR=$dir/state "$suite" embedded "$@"
    rc=$?
    finish "$dir"
    exit $rc
    ;;
  daemon)
    suite=$2 llmsvcd=$3
    shift 3
    dir=$(mktemp -d /tmp/llmsvc-conf-XXXXXX) || exit 1
    chmod 755 "$dir" # the isolation tests' unprivileged uids reach the socket in it
    # A per-app quota the suite can reach (STATUS-17), high enough for every other test.
    {
      if [ -n "${LLMSVC_CONF_DEVICES:-}" ]; then
        printf 'devices = ["%s"]\n' "$(echo "$LLMSVC_CONF_DEVICES" | sed 's/,/", "/g')"
      fi
      if [ -n "${LLMSVC_CONF_ADAPTERS:-}" ]; then
        printf '[adapters]\n'
        echo "$LLMSVC_CONF_ADAPTERS" | tr ';' '\n' | sed -n 's/^\([^=]*\)=\(.*\)$/\1 = "\2"/p'
      fi
      printf '[quotas]\ncontexts = %s\n' "$quota_contexts"
    } >"$dir/llmsvcd.toml"
    start_daemon "$dir" "$llmsvcd" || { finish "$dir"; exit 1; }
    self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
    LLMSVC_CONF_QUOTA_CONTEXTS=$quota_contexts LLMSVC_STATE_DIR=$dir/embedded-state \
      "$suite" "unix:$dir/s.sock" --compare-with embedded \
      --restart-cmd "'$self' restart '$dir' '$llmsvcd'" "$@"
    rc=$?
    stop_daemon "$dir" || rc=1
    finish "$dir"
    exit $rc
    ;;
  restart)
    stop_daemon "$2" && start_daemon "$2" "$3"
    ;;
  *)
    sed -n '2,10p' "$0" >&2
    exit 2
    ;;
esac
