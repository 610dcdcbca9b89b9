"""Golden plans: the quickstart example's plan, in JSON and Markdown, must not drift.

Cases are discovered by directory (tests/golden/<case>/ names an example under examples/).
Regenerate after an intended change with ``UPDATE_GOLDEN=1 pytest tests/controlplane/test_golden.py``
and review the diff like any other code change.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
NOW = "2026-11-22T10:00:00+00:00"
CASES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


def _normalise(plan: dict) -> dict:  # type: ignore[type-arg]
    plan["gitCommit"] = None  # depends on the checkout, not on the specs
    plan["solver"]["wallSeconds"] = 0.0
    plan["digest"] = None  # seals the two above
    return plan


def _check(path: Path, text: str) -> None:
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path} drifted; review and UPDATE_GOLDEN=1 if intended"


@pytest.mark.parametrize("case", CASES)
def test_golden_plan(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # spec warnings name their files relative to here
    specs = tmp_path / case
    shutil.copytree(ROOT / "examples" / case, specs, ignore=shutil.ignore_patterns(".cp"))
    first = cp(capsys, "plan", specs, "--json", "--now", NOW)
    assert first.code == 0, first.err
    _check(GOLDEN / case / "plan.json", json.dumps(_normalise(first.json()), indent=2) + "\n")
    md = cp(capsys, "plan", specs, "--markdown", "--now", NOW)
    _check(GOLDEN / case / "plan.md", md.out)
    # after applying, the next plan is the golden "settled" one: nothing to do
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", NOW).code == 0
    settled = cp(capsys, "plan", specs, "--json", "--now", NOW, "--detailed-exitcode")
    assert settled.code == 0, "apply then plan must be empty"
    _check(GOLDEN / case / "settled.json", json.dumps(_normalise(settled.json()), indent=2) + "\n")
