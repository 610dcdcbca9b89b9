#!/usr/bin/env bash
# The whole test suite, installs included: Debian packages for the real Slurm the
# integration tests start (slurmctld, slurmd, munge), then the Python environment.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for b in slurmctld slurmd sbatch munged; do
  command -v "$b" >/dev/null 2>&1 || PATH="/usr/sbin:/sbin:$PATH" command -v "$b" >/dev/null 2>&1 || need=(slurmctld slurmd slurm-client munge)
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
scripts/bootstrap.sh
.venv/bin/lint-imports --config pyproject.toml
exec .venv/bin/pytest "$@"
