"""``cp usage``: sshare-like usage per project and department, computed by the planner's
own site-policy functions over the runs the store recorded (or a snapshot's records)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, department, project, workload
from tests.builders.cli import cp, write_specs
from tests.builders.snapshots import write_snapshot

Capsys = pytest.CaptureFixture[str]
ROOT = Path(__file__).resolve().parents[3]
DAY = 86400
CAPACITY = 4 * 8 + 8 * 4  # the builders' cluster: every node idle and schedulable


def usage(gpu_hours: float, project: str, ended: str, gpu_type: str) -> dict[str, Any]:
    return {"project": project, "gpuHours": gpu_hours, "endedAt": ended, "gpuType": gpu_type}


@pytest.fixture
def report(tmp_path: Path, capsys: Capsys) -> dict[str, Any]:
    specs = write_specs(
        tmp_path / "specs",
        [
            cluster(),
            department("science", gpus=16),
            project(
                "chem",
                gpus=8,
                department="science",
                fairshare={"halfLife": "1d"},
                budget={"gpuHoursPerMonth": 100},
            ),
            project(
                "bio",
                gpus=8,
                department="science",
                fairshare={"halfLife": "2d"},
                budget={"costPerMonth": 50},
            ),
            workload("w", "chem", gpus=1),
        ],
    )
    snapshot = write_snapshot(
        tmp_path / "snap.json",
        [],
        usage=[
            usage(10, "chem", "2026-11-21T10:00:00+00:00", "a100_80"),  # one half-life ago
            usage(4, "chem", "2026-10-31T12:00:00+00:00", "v100"),  # last month
            usage(20, "bio", "2026-11-20T10:00:00+00:00", "v100"),  # one half-life ago
            usage(30, "bio", "2026-11-22T09:00:00+00:00", "a100_80"),  # an hour ago
        ],
    )
    res = cp(capsys, "usage", specs, "--observed", snapshot, "--json")
    assert res.code == 0, res.err
    return res.json()  # type: ignore[no-any-return]


def test_decayed_usage_month_and_budget(report: dict[str, Any]) -> None:
    chem, bio = report["projects"]["chem"], report["projects"]["bio"]
    assert report["month"] == "November 2026"
    old = 4 * 0.5 ** ((21 * DAY + 22 * 3600) / DAY)  # ended 21 days 22 hours ago
    assert chem["halfLifeSeconds"] == DAY
    assert chem["decayedGpuHours"] == pytest.approx(5 + old)
    assert (chem["monthGpuHours"], chem["monthCost"]) == (10, 30)  # a100_80 costs 3.0 an hour
    assert chem["byGpuType"] == [{"gpuType": "a100_80", "gpuHours": 10, "cost": 30}]
    assert chem["budget"] == {
        "unit": "gpu-hours",
        "perMonth": 100,
        "used": 10,
        "left": 90,
        "spent": None,
    }
    # the share of the cluster: decayed GPU-hours over what 64 GPUs deliver in the window
    assert chem["share"] == pytest.approx((5 + old) / (CAPACITY * 24 / math.log(2)))

    assert bio["decayedGpuHours"] == pytest.approx(10 + 30 * 0.5 ** (1 / 48))
    assert (bio["monthGpuHours"], bio["monthCost"]) == (50, 110)
    assert bio["byGpuType"] == [
        {"gpuType": "a100_80", "gpuHours": 30, "cost": 90},
        {"gpuType": "v100", "gpuHours": 20, "cost": 20},
    ]
    budget = bio["budget"]
    assert (budget["unit"], budget["left"], budget["spent"]["code"]) == ("cost", 0, "over-budget")


def test_departments_add_up_their_projects(report: dict[str, Any]) -> None:
    science, projects = report["departments"]["science"], report["projects"]
    assert science["decayedGpuHours"] == pytest.approx(
        projects["chem"]["decayedGpuHours"] + projects["bio"]["decayedGpuHours"]
    )
    assert (science["monthGpuHours"], science["monthCost"]) == (60, 140)
    assert science["share"] == pytest.approx(projects["chem"]["share"] + projects["bio"]["share"])
    assert science["deserved"] == 16 and science["budget"] is None


def test_usage_comes_from_the_runs_the_store_recorded(
    tmp_path: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Applied at 10:00 on the simulator, looked at two hours later: every running job has
    used its GPUs for two hours, each moment of it decayed by its own age."""
    q = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", q, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", q, "--auto-approve", "--now", "2026-11-22T10:00:00Z").code == 0
    status = cp(capsys, "status", q, "--json", "--now", "2026-11-22T12:00:00Z").json()
    doc = cp(capsys, "usage", q, "--json", "--now", "2026-11-22T12:00:00Z").json()
    for name, row in doc["projects"].items():
        held = status["projects"][name]["allocated"]
        assert row["monthGpuHours"] == pytest.approx(held * 2), name
        life = row["halfLifeSeconds"] / 3600
        decayed = held * life / math.log(2) * (1 - 0.5 ** (2 / life))  # below held * 2
        assert row["decayedGpuHours"] == pytest.approx(decayed, rel=1e-4), name
    ads = doc["projects"]["ads"]["budget"]
    assert ads["left"] == pytest.approx(5000 - 2 * status["projects"]["ads"]["allocated"])
    monkeypatch.setenv("COLUMNS", "100")
    human = cp(capsys, "usage", q, "--now", "2026-11-22T12:00:00Z")
    assert human.code == 0 and "November 2026" in human.out
    assert "research (dept)" in human.out and "By GPU type" in human.out
