#!/usr/bin/env bash
# stop-local-slurm.sh STATE_DIR [--purge]
#
# Stop what start-local-slurm.sh started for STATE_DIR and leave no process behind:
# cancel every job while the controller is up, stop the slurmd(s) and slurmctld by
# their pid files (only if the pid still belongs to this cluster), kill any
# slurmstepd and job process still tied to STATE_DIR, then slurmdbd and MariaDB
# (accounting mode), then munged. Keeps STATE_DIR (a restart recovers queued jobs
# and the accounting database) unless --purge is given.
set -uo pipefail
export PATH="/usr/sbin:/sbin:/usr/bin:/bin:${PATH}"
S="${1:-${LOCAL_SLURM_DIR:-}}"
[ -n "$S" ] || { echo "usage: $0 STATE_DIR [--purge]" >&2; exit 2; }
PURGE=0; [ "${2:-}" = "--purge" ] && PURGE=1
[ -d "$S" ] || exit 0
S="$(cd "$S" && pwd)"
export SLURM_CONF="$S/etc/slurm.conf"
say() { echo "[local-slurm] $*" >&2; }

running() {  # pid exists and is not a zombie
  [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" != Z ]
}
alive() {    # the pid file names a live process of this cluster, not a recycled pid
  local pid; pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] && running "$pid" || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$S/" ||
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qF "$S/"
}
stop_pidfile() {  # pidfile seconds: TERM, wait, then KILL
  local f=$1 t=$2 pid i
  alive "$f" || { rm -f "$f"; return 0; }
  pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < t * 10; i++)); do running "$pid" || break; sleep 0.1; done
  running "$pid" && { say "KILL $f ($pid)"; kill -KILL "$pid" 2>/dev/null; }
  rm -f "$f"
}

# 1. jobs end cleanly while the controller still runs
if alive "$S/run/slurmctld.pid" && [ -f "$SLURM_CONF" ]; then
  ids=$(timeout 10 squeue -h -o %i 2>/dev/null | tr '\n' ' ')
  if [ -n "${ids// /}" ]; then
    timeout 20 scancel $ids 2>/dev/null
    for ((i = 0; i < 150; i++)); do   # up to 15 s (KillWait=5)
      [ -z "$(timeout 5 squeue -h -t R,CG,S -o %i 2>/dev/null)" ] && break; sleep 0.1
    done
  fi
fi

# 2. daemons: compute nodes first, then the controller
for f in "$S"/run/slurmd-*.pid; do [ -e "$f" ] && stop_pidfile "$f" 10; done
stop_pidfile "$S/run/slurmctld.pid" 15

# 3. strays: every slurmstepd whose cwd or open files lie under STATE_DIR, and all
#    of its descendants (job scripts and what they started)
strays=()
for d in /proc/[0-9]*; do
  [ "$(cat "$d/comm" 2>/dev/null)" = slurmstepd ] || continue
  if readlink "$d/cwd" "$d"/fd/* 2>/dev/null | grep -q "^$S/"; then strays+=("${d#/proc/}"); fi
done
if [ ${#strays[@]} -gt 0 ]; then
  all=" ${strays[*]} "; grew=1
  while [ $grew = 1 ]; do
    grew=0
    while read -r pid ppid; do
      [[ "$all" == *" $ppid "* && "$all" != *" $pid "* ]] && { all+="$pid "; grew=1; }
    done < <(ps -eo pid=,ppid=)
  done
  say "killing leftover job processes:$all"
  kill -KILL $all 2>/dev/null
fi

# 4. accounting (LOCAL_SLURM_ACCOUNTING=1): slurmdbd after the controller, which sends
#    it the last job records on the way down; then MariaDB, which may take a while to
#    flush. Neither pid file exists without accounting.
stop_pidfile "$S/run/slurmdbd.pid" 15
stop_pidfile "$S/db/mariadbd.pid" 30

# 5. munge last: the Slurm daemons authenticate while they shut down
stop_pidfile "$S/munge/munged.pid" 5

[ $PURGE = 1 ] && rm -rf "$S"
say "stopped ($S)"
exit 0
