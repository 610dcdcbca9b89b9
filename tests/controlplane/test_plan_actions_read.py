"""`cp history --verify` compares every stored plan's actions with their rows. It read
each plan whole, though a busy org's plan is mostly its list of waiting work (1.1 MB of a
steady loop's plan with five actions): the actions alone are read now, the same ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from controlplane.plan import Plan
from controlplane.store.chain import actions_of
from tests.builders.cli import cp, ok

ROOT = Path(__file__).resolve().parents[2]


def test_the_actions_read_alone_are_the_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    text = ok(cp(capsys, "plan", specs, "--json")).out
    plan = Plan.from_json(text)
    assert len(plan.actions) == 10 and plan.pending
    assert actions_of(text) == plan.execution_order()
    assert actions_of(plan.model_copy(update={"actions": []}).to_json()) == []
