"""Checkpoint segments of a fan-out workload, driven through apply, observe and plan on the
simulator: the progress the store records and the plan reads.

The user trial's scenario: the cluster is full until 12:00, when room frees on both
pools at once and both candidates of chem/md-run (4 h segments of 12 h) start. No plan
runs until 16:40, after both completed: each run counted as a segment, "segment 3: 8h of
12h done" after one 4 h segment of work.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]
POOLS = [
    {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2, "maxWalltime": "8h"},
    {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 2, "maxWalltime": "1d"},
]
BUSY = [  # the whole cluster, 10:00 to 12:00
    cluster(pools=POOLS),
    project("chem", gpus=0),
    project("bio", gpus=24),
    workload("ea", "bio", gpus=8, replicas=2, gpuTypes=["a100_80"], walltime="2h"),
    workload("ev", "bio", gpus=4, replicas=2, gpuTypes=["v100"], walltime="2h"),
]
MD_RUN = workload(
    "md-run",
    "chem",
    gpus=4,
    walltime="4h",
    checkpoint={"signal": "USR1", "grace": "10m", "total": "12h"},
    strategy={"fanOut": True, "maxParallel": 4},
    command=["python", "md.py"],
)


def submitted(capsys: Capsys, root: Path) -> Path:
    """Both candidates of md-run queued at 10:05 behind the full cluster."""
    write_specs(root, BUSY)
    assert cp(capsys, "apply", root, "--auto-approve", "--now", "2026-11-28T10:00:00Z").code == 0
    write_specs(root, [*BUSY, MD_RUN])
    out = cp(capsys, "apply", root, "--auto-approve", "--now", "2026-11-28T10:05:00Z").out
    assert out.count("queued") == 2, out
    return root


def segment_told(capsys: Capsys, root: Path, now: str) -> str:
    text = cp(capsys, "plan", root, "--now", now).out
    found = re.search(r"segment \d+: \d+h of 12h done", text)
    return found.group(0) if found else text


def test_candidates_that_both_ran_unseen_are_one_segment(tmp_path: Path, capsys: Capsys) -> None:
    root = submitted(capsys, tmp_path / "s")
    assert cp(capsys, "observe", root, "--now", "2026-11-28T12:30:00Z").code == 0  # both run
    # read-only: the plan counts what it sees ended as if recorded
    assert segment_told(capsys, root, "2026-11-28T16:40:00Z") == "segment 2: 4h of 12h done"
    snap = cp(capsys, "observe", root, "--now", "2026-11-28T16:40:00Z").json()
    [progress] = [p for p in snap["progress"] if p["workload"] == "chem/md-run"]
    assert (progress["segments"], progress["elapsedSeconds"]) == (1, 4 * 3600)
    assert segment_told(capsys, root, "2026-11-28T16:40:00Z") == "segment 2: 4h of 12h done"


def test_a_plan_that_cancels_the_loser_counts_the_winner(tmp_path: Path, capsys: Capsys) -> None:
    """The control: a plan at 12:30 sees both run and cancels the loser."""
    root = submitted(capsys, tmp_path / "s")
    assert cp(capsys, "apply", root, "--auto-approve", "--now", "2026-11-28T12:30:00Z").code == 0
    assert segment_told(capsys, root, "2026-11-28T16:40:00Z") == "segment 2: 4h of 12h done"
