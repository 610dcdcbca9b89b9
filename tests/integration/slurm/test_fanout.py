"""Fan-out on a real Slurm: candidates across partitions, the first to run wins; backfill; cp cost.

No mocks: the session's local slurmctld starts (or does not start) every job, and the
estimates come from ``sbatch --test-only`` and the queue's own reservations. Somebody
else's jobs (plain sbatch, untagged) make the partitions busy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.builders.cli import cp, ok, write_specs

pytestmark = pytest.mark.slurm
Helper = Callable[..., Any]
Capsys = pytest.CaptureFixture[str]
FAN = {"fanOut": True, "maxParallel": 4}


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def costed(cluster_doc: dict[str, Any]) -> dict[str, Any]:
    """The local cluster with prices: an A100-hour costs 3, a V100-hour 1."""
    spec = copy.deepcopy(cluster_doc)
    spec["spec"]["gpuTypes"] = {
        "a100_80": {"memoryGiB": 80, "costPerGpuHour": 3},
        "v100": {"memoryGiB": 32, "costPerGpuHour": 1},
    }
    return spec


def show_job(slurm: Helper, job_id: str) -> dict[str, str]:
    out = slurm("scontrol", "-o", "show", "job", job_id).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def foreign(slurm: Helper, *args: str) -> str:
    """A job of somebody else: no tag, never touched by the control plane."""
    done = slurm("sbatch", "--parsable", "-o", "/dev/null", *args, "--wrap", "sleep 3000")
    assert done.returncode == 0, done.stderr
    return str(done.stdout.strip())


def busy_v100(slurm: Helper, wait_for: Helper) -> str:
    """Both V100 nodes taken for half an hour."""
    job = foreign(slurm, "-p", "gpu-v100", "-N2", "--gres=gpu:v100:4", "--time=30")
    wait_for(lambda: show_job(slurm, job).get("JobState") == "RUNNING")
    return job


def fan_workload(**spec: Any) -> dict[str, Any]:
    body = {
        "project": "p",
        "gpus": 4,
        "gpuTypes": ["a100_80", "v100"],
        "walltime": "30m",
        "command": ["sleep", "600"],
        "strategy": FAN,
        **spec,
    }
    return doc("Workload", "w", **body)


def test_fan_out_submits_across_partitions_and_one_survives(
    clean_slurm: Any,
    costed: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    squeue: Helper,
    wait_for: Helper,
) -> None:
    blocker = busy_v100(slurm, wait_for)
    specs = write_specs(
        tmp_path / "specs", [costed, doc("Project", "p", quota={"gpus": 16}), fan_workload()]
    )
    planned = ok(cp(capsys, "plan", specs, "--json", "--out", tmp_path / "plan.json")).json()
    # A100 starts now but costs 3x; V100 is cheap but busy for 30 min: neither dominates
    assert [
        (a["op"], a["pool"], a["submit"]["candidate"], a["reason"]["code"])
        for a in planned["actions"]
    ] == [
        ("submit", "a100", "local.a100.1x4.direct", "fan-out"),
        ("submit", "v100", "local.v100.1x4.direct", "fan-out"),
    ]
    a100, v100 = planned["actions"]
    assert "starts now" in a100["reason"]["message"] and "cost 6 " in a100["reason"]["message"]
    assert "starts in ~" in v100["reason"]["message"] and "cost 2 " in v100["reason"]["message"]
    assert [r["node"] for r in a100["replicas"]] == [None]  # Slurm places them
    assert planned["projects"]["p"]["allocated"] == 4  # the workload's GPUs, once

    applied = ok(cp(capsys, "apply", tmp_path / "plan.json", "--dir", specs, "--json")).json()
    jobs = {a["workload"] + "@" + str(i): a["job"] for i, a in enumerate(applied["actions"])}
    first, second = jobs["p/w@0"], jobs["p/w@1"]
    wait_for(lambda: show_job(slurm, first).get("JobState") == "RUNNING")
    assert show_job(slurm, first)["Partition"] == "gpu-a100"
    assert show_job(slurm, second)["JobState"] == "PENDING"
    assert "cand=local.v100.1x4.direct" in show_job(slurm, second)["Comment"]

    # one runs: the other candidate is cancelled, and only then
    losers = ok(cp(capsys, "plan", specs, "--json", "--out", tmp_path / "plan2.json")).json()
    assert [(a["op"], a["job"], a["reason"]["code"]) for a in losers["actions"]] == [
        ("cancel", second, "fan-out-loser")
    ]
    ok(cp(capsys, "apply", tmp_path / "plan2.json", "--dir", specs))
    wait_for(lambda: show_job(slurm, second).get("JobState") == "CANCELLED")
    assert [(j.id, j.partition) for j in squeue() if j.workload == "p/w" and j.active] == [
        (first, "gpu-a100")
    ]
    settled = ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()
    assert settled["actions"] == [] and settled["pending"] == []
    assert show_job(slurm, blocker)["JobState"] == "RUNNING"  # not ours: untouched


def test_cp_cost_prints_candidates_with_test_only_estimates(
    clean_slurm: Any,
    costed: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    squeue: Helper,
    wait_for: Helper,
) -> None:
    busy_v100(slurm, wait_for)
    specs = write_specs(
        tmp_path / "specs",
        [costed, doc("Project", "p", quota={"gpus": 16}), fan_workload(replicas=2)],
    )
    now = datetime.now(UTC)
    table = ok(cp(capsys, "cost", "p/w", "--dir", specs, "--json")).json()
    assert (table["fanOut"], table["maxParallel"], table["forecasted"]) == (True, 4, True)
    rows = {c["name"]: c for c in table["candidates"]}
    assert sorted(rows) == [
        "local.a100.1x8.direct",
        "local.a100.2x4.direct",
        "local.v100.2x4.direct",
    ]
    starts = {n: datetime.fromisoformat(c["estimatedStart"]) for n, c in rows.items()}
    assert starts["local.a100.1x8.direct"] < now + timedelta(minutes=2)
    assert starts["local.v100.2x4.direct"] > now + timedelta(minutes=25)  # after the blocker
    assert {n: (c["cost"], c["status"]) for n, c in rows.items()} == {
        "local.a100.1x8.direct": (12, "chosen"),  # 8 GPUs x 0.5 h x 3
        # same start and cost: sent both, both would start (the workload twice; trialO)
        "local.a100.2x4.direct": (12, "dominated"),
        "local.v100.2x4.direct": (4, "chosen"),
    }
    text = ok(cp(capsys, "cost", "p/w", "--dir", specs)).out
    # at 80 columns the names stay whole and the two-line header still shows
    assert all(name in text for name in rows), text
    assert "estimated" in text and "*" in text
    # test-only queued nothing
    assert [j for j in squeue() if j.workload == "p/w" and j.active] == []


def test_a_backfill_candidate_carries_time_min(
    clean_slurm: Any,
    costed: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    wait_for: Helper,
) -> None:
    """A100-1 busy for 45 min; a bigger job waits for both A100 nodes and reserves A100-2
    from then on. A 1 h job cannot start before it, one that accepts 15 min can: now."""
    held = foreign(slurm, "-p", "gpu-a100", "-w", "a100-1", "--gres=gpu:a100_80:8", "--time=45")
    wait_for(lambda: show_job(slurm, held).get("JobState") == "RUNNING")
    big = foreign(slurm, "-p", "gpu-a100", "-N2", "--gres=gpu:a100_80:8", "--time=60")
    wait_for(lambda: show_job(slurm, big).get("SchedNodeList", "(null)") != "(null)", timeout=30)
    segmented = fan_workload(
        gpus=8,
        gpuTypes=["a100_80"],
        walltime="1h",
        checkpoint={"signal": "USR1", "grace": "1m", "total": "2h"},
        strategy={"fanOut": True, "maxParallel": 2},
    )
    specs = write_specs(
        tmp_path / "specs", [costed, doc("Project", "p", quota={"gpus": 16}), segmented]
    )
    table = ok(cp(capsys, "cost", "p/w", "--dir", specs, "--json")).json()
    status = {c["name"]: (c["mode"], c["timeMin"], c["status"]) for c in table["candidates"]}
    assert status["local.a100.1x8.backfill"] == ("backfill", 900, "chosen")
    assert status["local.a100.1x8.direct"][2] == "dominated"  # the same cost, later

    planned = ok(cp(capsys, "plan", specs, "--json", "--out", tmp_path / "plan.json")).json()
    [submit] = planned["actions"]
    assert submit["submit"]["candidate"] == "local.a100.1x8.backfill"
    assert (submit["submit"]["walltime"], submit["submit"]["timeMin"]) == (3600, 900)
    assert "starts now" in submit["reason"]["message"]
    applied = ok(cp(capsys, "apply", tmp_path / "plan.json", "--dir", specs, "--json")).json()
    [job] = [a["job"] for a in applied["actions"]]
    detail = wait_for(lambda: (d := show_job(slurm, job)).get("JobState") == "RUNNING" and d)
    assert detail["TimeMin"] == "00:15:00" and detail["NodeList"] == "a100-2"
    assert detail["TimeLimit"] <= "01:00:00"  # backfilled: Slurm may shorten it to the window
    assert show_job(slurm, big)["JobState"] == "PENDING"
