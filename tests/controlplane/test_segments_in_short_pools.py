"""A fan-out workload that runs in checkpoint segments takes a pool whose maxWalltime is
shorter than its walltime, in segments of that length (docs/strategies.md, checkpoint
mode). `cp validate` refused it where that was its only pool ("no node pool can ever hold
this workload ... its maxWalltime 3m is shorter than walltime 5m"; trialN): the same
spec validated once any other pool without a maxWalltime was there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]
SHORT = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2, "maxWalltime": "3m"}]


def specs(root: Path, **spec: Any) -> Path:
    work = {"gpus": 1, "gpuTypes": ["a100_80"], "walltime": "5m", "command": ["train"], **spec}
    return write_specs(
        root, [cluster(pools=SHORT), project("p", gpus=8), workload("w", "p", **work)]
    )


def test_a_fan_out_segmented_workload_runs_in_segments_of_a_short_pool(
    tmp_path: Path, capsys: Capsys
) -> None:
    root = specs(
        tmp_path / "s",
        checkpoint={"signal": "USR1", "grace": "1m", "total": "10m"},
        strategy={"fanOut": True, "maxParallel": 2},
    )
    checked = cp(capsys, "validate", root)
    assert checked.code == 0, checked.out + checked.err
    made = cp(capsys, "plan", root, "--json", "--now", "2026-11-22T10:00:00Z").json()
    [submit] = [a for a in made["actions"] if a["workload"] == "p/w"]
    assert submit["submit"]["walltime"] <= 180, submit["submit"]


@pytest.mark.parametrize(
    "spec",
    [
        {"checkpoint": {"signal": "USR1", "grace": "1m", "total": "10m"}},  # no fan-out
        {"strategy": {"fanOut": True}},  # no segments
        {
            "checkpoint": {"signal": "USR1", "grace": "3m", "total": "10m"},
            "strategy": {"fanOut": True},
        },
    ],
    ids=["segments-alone", "fan-out-alone", "grace-fills-the-pool"],
)
def test_other_work_too_long_for_the_pool_is_still_refused(
    tmp_path: Path, capsys: Capsys, spec: dict[str, Any]
) -> None:
    checked = cp(capsys, "validate", specs(tmp_path / "s", **spec))
    assert (
        checked.code == 1 and "maxWalltime 3m is shorter than walltime" in checked.err + checked.out
    )
