"""`cp explain` stores the plan it explains (`cp show` finds it), but not again while the
newest stored plan is the same decision: an on-call engineer's explains stored a whole
plan each (335 KB a call on a 300-node org), and nothing ever removes them (trial U)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[3]
Capsys = pytest.CaptureFixture[str]


def _plans(specs: Path) -> int:
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        (count,) = db.execute("SELECT count(*) FROM plans").fetchone()
    return int(count)


def test_explaining_the_same_decision_again_stores_nothing_new(
    tmp_path: Path, capsys: Capsys
) -> None:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-12-01T00:00:00Z").code == 0
    before = _plans(specs)
    for at in ("00:01", "00:02", "00:03"):
        res = cp(
            capsys, "explain", "ads/ctr-train", "--dir", specs, "--now", f"2026-12-01T{at}:00Z"
        )
        assert res.code == 0 and "over-limit" in res.out, res.out
    assert _plans(specs) == before + 1, "one plan stored for the three explains"
    # the specs change: another decision, stored
    org = specs / "org.yaml"
    org.write_text(org.read_text().replace("limit: 12", "limit: 20", 1))
    assert (
        cp(capsys, "explain", "ads/ctr-train", "--dir", specs, "--now", "2026-12-01T00:04:00Z").code
        == 0
    )
    assert _plans(specs) == before + 2
