#!/usr/bin/env bash
# The whole test suite, installs included: Debian packages for the real Slurm the
# integration tests start (slurmctld, slurmd, munge) and PostgreSQL for the store tests,
# then the Python environment.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"
need=()
for b in slurmctld slurmd sbatch munged; do
  command -v "$b" >/dev/null 2>&1 || need=(slurmctld slurmd slurm-client munge)
done
# PostgreSQL for the store's integration tests (tests/postgres)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
scripts/bootstrap.sh
.venv/bin/lint-imports --config pyproject.toml
exec .venv/bin/pytest "$@"
