#!/usr/bin/env bash
# The main job on the bundled example: validate, plan, apply, plan again, history.
# Uses the embedded simulator and a SQLite store under examples/quickstart/.cp/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
ex=examples/quickstart
rm -rf "$ex/.cp"                      # start from an empty simulated cluster
run() { echo; echo "\$ cp $*"; .venv/bin/cp "$@"; }
run validate "$ex"
run plan "$ex" --out "$ex/.cp/plan.json"
run apply "$ex/.cp/plan.json" --dir "$ex"
run plan "$ex"                        # the world moved on: nothing left to do but wait
run history "$ex"
