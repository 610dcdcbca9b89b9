"""The policy section's headline counts what moved: a queue shown for its policy change
whose fair share and allocation stayed as they were is no "allocation changed" (trial T:
a budget lowered read "1 policy change, 1 allocation changed" over a row 12 -> 12, 8 -> 8)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from controlplane.cli.views.policy import summary
from controlplane.plan import PolicyChange, PolicyDiff, ShareChange
from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[3]
Capsys = pytest.CaptureFixture[str]


def _row(name: str, fair: tuple[float, float], held: tuple[float, float]) -> ShareChange:
    return ShareChange(
        kind="project",
        name=name,
        fair_share_before=fair[0],
        fair_share_after=fair[1],
        allocated_before=held[0],
        allocated_after=held[1],
    )


def test_a_row_where_nothing_moved_is_not_counted() -> None:
    diff = PolicyDiff(
        against="the plan last applied (abc)",
        changes=[
            PolicyChange(
                kind="project",
                name="ads",
                field="budget.gpuHoursPerMonth",
                before=5000.0,
                after=4000.0,
            )
        ],
        shares=[_row("ads", (12, 12), (8, 8))],
    )
    assert summary(diff) == "Against the plan last applied (abc): 1 policy change."
    rows = [*diff.shares, _row("cv", (8, 6), (8, 6)), _row("nlp", (20, 20), (16, 18))]
    assert summary(diff.model_copy(update={"shares": rows})) == (
        "Against the plan last applied (abc): 1 policy change, 1 fair share moved, "
        "1 allocation changed."
    )


def test_a_pure_rename_shows_no_fair_share_row(tmp_path: Path, capsys: Capsys) -> None:
    """A project renamed (renamedFrom), nothing else changed: its name is the policy
    change, and no "Fair shares" row "8 -> 8, 11 -> 11" follows it."""
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-12-01T00:00:00Z").code == 0
    org = specs / "org.yaml"
    org.write_text(
        org.read_text().replace(
            "metadata: {name: vision}\nspec:\n",
            "metadata: {name: cv}\nspec:\n  renamedFrom: [vision]\n",
        )
    )
    for path in (specs / "workloads").glob("*.yaml"):
        path.write_text(path.read_text().replace("project: vision", "project: cv"))
    made = cp(capsys, "plan", specs, "--now", "2026-12-01T00:05:00Z")
    assert made.code == 0
    said = " ".join(made.out.split())
    assert "project cv name vision cv" in said, said
    assert "Fair shares" not in said, said
