#!/usr/bin/env bash
# The whole test suite, installs included: Debian packages for the real Slurm the
# integration tests start (slurmctld, slurmd, munge; slurmdbd and MariaDB for the
# accounting tests), PostgreSQL for the store tests and strace, then the Python
# environment; the static checks (scripts/lint.sh) before the tests; and the local Kubernetes control plane
# the k8s tests start (kube-apiserver & co. built from Debian's source package once per
# machine into ~/.cache/controlplane/k8s, keyed on the build recipe's hash: about 4
# minutes the first time, instant afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"
need=()
for b in slurmctld slurmd sbatch munged; do
  command -v "$b" >/dev/null 2>&1 || need=(slurmctld slurmd slurm-client munge)
done
# slurmdbd and MariaDB for usage from Slurm's accounting (tests/integration/slurm/test_accounting.py)
for b in slurmdbd mariadbd mariadb-install-db; do
  command -v "$b" >/dev/null 2>&1 || { need+=(slurmdbd mariadb-server); break; }
done
# strace counts the signals a checkpoint segment's command is sent (tests/adapters/slurm)
command -v strace >/dev/null 2>&1 || need+=(strace)
# PostgreSQL for the store's integration tests (tests/integration/postgres)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
scripts/bootstrap.sh
scripts/lint.sh
adapters/kubernetes/local/build-k8s.sh >/dev/null
exec .venv/bin/pytest "$@"
