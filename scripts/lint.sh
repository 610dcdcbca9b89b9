#!/usr/bin/env bash
# Static checks, all of which must be clean: ruff (lint and format), mypy on the four
# packages (strict on specs and solvers) and the benchmarks, import-linter's contracts. Run by
# scripts/test.sh before the tests, and by pre-commit (.pre-commit-config.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
"$bin/ruff" check --quiet .
"$bin/ruff" format --check --quiet .
"$bin/mypy" --no-error-summary specs solvers controlplane adapters
"$bin/mypy" --no-error-summary -p benchmarks  # a namespace package: by package name
"$bin/lint-imports" --config pyproject.toml --no-cache >/dev/null || {
  "$bin/lint-imports" --config pyproject.toml --no-cache; exit 1; }
echo "lint: ruff, ruff format, mypy, import-linter clean"
