"""A GPU type's price (``gpuTypes.<type>.costPerGpuHour``) is site policy: a plan names a
change of it among its policy changes.

A pull request that raised the A100 price moves every cost budget and ``byCost`` fair
share, yet the plan that acted on it listed no policy change, and ``--base`` showed only
the raw field path (user trial). Both sides now say "price of a100_80 per GPU-hour" on the
cluster, and that the new price counts from when it is first observed: the store never
re-prices GPU-hours used before (tests/controlplane/test_price_changes.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controlplane.impact import table_changes
from controlplane.plan import Plan, PolicyChange, SolverReport
from tests.builders import cluster, pool, project, workload
from tests.builders.cli import cp, ok, write_specs

Capsys = pytest.CaptureFixture[str]
NOW = "2027-03-01T00:00:00+00:00"
LATER = "2027-03-01T01:00:00+00:00"
ROW = {
    "kind": "cluster",
    "name": "sim",
    "field": "gpuTypes.a100_80.costPerGpuHour",
    "before": 3.0,
    "after": 4.5,
}
NOTE = "GPU-hours used before keep the price of their day"


def specs(root: Path, price: float) -> Path:
    types = {"a100_80": {"memoryGiB": 80, "costPerGpuHour": price}}
    return write_specs(
        root,
        [
            cluster(pools=[pool("a100", nodes=2)], gpu_types=types),
            project("p", gpus=8, budget={"costPerMonth": 400.0}),
            workload("w", "p", gpus=4, walltime="2d", command=["train"]),
        ],
    )


def test_a_price_changed_since_the_plan_last_applied_is_a_policy_change(
    tmp_path: Path, capsys: Capsys
) -> None:
    root = specs(tmp_path / "s", 3.0)
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", NOW))
    specs(root, 4.5)
    data: dict[str, Any] = ok(cp(capsys, "plan", root, "--json", "--now", LATER)).json()
    assert data["policy"]["changes"] == [ROW]
    text = ok(cp(capsys, "plan", root, "--now", LATER)).out
    assert "price of a100_80 per GPU-hour" in text and NOTE in text, text
    md = ok(cp(capsys, "plan", root, "--markdown", "--now", LATER)).out
    assert "| cluster `sim` | price of a100_80 per GPU-hour | 3 | 4.5 |" in md, md
    assert NOTE in md
    # applied, the new price is the one the next plan compares with: nothing changed
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", LATER))
    again: dict[str, Any] = ok(cp(capsys, "plan", root, "--json", "--now", LATER)).json()
    assert "policy" not in again, again["policy"]


def test_a_pull_request_that_changes_a_price_names_it(tmp_path: Path, capsys: Capsys) -> None:
    old, new = specs(tmp_path / "old", 3.0), specs(tmp_path / "new", 4.5)
    args = ("plan", new, "--base-dir", old, "--now", NOW)
    data: dict[str, Any] = ok(cp(capsys, *args, "--json")).json()
    assert data["policy"]["changes"] == [ROW]  # the JSON keeps the field as the specs spell it
    md = ok(cp(capsys, *args, "--markdown")).out
    assert "| cluster `sim` | price of a100_80 per GPU-hour | 3 | 4.5 |" in md, md
    assert NOTE in md
    text = ok(cp(capsys, *args)).out
    assert "price of a100_80 per GPU-hour" in text and NOTE in text, text


def _plan(prices: dict[str, dict[str, float]]) -> Plan:
    return Plan(
        id="p",
        created_at=datetime(2027, 3, 1, tzinfo=UTC),
        spec_digest="s",
        observed_digest="o",
        solver=SolverReport(engine="kai", status="OPTIMAL"),
        prices=prices,
    )


def test_prices_compared_where_both_plans_recorded_them() -> None:
    before = _plan({"sim": {"a100_80": 3.0, "v100": 1.0}, "gone": {"a100_80": 2.0}})
    after = _plan({"sim": {"a100_80": 3.0, "h100": 6.0}, "new": {"a100_80": 9.0}})
    assert table_changes(before, after) == [
        PolicyChange(kind="cluster", name="sim", field="gpuTypes.h100.costPerGpuHour", after=6.0),
        PolicyChange(kind="cluster", name="sim", field="gpuTypes.v100.costPerGpuHour", before=1.0),
    ]
    # a plan made before prices were recorded: no price reads as changed
    assert table_changes(_plan({}), after) == []
