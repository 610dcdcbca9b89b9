#!/usr/bin/env bash
# start-local-slurm.sh STATE_DIR
#
# A throw-away Slurm 22.05 cluster on this one host, for the adapter's integration
# tests and benchmarks: munged + slurmctld + one slurmd per logical node
# (`slurmd -N NAME`, each on its own port, all on 127.0.0.1), run as root without
# systemd. Config, state, logs, sockets and pid files all live under STATE_DIR, so
# two clusters can run side by side with different LOCAL_SLURM_PORT_BASE values.
#
# The GPUs are fake: Slurm 22.05 drops a gpu GRES that has no File=, so every GPU
# is a symlink to /dev/null; nothing binds them (TaskPlugin=task/none).
#
# stdout carries only `export` lines (eval "$(start-local-slurm.sh DIR)"); progress
# and errors go to stderr. The same lines are kept in DIR/env.sh. Running it again
# leaves live daemons alone, and restarts the cluster if the generated config changed.
#
# Environment knobs (all optional):
#   LOCAL_SLURM_PORT_BASE   slurmctld port; node i listens on BASE+i (default 26817)
#   LOCAL_SLURM_A100_NODES  nodes in partition gpu-a100, 8 x gpu:a100_80 each (2)
#   LOCAL_SLURM_V100_NODES  nodes in partition gpu-v100, 4 x gpu:v100 each    (2)
#   LOCAL_SLURM_CPU_NODES   nodes in partition debug (default, MaxTime 30 min) (2)
#   LOCAL_SLURM_PREEMPT=1   Slurm's own partition-priority preemption (REQUEUE) and a
#                           partition gpu-a100-urgent (PriorityTier=10) on the a100 nodes
#   LOCAL_SLURM_FRESH=1     stop the cluster and wipe its state first
#   LOCAL_SLURM_TIMEOUT     seconds to wait until every node is usable (default 60)
#   LOCAL_SLURM_NO_INSTALL=1  fail instead of running apt-get when packages are missing
set -euo pipefail
export PATH="/usr/sbin:/sbin:/usr/bin:/bin:${PATH}"
HERE="$(cd "$(dirname "$0")" && pwd)"

S="${1:-${LOCAL_SLURM_DIR:-}}"
[ -n "$S" ] || { echo "usage: $0 STATE_DIR" >&2; exit 2; }
mkdir -p "$S"; S="$(cd "$S" && pwd)"
BASE="${LOCAL_SLURM_PORT_BASE:-26817}"
N_A100="${LOCAL_SLURM_A100_NODES:-2}"
N_V100="${LOCAL_SLURM_V100_NODES:-2}"
N_CPU="${LOCAL_SLURM_CPU_NODES:-2}"
TIMEOUT="${LOCAL_SLURM_TIMEOUT:-60}"
say() { echo "[local-slurm] $*" >&2; }

# A pid file names a live daemon of THIS cluster only if the process is not a
# zombie (some sandboxes reap orphans late) and its command line or environment
# mentions STATE_DIR (a recycled pid belongs to somebody else).
alive() {
  local pid; pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  [ "$(sed 's/.*) //' "/proc/$pid/stat" | cut -c1)" != Z ] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$S/" ||
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qF "$S/"
}
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------- packages
missing=0
for bin in slurmctld slurmd slurmstepd sbatch squeue sinfo scontrol scancel munged mungekey; do
  command -v "$bin" >/dev/null 2>&1 || missing=1
done
if [ $missing = 1 ]; then
  if [ "${LOCAL_SLURM_NO_INSTALL:-0}" = 1 ]; then
    say "Slurm or munge is not installed (apt-get install slurmctld slurmd slurm-client munge)"; exit 1
  fi
  say "installing slurmctld slurmd slurm-client munge (log: $S/apt.log)"
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(slurmctld slurmd slurm-client munge)
  # try without refreshing the lists first: on a machine that has them it takes a second
  if ! apt-get install -y -q --no-install-recommends "${pkgs[@]}" >>"$S/apt.log" 2>&1; then
    apt-get update -q >>"$S/apt.log" 2>&1 &&
      apt-get install -y -q --no-install-recommends "${pkgs[@]}" >>"$S/apt.log" 2>&1 ||
      { say "apt-get failed, see $S/apt.log"; exit 1; }
  fi
fi

# ---------------------------------------------------------------- layout
if [ "${LOCAL_SLURM_FRESH:-0}" = 1 ] && [ -d "$S/etc" ]; then
  "$HERE/stop-local-slurm.sh" "$S" || true
  rm -rf "$S/etc" "$S/ctld" "$S/spool" "$S/run" "$S/log" "$S/munge" "$S/dev" "$S/env.sh"
fi
mkdir -p "$S/etc" "$S/ctld" "$S/spool" "$S/run" "$S/log" "$S/munge" "$S/dev" "$S/jobs"
chmod 755 "$S" "$S/munge"      # munged refuses a socket whose folders are not all a+x
for i in 0 1 2 3 4 5 6 7; do ln -sfn /dev/null "$S/dev/gpu$i"; done

nodes=(); node_conf=""; port=$BASE
add_nodes() {  # prefix count cpus memory-MB gres
  local i
  for ((i = 1; i <= $2; i++)); do
    port=$((port + 1)); nodes+=("$1-$i")
    node_conf+="NodeName=$1-$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port"
    node_conf+=" CPUs=$3 RealMemory=$4${5:+ Gres=$5} State=UNKNOWN"$'\n'
  done
}
add_nodes a100 "$N_A100" 64 512000 gpu:a100_80:8
add_nodes v100 "$N_V100" 32 256000 gpu:v100:4
add_nodes cpu "$N_CPU" 16 64000 ""
[ ${#nodes[@]} -gt 0 ] || { say "no nodes configured"; exit 1; }
hosts() { if [ "$2" -gt 1 ]; then echo "$1-[1-$2]"; elif [ "$2" = 1 ]; then echo "$1-1"; fi; }
A100=$(hosts a100 "$N_A100"); V100=$(hosts v100 "$N_V100"); CPU=$(hosts cpu "$N_CPU")

preemption=""; urgent=""
if [ "${LOCAL_SLURM_PREEMPT:-0}" = 1 ]; then
  preemption=$'PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE'
  [ -n "$A100" ] && urgent="PartitionName=gpu-a100-urgent Nodes=$A100 PriorityTier=10 DefaultTime=01:00:00 MaxTime=7-00:00:00 State=UP"
fi

CONF="$S/etc/slurm.conf"
cat >"$CONF.new" <<CONF
# generated by start-local-slurm.sh
ClusterName=cplocal
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$BASE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire (minimum 5 s) is also how long a requeued job waits before it may run again
AuthInfo=socket=$S/munge/munge.sock,cred_expire=5
StateSaveLocation=$S/ctld
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
# cgroup plugins do not work in containers and small VMs: jobs would never start
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
PropagateResourceLimits=NONE
MpiDefault=none
# no slurmdbd: sacct/sshare have no data; finished jobs go to a text file instead
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$S/log/jobcomp.txt
# every logical node advertises the sizes below, not this machine's hardware
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
GresTypes=gpu
ReturnToService=2
# schedule quickly: tests wait on it (the controller still ticks once a second)
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=1,bf_resolution=60,default_queue_depth=1000
PriorityType=priority/multifactor
PriorityWeightJobSize=1000
PriorityWeightPartition=1000
PriorityWeightQOS=1000
PriorityMaxAge=1-0
PriorityDecayHalfLife=1-0
MinJobAge=300
MaxJobCount=20000
KillWait=5
InactiveLimit=0
SlurmdTimeout=120
MessageTimeout=10
$preemption
$node_conf
${A100:+PartitionName=gpu-a100 Nodes=$A100 DefaultTime=01:00:00 MaxTime=7-00:00:00 State=UP}
${V100:+PartitionName=gpu-v100 Nodes=$V100 DefaultTime=01:00:00 MaxTime=7-00:00:00 State=UP}
$urgent
${CPU:+PartitionName=debug Nodes=$CPU DefaultTime=00:10:00 MaxTime=00:30:00 Default=YES State=UP}
CONF

cat >"$S/etc/gres.conf.new" <<GRES
# generated by start-local-slurm.sh: fake GPUs, each a symlink to /dev/null
AutoDetect=off
${A100:+NodeName=$A100 Name=gpu Type=a100_80 File=$S/dev/gpu[0-7]}
${V100:+NodeName=$V100 Name=gpu Type=v100 File=$S/dev/gpu[0-3]}
GRES

export SLURM_CONF="$CONF"
changed=0
for f in slurm.conf gres.conf; do cmp -s "$S/etc/$f.new" "$S/etc/$f" || changed=1; done
if [ $changed = 1 ] && { alive "$S/run/slurmctld.pid" || ls "$S"/run/slurmd-*.pid >/dev/null 2>&1; }; then
  say "configuration changed: stopping the running cluster first"
  "$HERE/stop-local-slurm.sh" "$S"
fi
for f in slurm.conf gres.conf; do mv -f "$S/etc/$f.new" "$S/etc/$f"; done

# ---------------------------------------------------------------- daemons
if ! alive "$S/run/slurmctld.pid" && port_in_use "$BASE"; then
  say "port $BASE is taken (another cluster? set LOCAL_SLURM_PORT_BASE)"; exit 1
fi
if ! alive "$S/munge/munged.pid"; then
  [ -s "$S/munge/munge.key" ] || mungekey -c -k "$S/munge/munge.key" -b 1024 >/dev/null 2>&1
  chmod 600 "$S/munge/munge.key"
  munged --socket="$S/munge/munge.sock" --key-file="$S/munge/munge.key" \
    --log-file="$S/munge/munged.log" --pid-file="$S/munge/munged.pid" \
    --seed-file="$S/munge/munged.seed"
fi
alive "$S/run/slurmctld.pid" || slurmctld -f "$CONF"
for n in "${nodes[@]}"; do
  mkdir -p "$S/spool/$n"
  alive "$S/run/slurmd-$n.pid" || slurmd -N "$n" -f "$CONF"
done

# ---------------------------------------------------------------- ready?
deadline=$((SECONDS + TIMEOUT))
while :; do
  states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u || true)
  total=$(printf '%s\n' "$states" | grep -c . || true)
  usable=$(printf '%s\n' "$states" | grep -cE ' (idle|mix|alloc)$' || true)
  [ "$total" -eq "${#nodes[@]}" ] && [ "$usable" -eq "$total" ] && break
  if ! alive "$S/run/slurmctld.pid"; then
    say "slurmctld is not running:"; tail -n 5 "$S/log/slurmctld.log" >&2 || true; exit 1
  fi
  if [ $SECONDS -ge $deadline ]; then
    say "nodes not usable after ${TIMEOUT}s:"; printf '%s\n' "$states" >&2
    tail -n 20 "$S/log/slurmctld.log" >&2 || true
    exit 1
  fi
  sleep 0.2
done
say "ready: ${#nodes[@]} nodes, state in $S"

printf 'export SLURM_CONF=%s\nexport LOCAL_SLURM_DIR=%s\n' "$CONF" "$S" >"$S/env.sh"
cat "$S/env.sh"
