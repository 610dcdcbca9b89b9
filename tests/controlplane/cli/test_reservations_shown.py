"""A node's reservations (a site's announced maintenance, read from Slurm at observe) are
shown where a user looks at nodes: ``cp get nodes`` and ``cp explain``.

The planner kept work off nodes whose window it would run into, yet ``cp get nodes`` showed
such a node plainly ``idle``, one under a window already under way too, and ``cp explain``
of a workload that waited named windows only where they stood between it and room it
would otherwise have had (user trial). Every window not over yet is shown, with its name,
start and end, on the nodes it covers; a snapshot file carries them here, as
``cp observe`` writes them from Slurm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, ok, write_specs
from tests.builders.snapshots import job, write_snapshot

Capsys = pytest.CaptureFixture[str]
MAINT = {
    "name": "maint-nov",
    "start": "2026-11-22T10:30:00+00:00",
    "end": "2026-11-22T14:00:00+00:00",
    "maintenance": True,
}
UNDER_WAY = {  # began before the snapshot's now (10:00)
    "name": "fw-upgrade",
    "start": "2026-11-22T09:00:00+00:00",
    "end": "2026-11-22T12:00:00+00:00",
}
OVER = {"name": "old", "start": "2026-11-21T09:00:00+00:00", "end": "2026-11-21T12:00:00+00:00"}
V100 = {"name": "v100-work", "start": "2026-11-22T11:00:00+00:00", "end": None}


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """Four 8-GPU A100 nodes, three under an announced maintenance, one under a window
    under way; ``chem/big`` (8 GPUs for 2h, so A100s only) waits; ``chem/small`` runs on
    a100-01."""
    specs = write_specs(
        tmp_path / "specs",
        [
            cluster(),
            project("chem", gpus=16),
            workload("big", "chem", gpus=8, walltime="2h"),
            workload("small", "chem", gpus=1, walltime="30m"),
        ],
    )
    snapshot = write_snapshot(
        tmp_path / "snap.json",
        [job("31", "chem/small", ("a100-01", 1))],
        reported={
            "a100-01": {"reservations": [OVER, MAINT]},
            "a100-02": {"reservations": [MAINT]},
            "a100-03": {"reservations": [UNDER_WAY]},
            "a100-04": {"reservations": [MAINT]},
            "v100-01": {"reservations": [V100]},
        },
    )
    return specs, snapshot


def test_get_nodes_shows_each_window_not_over(world: tuple[Path, Path], capsys: Capsys) -> None:
    specs, snapshot = world
    doc = ok(cp(capsys, "get", "nodes", specs, "--observed", snapshot, "-o", "json")).json()
    rows: dict[str, Any] = {r["name"]: r for r in doc["items"]}
    # the window that is over is left out; what a node reported is kept as it was
    assert rows["a100-01"]["reservations"] == [MAINT]
    assert rows["a100-03"]["reservations"] == [{**UNDER_WAY, "maintenance": False}]
    assert rows["v100-02"]["reservations"] == []
    # under way now: flagged beside the observed state, as overcommitted is
    assert [n for n, r in rows.items() if r["reserved"]] == ["a100-03"]
    assert rows["a100-03"]["state"] == "idle"
    # the fields the listing had are all still there
    old = {"name", "cluster", "pool", "gpuType", "partition", "gpus", "used", "state", "jobs"}
    assert old | {"overcommitted"} <= set(rows["a100-01"])

    text = ok(cp(capsys, "get", "nodes", specs, "--observed", snapshot)).out
    assert "reserved" in text.splitlines()[0], text  # the column
    lines = {x.split()[0]: x for x in text.splitlines() if x.strip()}
    assert "idle,reserved" in lines["a100-03"], text
    assert "maint-nov" in text and "2026-11-22T10:30:00Z" in text, text
    assert "fw-upgrade" in text and "v100-work" in text, text
    assert "old" not in text.split(), text


def test_get_nodes_of_a_cluster_without_reservations_has_no_such_column(
    tmp_path: Path, capsys: Capsys
) -> None:
    specs = write_specs(tmp_path / "specs", [cluster(), project("chem", gpus=8)])
    snapshot = write_snapshot(tmp_path / "snap.json", [])
    text = ok(cp(capsys, "get", "nodes", specs, "--observed", snapshot)).out
    assert "reserved" not in text, text


def test_explain_of_a_waiting_workload_shows_the_windows_on_nodes_it_may_use(
    world: tuple[Path, Path], capsys: Capsys
) -> None:
    specs, snapshot = world
    args = ("explain", "chem/big", "--dir", specs, "--observed", snapshot)
    doc = ok(cp(capsys, *args, "--json")).json()
    assert doc["state"] == "pending"
    shown = [
        (r["node"], r["name"], r["start"], r["end"], r["underWay"]) for r in doc["reservations"]
    ]
    # earliest first; the V100 node's window is not its business (8 GPUs: A100s only)
    assert shown == [
        ("a100-03", "fw-upgrade", UNDER_WAY["start"], UNDER_WAY["end"], True),
        ("a100-01", "maint-nov", MAINT["start"], MAINT["end"], False),
        ("a100-02", "maint-nov", MAINT["start"], MAINT["end"], False),
        ("a100-04", "maint-nov", MAINT["start"], MAINT["end"], False),
    ]
    assert {r["cluster"] for r in doc["reservations"]} == {"sim"}
    text = ok(cp(capsys, *args)).out
    assert "fw-upgrade" in text and "under way" in text, text
    assert "maint-nov" in text and "a100-01, a100-02, a100-04" in text, text
    assert "2026-11-22T14:00:00Z" in text and "v100-work" not in text, text


def test_explain_of_a_running_workload_shows_the_windows_on_its_own_nodes(
    world: tuple[Path, Path], capsys: Capsys
) -> None:
    specs, snapshot = world
    args = ("explain", "chem/small", "--dir", specs, "--observed", snapshot)
    doc = ok(cp(capsys, *args, "--json")).json()
    assert doc["state"] == "running"
    assert [(r["node"], r["name"]) for r in doc["reservations"]] == [("a100-01", "maint-nov")]
    text = ok(cp(capsys, *args)).out
    assert "maint-nov" in text and "fw-upgrade" not in text, text
