"""`cp history` and `cp explain` read the actions with the plan each belongs to: the
plan's id and time, never its body. Each row carried its plan's whole body (a busy org's
is up to a megabyte), so `cp history --limit 3000` peaked at 1.6 GB (trial U)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from controlplane.workflow import open_store
from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[2]
Capsys = pytest.CaptureFixture[str]


def test_history_rows_leave_the_plan_body_unread(tmp_path: Path, capsys: Capsys) -> None:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    store = open_store(specs, None)
    with store:
        rows = store.history(limit=100)
    assert len(rows) >= 10
    for action, plan, _ in rows:
        assert plan.id and plan.created_at and action.workload
        assert "body" not in plan.__dict__ and "packed" not in plan.__dict__, "body read"
    shown = cp(capsys, "history", specs)
    assert shown.code == 0 and "plan:" in shown.out
