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
# With LOCAL_SLURM_ACCOUNTING=1 the cluster also keeps accounting: a private MariaDB
# (datadir, socket and pid file in STATE_DIR/db, its own port, run as root) behind a
# slurmdbd, so sacct, sacctmgr, sshare and fair-share work. The cluster is registered
# with an account per LOCAL_SLURM_ACCOUNTS, and root may submit to each (--account=).
#
# Environment knobs (all optional):
#   LOCAL_SLURM_PORT_BASE   slurmctld port; node i listens on BASE+i (default 26817);
#                           with accounting, slurmdbd BASE+90 and MariaDB BASE+91
#   LOCAL_SLURM_A100_NODES  nodes in partition gpu-a100, 8 x gpu:a100_80 each (2)
#   LOCAL_SLURM_V100_NODES  nodes in partition gpu-v100, 4 x gpu:v100 each    (2)
#   LOCAL_SLURM_CPU_NODES   nodes in partition debug (default, MaxTime 30 min) (2)
#   LOCAL_SLURM_PREEMPT=1   Slurm's own partition-priority preemption (REQUEUE) and a
#                           partition gpu-a100-urgent (PriorityTier=10) on the a100 nodes
#   LOCAL_SLURM_ACCOUNTING=1  MariaDB + slurmdbd (installs mariadb-server and slurmdbd
#                           if missing; about 20 s the first time)
#   LOCAL_SLURM_ACCOUNTS    accounts to create when accounting is on, apart by spaces or
#                           commas (default cp-test)
#   LOCAL_SLURM_FRESH=1     stop the cluster and wipe its state first (the accounting
#                           database too)
#   LOCAL_SLURM_MIN_JOB_AGE seconds slurmctld remembers an ended job (default 300; 2 at
#                           least): small, only accounting knows of ended jobs
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
ACCOUNTING="${LOCAL_SLURM_ACCOUNTING:-0}"
ACCOUNTS="${LOCAL_SLURM_ACCOUNTS:-cp-test}"
MIN_JOB_AGE="${LOCAL_SLURM_MIN_JOB_AGE:-300}"
DBD_PORT=$((BASE + 90)); DB_PORT=$((BASE + 91))
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
wait_until() {  # seconds what command...: run the command every 0.2 s until it succeeds
  local secs=$1 what=$2; shift 2
  local limit=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $limit ] || { say "$what is not ready after ${secs}s"; return 1; }
    sleep 0.2
  done
}
sql() { mariadb --no-defaults --socket="$S/db/mysqld.sock" -uroot -N -B -e "$1"; }

# ---------------------------------------------------------------- packages
pkgs=()
for bin in slurmctld slurmd slurmstepd sbatch squeue sinfo scontrol scancel munged mungekey; do
  command -v "$bin" >/dev/null 2>&1 || pkgs=(slurmctld slurmd slurm-client munge)
done
if [ "$ACCOUNTING" = 1 ]; then
  # sacct, sacctmgr and sshare come with slurm-client; mariadb-server brings the client
  for bin in slurmdbd mariadbd mariadb-install-db mariadb; do
    command -v "$bin" >/dev/null 2>&1 || { pkgs+=(slurmdbd mariadb-server); break; }
  done
fi
if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "${LOCAL_SLURM_NO_INSTALL:-0}" = 1 ]; then
    say "missing packages (apt-get install ${pkgs[*]})"; exit 1
  fi
  say "installing ${pkgs[*]} (log: $S/apt.log)"
  export DEBIAN_FRONTEND=noninteractive
  t0=$SECONDS
  # Debian starts a service from its package's postinst unless policy-rc.d says no: a
  # system-wide MariaDB on port 3306 would outlive stop-local-slurm.sh. Containers
  # usually ship this file already; add one just for the install where they do not.
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d; printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"
  fi
  trap '[ -z "$policy" ] || rm -f "$policy"' EXIT
  # try without refreshing the lists first: on a machine that has them it takes a second
  if ! apt-get install -y -q --no-install-recommends "${pkgs[@]}" >>"$S/apt.log" 2>&1; then
    apt-get update -q >>"$S/apt.log" 2>&1 &&
      apt-get install -y -q --no-install-recommends "${pkgs[@]}" >>"$S/apt.log" 2>&1 ||
      { say "apt-get failed, see $S/apt.log"; exit 1; }
  fi
  [ -z "$policy" ] || rm -f "$policy"
  trap - EXIT
  say "installed in $((SECONDS - t0)) s"
fi

# ---------------------------------------------------------------- layout
if [ "${LOCAL_SLURM_FRESH:-0}" = 1 ] && [ -d "$S/etc" ]; then
  "$HERE/stop-local-slurm.sh" "$S" || true
  rm -rf "$S/etc" "$S/ctld" "$S/spool" "$S/run" "$S/log" "$S/munge" "$S/dev" "$S/db" "$S/env.sh"
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

# the nodes' ports must stay below those of slurmdbd (BASE+90) and MariaDB (BASE+91)
[ "${#nodes[@]}" -lt 90 ] || { say "at most 89 nodes"; exit 1; }

preemption=""; urgent=""
if [ "${LOCAL_SLURM_PREEMPT:-0}" = 1 ]; then
  preemption=$'PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE'
  [ -n "$A100" ] && urgent="PartitionName=gpu-a100-urgent Nodes=$A100 PriorityTier=10 DefaultTime=01:00:00 MaxTime=7-00:00:00 State=UP"
fi

if [ "$ACCOUNTING" = 1 ]; then
  # one TRES per GPU type as well as the total, so AllocTRES says which GPUs a job had
  gpu_tres="gres/gpu${A100:+,gres/gpu:a100_80}${V100:+,gres/gpu:v100}"
  accounting="# slurmdbd keeps every job: sacct, sacctmgr and sshare work, fair-share counts
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
# slurmctld and the clients reach slurmdbd through the munge socket named here
AccountingStoragePass=$S/munge/munge.sock
AccountingStorageTRES=$gpu_tres
# without job_comment the database drops --comment, where the adapter keeps its tag
AccountingStoreFlags=job_comment
# a job may only run under an account that exists (sbatch --account= is checked),
# and sacctmgr limits such as GrpTRES=gres/gpu=4 hold
AccountingStorageEnforce=associations,limits,qos
# fair-share and age count only with slurmdbd; usage is recomputed every minute
PriorityWeightFairshare=10000
PriorityWeightAge=1000
PriorityCalcPeriod=1
# finished jobs still go to a text file too"
  # /proc based per-step usage (MaxRSS, TRESUsageIn...); the cgroup variant fails here
  gather=jobacct_gather/linux
else
  accounting="# no slurmdbd: sacct/sshare have no data; finished jobs go to a text file instead
AccountingStorageType=accounting_storage/none"
  gather=jobacct_gather/none
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
JobAcctGatherType=$gather
PropagateResourceLimits=NONE
MpiDefault=none
$accounting
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
MinJobAge=${MIN_JOB_AGE}
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

files=(slurm.conf gres.conf)
if [ "$ACCOUNTING" = 1 ]; then
  # the database password is made once per STATE_DIR; MariaDB listens on 127.0.0.1 only
  mkdir -p "$S/db"
  [ -s "$S/db/slurm.pass" ] || (umask 077; od -An -N12 -tx1 /dev/urandom | tr -d ' \n' >"$S/db/slurm.pass")
  # slurmdbd reads slurmdbd.conf from the folder of $SLURM_CONF and refuses it unless
  # only its owner can read it (it holds the database password)
  (umask 077; cat >"$S/etc/slurmdbd.conf.new" <<DBD
# generated by start-local-slurm.sh
AuthType=auth/munge
AuthInfo=socket=$S/munge/munge.sock
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
DebugLevel=info
LogFile=$S/log/slurmdbd.log
PidFile=$S/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(cat "$S/db/slurm.pass")
StorageLoc=slurm_acct_db
DBD
  )
  files+=(slurmdbd.conf)
else
  rm -f "$S/etc/slurmdbd.conf"
fi

export SLURM_CONF="$CONF"
changed=0
for f in "${files[@]}"; do cmp -s "$S/etc/$f.new" "$S/etc/$f" || changed=1; done
if [ $changed = 1 ] && { alive "$S/run/slurmctld.pid" || ls "$S"/run/slurmd-*.pid >/dev/null 2>&1 ||
     alive "$S/run/slurmdbd.pid" || alive "$S/db/mariadbd.pid"; }; then
  say "configuration changed: stopping the running cluster first"
  "$HERE/stop-local-slurm.sh" "$S"
fi
for f in "${files[@]}"; do mv -f "$S/etc/$f.new" "$S/etc/$f"; done

# ---------------------------------------------------------------- daemons
if ! alive "$S/run/slurmctld.pid" && port_in_use "$BASE"; then
  say "port $BASE is taken (another cluster? set LOCAL_SLURM_PORT_BASE)"; exit 1
fi
if [ "$ACCOUNTING" = 1 ]; then
  if ! alive "$S/run/slurmdbd.pid" && port_in_use "$DBD_PORT"; then
    say "port $DBD_PORT (slurmdbd) is taken (set LOCAL_SLURM_PORT_BASE)"; exit 1
  fi
  if ! alive "$S/db/mariadbd.pid" && port_in_use "$DB_PORT"; then
    say "port $DB_PORT (MariaDB) is taken (set LOCAL_SLURM_PORT_BASE)"; exit 1
  fi
fi
if ! alive "$S/munge/munged.pid"; then
  [ -s "$S/munge/munge.key" ] || mungekey -c -k "$S/munge/munge.key" -b 1024 >/dev/null 2>&1
  chmod 600 "$S/munge/munge.key"
  munged --socket="$S/munge/munge.sock" --key-file="$S/munge/munge.key" \
    --log-file="$S/munge/munged.log" --pid-file="$S/munge/munged.pid" \
    --seed-file="$S/munge/munged.seed"
fi

if [ "$ACCOUNTING" = 1 ]; then
  # The database first: slurmdbd gives up if it cannot connect, and slurmctld must find
  # its cluster registered in slurmdbd when it starts.
  mkdir -p "$S/db"
  if [ ! -d "$S/db/data/mysql" ]; then
    mariadb-install-db --no-defaults --user=root --datadir="$S/db/data" --skip-test-db \
      >"$S/log/mariadb-install.log" 2>&1 ||
      { say "mariadb-install-db failed, see $S/log/mariadb-install.log"; exit 1; }
  fi
  if ! alive "$S/db/mariadbd.pid"; then
    # A foreground server: detach it from this shell and from the caller's pipes.
    # Small caches (the defaults take 120 MB of RAM; slurmdbd logs that it would like
    # bigger ones, which a test cluster does not need); flushing the log once a second
    # is plenty for a throw-away database; slurmdbd wants innodb_lock_wait_timeout >= 900.
    setsid mariadbd --no-defaults --user=root --datadir="$S/db/data" \
      --socket="$S/db/mysqld.sock" --port="$DB_PORT" --bind-address=127.0.0.1 \
      --pid-file="$S/db/mariadbd.pid" --log-error="$S/log/mariadbd.log" \
      --skip-name-resolve --skip-log-bin --performance-schema=OFF --max-connections=50 \
      --innodb-buffer-pool-size=16M --innodb-log-file-size=16M --innodb-log-buffer-size=2M \
      --key-buffer-size=1M --aria-pagecache-buffer-size=8M --table-open-cache=200 \
      --innodb-flush-log-at-trx-commit=2 --innodb-lock-wait-timeout=900 \
      </dev/null >>"$S/log/mariadbd.log" 2>&1 &
    if ! wait_until "$TIMEOUT" mariadbd sql "SELECT 1"; then
      tail -n 5 "$S/log/mariadbd.log" >&2; exit 1
    fi
  fi
  # slurmdbd connects over TCP (StorageHost=127.0.0.1), as the user it will find here
  sql "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
       CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1';
       ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$(cat "$S/db/slurm.pass")';
       GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
    { say "could not create the slurm_acct_db database"; exit 1; }
  if ! alive "$S/run/slurmdbd.pid"; then
    slurmdbd    # daemonizes; finds slurmdbd.conf next to $SLURM_CONF
    # the first start creates the tables (a few seconds); sacctmgr answers after that
    if ! wait_until "$TIMEOUT" slurmdbd sacctmgr -n -P show cluster format=cluster; then
      tail -n 5 "$S/log/slurmdbd.log" >&2; exit 1
    fi
  fi
  # Register what is missing: the cluster (which also creates account root with user
  # root), then each account with root as a user, so `sbatch --account=NAME` works.
  assocs=$(sacctmgr -n -P show associations format=cluster,account,user) ||
    { say "sacctmgr cannot reach slurmdbd"; tail -n 5 "$S/log/slurmdbd.log" >&2; exit 1; }
  if ! grep -q '^cplocal|' <<<"$assocs"; then
    sacctmgr -i add cluster cplocal >/dev/null
  fi
  for a in ${ACCOUNTS//,/ }; do  # names apart by spaces or commas
    grep -qx "cplocal|$a|" <<<"$assocs" ||
      sacctmgr -i add account "$a" Cluster=cplocal Description=local-test Organization=local >/dev/null ||
      { say "sacctmgr could not add account $a"; exit 1; }
    grep -qx "cplocal|$a|root" <<<"$assocs" ||
      sacctmgr -i add user root Account="$a" Cluster=cplocal >/dev/null ||
      { say "sacctmgr could not add user root to account $a"; exit 1; }
  done
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
