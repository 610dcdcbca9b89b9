"""The layout stays readable: modules small enough to read in one sitting, and the
solvers' top level a short list of shared concepts (the cycle's steps live in its
subpackages)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["specs", "solvers", "adapters", "controlplane", "benchmarks"]
MAX_LINES = 450
MAX_SOLVER_MODULES = 10


def test_no_module_outside_tests_is_longer_than_450_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_solvers_top_level_holds_at_most_ten_modules() -> None:
    modules = sorted(p.name for p in (ROOT / "solvers").glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= MAX_SOLVER_MODULES, modules


def test_every_benchmark_imports() -> None:
    """Benchmarks are not run by the suite; they must at least keep up with the code."""
    import importlib

    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        importlib.import_module(f"benchmarks.{path.stem}")
