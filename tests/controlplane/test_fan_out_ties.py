"""Fan-out candidates forecast to start together at one cost: neither dominated the other,
so both were submitted, both started, and the workload ran twice: its checkpoint segment
had two writers, and its project held twice its GPUs, above its hard ``limit`` (user
trial on the simulator: two pools alike, a project whose limit is one candidate's GPUs).
One of them is submitted now. Real simulator and store, through the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import cluster, pool, project, workload
from tests.builders.cli import cp, ok, write_specs

Capsys = pytest.CaptureFixture[str]


def test_twin_candidates_do_not_both_run(tmp_path: Path, capsys: Capsys) -> None:
    pools = [pool("p1", nodes=1, maxWalltime="4h"), pool("p2", nodes=1, maxWalltime="4h")]
    fan = {"fanOut": True, "maxParallel": 2}
    checkpoint = {"signal": "USR1", "grace": "10m", "total": "6h"}
    specs = write_specs(
        tmp_path,
        [
            cluster("sim", pools=pools),
            project("lat", gpus=4, limit=4),
            workload("f", "lat", gpus=4, walltime="2h", checkpoint=checkpoint, strategy=fan),
        ],
    )
    now = ("--now", "2026-03-02T08:00:00Z")
    applied = ok(cp(capsys, "apply", specs, "--auto-approve", "--json", *now)).json()
    assert [(a["op"], a["status"]) for a in applied["actions"]] == [("submit", "done")]
    at = ("--now", "2026-03-02T08:01:00Z")
    jobs = ok(cp(capsys, "get", "jobs", specs, "--json", *at)).json()["items"]
    assert [(j["workload"], j["state"], j["gpus"]) for j in jobs] == [("lat/f", "RUNNING", 4)]
    assert ok(cp(capsys, "plan", specs, "--detailed-exitcode", *at)).code == 0
