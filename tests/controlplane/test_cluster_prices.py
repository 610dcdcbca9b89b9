"""Two clusters pricing one GPU type differently (on-premises at 1 per GPU-hour, a cloud at
10): a run counts at its own cluster's price, in cost budgets and in fairshare ``byCost``.
Both took one price per type name, the last pool's, so 16 cloud GPU-hours counted 16, not
160, and a budget of 100 let the next job start (user trial, high)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, pool, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]
T0 = datetime(2026, 11, 2, tzinfo=UTC)
LATER = (T0 + timedelta(hours=2)).isoformat()


def _priced(name: str, price: float) -> dict[str, Any]:
    return cluster(
        name,
        pools=[pool(f"{name}-a100", nodes=1)],
        gpu_types={"a100_80": {"memoryGiB": 80, "costPerGpuHour": price}},
    )


def _specs(root: Path, *more: dict[str, Any]) -> Path:
    """p1 ran 8 GPUs on the cloud for 2 h, p2 as many on-premises."""
    fairshare = {"byCost": True}
    return write_specs(
        root,
        [
            _priced("cloud", 10.0),
            _priced("onprem", 1.0),
            project("p1", gpus=8, budget={"costPerMonth": 100}, fairshare=fairshare),
            project("p2", gpus=8, fairshare=fairshare),
            workload("c1", "p1", gpus=8, clusters=["cloud"], walltime="2h"),
            workload("o1", "p2", gpus=8, clusters=["onprem"], walltime="2h"),
            *more,
        ],
    )


def test_a_run_costs_what_its_own_cluster_charges(tmp_path: Path, capsys: Capsys) -> None:
    specs = _specs(tmp_path / "s")
    done = cp(capsys, "apply", specs, "--auto-approve", "--now", T0.isoformat())
    assert done.code == 0, done.out + done.err

    usage = cp(capsys, "usage", specs, "--json", "--now", LATER).json()["projects"]
    assert usage["p1"]["monthCost"] == pytest.approx(160)
    assert usage["p2"]["monthCost"] == pytest.approx(16)
    assert usage["p1"]["share"] == pytest.approx(10 * usage["p2"]["share"])

    _specs(specs, workload("c2", "p1", gpus=8, clusters=["cloud"], walltime="2h"))
    plan = cp(capsys, "plan", specs, "--json", "--now", LATER).json()
    assert [(p["workload"], p["reason"]["code"]) for p in plan["pending"]] == [
        ("p1/c2", "over-budget")
    ]
    assert "spent 160.00 of its 100.00 cost units" in plan["pending"][0]["reason"]["message"]


def test_a_run_keeps_its_price_once_its_cluster_has_left_the_specs(
    tmp_path: Path, capsys: Capsys
) -> None:
    """The cloud's runs were counted at the other cluster's price of the type (or 0 for a
    type only the cloud had) once its Cluster document was removed: retiring a cluster
    gave a budget back (user trial, high)."""
    specs = _specs(tmp_path / "s")
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", T0.isoformat()).code == 0
    assert cp(capsys, "observe", specs, "--now", LATER).code == 0  # the runs are recorded
    write_specs(
        specs,
        [
            _priced("onprem", 1.0),
            project("p1", gpus=8, budget={"costPerMonth": 100}),
            project("p2", gpus=8),
            workload("o1", "p2", gpus=8, clusters=["onprem"], walltime="2h"),
        ],
    )
    usage = cp(capsys, "usage", specs, "--json", "--now", LATER).json()["projects"]
    assert usage["p1"]["monthCost"] == pytest.approx(160)
    assert usage["p2"]["monthCost"] == pytest.approx(16)
