#!/usr/bin/env bash
# stop-local-k8s.sh STATE_DIR — stop what start-local-k8s.sh STATE_DIR started.
#
# Kills by pid file only (never by process name), clients first and etcd last:
# SIGTERM, wait up to CP_K8S_STOP_TIMEOUT seconds (default 15), then SIGKILL and wait again.
# A pid is only signalled if its command line mentions STATE_DIR (every component's does:
# data dir, kubeconfig or cert paths), so a stale pid file can't hit a recycled pid.
# Exits 0 when nothing of STATE_DIR is left running (also when nothing was running).
# The state (etcd data, certs, kubeconfig, logs) is kept; rm -rf STATE_DIR to discard it.
set -uo pipefail

STATE=${1:?usage: $0 STATE_DIR}
[ -d "$STATE" ] || exit 0
STATE=$(cd "$STATE" && pwd)
TIMEOUT=${CP_K8S_STOP_TIMEOUT:-15}

ours() {  # ours PID: alive and started for this STATE_DIR?
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' < "/proc/$1/cmdline" | grep -qF "$STATE/"
}

stop_one() {
  local name=$1 f="$STATE/$1.pid" pid i
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if [ -n "$pid" ] && ours "$pid"; then
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < TIMEOUT * 10; i++)); do ours "$pid" || break; sleep 0.1; done
    if ours "$pid"; then
      echo "[stop-local-k8s] $name (pid $pid) ignored SIGTERM for ${TIMEOUT}s; SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null
      for ((i = 0; i < 50; i++)); do ours "$pid" || break; sleep 0.1; done
    fi
    if ours "$pid"; then echo "[stop-local-k8s] $name (pid $pid) still running" >&2; return 1; fi
  fi
  rm -f "$f"
}

rc=0
for c in scheduler kcm apiserver etcd; do stop_one "$c" || rc=1; done
exit $rc
