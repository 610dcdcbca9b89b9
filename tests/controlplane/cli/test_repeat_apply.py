"""`cp apply DIR` with nothing new to do shows the plan last applied (the store has it):
it read "Plan … made <hours ago>" with that plan's own policy changes ("Against the plan
last applied …: 1 policy change"), as if they were new (trial T). It says it is the plan
last applied, and what changed since (nothing)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[3]
Capsys = pytest.CaptureFixture[str]


def test_an_apply_with_nothing_new_says_it_shows_the_plan_last_applied(
    tmp_path: Path, capsys: Capsys
) -> None:
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    for at in ("00:00", "00:01"):  # started; then nothing to do
        done = cp(capsys, "apply", specs, "--auto-approve", "--now", f"2026-12-01T{at}:00Z")
        assert done.code == 0
    assert "No changes" in done.out, done.out
    org = specs / "org.yaml"
    org.write_text(org.read_text().replace("gpuHoursPerMonth: 5000", "gpuHoursPerMonth: 4000"))
    changed = cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-12-01T00:02:00Z")
    assert changed.code == 0 and "1 policy change" in changed.out, changed.out

    again = cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-12-01T00:05:00Z")
    assert again.code == 0
    said = " ".join(again.out.split())
    assert "policy change" not in said, said
    assert "the plan last applied (made 2026-12-01T00:02:00Z): nothing has changed since" in said


def test_the_plan_last_applied_is_said_even_when_made_at_this_very_time(
    tmp_path: Path, capsys: Capsys
) -> None:
    """Told by a flag, not by its time: with the same --now twice (a script's fixed clock,
    or two applies in one second) the plan last applied was made at the observation's
    time, and was shown as if new."""
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    for at in ("00:00", "00:01", "00:01"):  # started; nothing to do; the same again
        done = cp(capsys, "apply", specs, "--auto-approve", "--now", f"2026-12-01T{at}:00Z")
        assert done.code == 0
    said = " ".join(done.out.split())
    assert "the plan last applied (made 2026-12-01T00:01:00Z): nothing has changed since" in said
