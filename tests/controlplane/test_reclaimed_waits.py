"""A victim of reclaim, in the plans after the one that took its GPUs: it waits for room,
and the reason says why nothing is reclaimed for it in turn. It read only "no-capacity:
needs 1 GPU; ... 0 free", hiding that its project stood above its fair share (user trial)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.builders import cluster, pool, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]
T0 = datetime(2026, 11, 2, tzinfo=UTC)


def test_a_reclaimed_workload_later_waits_saying_its_project_is_above_its_fair_share(
    tmp_path: Path, capsys: Capsys
) -> None:
    docs = [
        cluster(pools=[pool(nodes=2)]),  # 16 GPUs
        project("p1", gpus=4),
        project("p2", gpus=4),
        *[workload(f"t{i:02d}", "p1", gpus=1, walltime="3d") for i in range(16)],
    ]
    specs = write_specs(tmp_path / "s", docs)

    def apply(at: datetime) -> list[tuple[str, str]]:
        done = cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", at.isoformat())
        assert done.code == 0, done.out + done.err
        return [(a["op"], a["workload"]) for a in done.json()["actions"]]

    assert len(apply(T0)) == 16
    write_specs(specs, [*docs, workload("urgent", "p2", gpus=4, walltime="1d")])
    taken = [w for op, w in apply(T0 + timedelta(hours=5)) if op == "preempt"]
    assert len(taken) == 4

    later = (T0 + timedelta(hours=6)).isoformat()
    plan = cp(capsys, "plan", specs, "--json", "--now", later).json()
    waits = {p["workload"]: p["reason"] for p in plan["pending"]}
    assert set(waits) == set(taken)
    for reason in waits.values():
        assert reason["code"] == "no-capacity"
        assert reason["message"].endswith(
            "; project p1 would hold 13 GPUs with it, above its fair share 12: GPUs are "
            "reclaimed only for work within fair share"
        ), reason["message"]
