"""An edit to running work of a project that spent its budget: the new version is new work.

A spent budget starts nothing new; what runs goes on. An edit that needs a new job
(``gpus``, ``command``, …) would start one: the new version waits for the budget like
any other new work, and the old job keeps running meanwhile (it was replaced at once,
so any edit got round the budget, with a fresh walltime and as many GPUs as it liked).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, ok, write_specs

Capsys = pytest.CaptureFixture[str]
POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]
START = "2027-03-01T00:00:00+00:00"
SPENT = "2027-03-01T20:00:00+00:00"  # 4 GPUs x 20 h: 80 of its 50 GPU-hours
NEXT_MONTH = "2027-04-01T00:00:00+00:00"


def org(root: Path, **spec: Any) -> Path:
    base: dict[str, Any] = {"gpus": 4, "walltime": "40d", "command": ["train"]}
    return write_specs(
        root,
        [
            cluster(pools=POOLS),
            project("p", gpus=8, budget={"gpuHoursPerMonth": 50}),
            workload("w", "p", **{**base, **spec}),
        ],
    )


def plan(capsys: Capsys, root: Path, now: str) -> dict[str, Any]:
    data: dict[str, Any] = ok(cp(capsys, "plan", root, "--json", "--now", now)).json()
    return data


@pytest.mark.parametrize("edit", [{"gpus": 8}, {"command": ["train", "--v2"]}])
def test_the_new_version_waits_for_the_budget_and_the_old_job_runs_on(
    tmp_path: Path, capsys: Capsys, edit: dict[str, Any]
) -> None:
    root = org(tmp_path / "s")
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", START))
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", SPENT))
    org(root, **edit)
    data = plan(capsys, root, SPENT)
    assert data["actions"] == []
    (waiting,) = data["pending"]
    assert waiting["workload"] == "p/w"
    assert waiting["reason"]["code"] == "over-budget"
    message = waiting["reason"]["message"]
    assert "the spec changed" in message and "used 80 of its 50 GPU-hours" in message
    assert "keeps running the old version" in message
    # next month's budget lets it be replaced
    later = plan(capsys, root, NEXT_MONTH)
    assert [(a["op"], a["reason"]["code"]) for a in later["actions"]] == [
        ("submit", "spec-changed"),
        ("cancel", "spec-changed"),
    ]


def test_with_budget_left_an_edit_replaces_as_before(tmp_path: Path, capsys: Capsys) -> None:
    root = org(tmp_path / "s")
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", START))
    org(root, gpus=8)
    data = plan(capsys, root, "2027-03-01T05:00:00+00:00")  # 20 of 50 GPU-hours
    assert [a["op"] for a in data["actions"]] == ["submit", "cancel"]
