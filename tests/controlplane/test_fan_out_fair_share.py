"""A fan-out workload none of whose candidates was submitted yet asked for nothing in the
fair share: the first plan gave its project less than its demand (trialO: a department
deserving 24 and asking 25 got 21, and 24 five minutes later, once the candidates waited
in the clusters' queues, nothing else having changed). KAI's fair share counts every
waiting job's request."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import cluster, pool, project, workload
from tests.builders.cli import cp, ok, write_specs

Capsys = pytest.CaptureFixture[str]
T0 = "2026-03-02T08:00:00Z"


def test_an_unsubmitted_fan_out_workload_counts_in_its_projects_request(
    tmp_path: Path, capsys: Capsys
) -> None:
    fan = {"fanOut": True, "maxParallel": 2}
    specs = write_specs(
        tmp_path,
        [
            cluster("sim", pools=[pool("a", nodes=2)]),  # 16 GPUs
            project("a", gpus=8),
            project("b", gpus=8),
            workload("spread", "a", gpus=4, walltime="1h", strategy=fan),
            workload("plain", "a", gpus=4, walltime="1h"),
            *[workload(f"b{i}", "b", gpus=4, walltime="1h") for i in range(4)],
        ],
    )
    first = ok(cp(capsys, "plan", specs, "--json", "--now", T0)).json()
    assert first["projects"]["a"]["fairShare"] == 8.0
    assert first["projects"]["b"]["fairShare"] == 8.0
