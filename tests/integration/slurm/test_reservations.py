"""An announced maintenance on a real Slurm: work that would run into the window is kept
off the reserved node, and work already waiting there is placed again.

Sites announce maintenance ahead (``scontrol create reservation ... Flags=maint``). Until
it begins sinfo shows the node idle; a job pinned there (``--nodelist``) whose time limit
crosses the window waits "ReqNodeNotAvail, May be reserved for other job", and every plan
kept it waiting through the whole window while the identical node stood idle (user
trial). The reservation below starts ten minutes after the test begins and is deleted
when it ends. The project's name is this file's own: slurmctld remembers the ended jobs of
earlier tests for a while, and a completed ``p/long`` of theirs would count as this one's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slurm import SlurmAdapter
from tests.builders.cli import cp, ok, write_specs

pytestmark = pytest.mark.slurm
Helper = Callable[..., Any]
Capsys = pytest.CaptureFixture[str]


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def workload(name: str, gpus: int, walltime: str) -> dict[str, Any]:
    return doc(
        "Workload",
        name,
        project="mnt",
        gpus=gpus,
        gpuTypes=["a100_80"],
        walltime=walltime,
        command=["sleep", "600"],
    )


@pytest.fixture
def maintenance(clean_slurm: Any, slurm: Helper, wait_for: Helper) -> Iterator[None]:
    """a100-1 reserved for maintenance from ten minutes from now, for an hour; both a100
    nodes idle first (an earlier test's jobs may leave them busy a moment)."""
    idle = ["idle", "idle"]
    wait_for(
        lambda: slurm("sinfo", "-h", "-N", "-n", "a100-[1-2]", "-o", "%T").stdout.split() == idle
    )
    made = slurm(
        "scontrol", "create", "reservation", "ReservationName=cp-test-maint",
        "StartTime=now+600", "Duration=60", "Nodes=a100-1", "Users=root",
        "Flags=maint,ignore_jobs",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    try:
        yield
    finally:
        slurm("scontrol", "delete", "reservation=cp-test-maint")


def running_on(squeue: Helper, key: str) -> list[tuple[str, str]]:
    return [(j.state, j.nodes) for j in squeue() if j.workload == key and j.active]


def test_work_that_would_run_into_an_announced_maintenance_goes_elsewhere(
    maintenance: None,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    squeue: Helper,
    wait_for: Helper,
) -> None:
    """The observation carries the window of a100-1 (still idle); a 30 min job goes to
    a100-2, an 8 GPU job of 5 min, which ends before the window, to a100-1: both run."""
    specs = tmp_path / "specs"
    write_specs(
        specs,
        [
            cluster_doc,
            doc("Project", "mnt", quota={"gpus": 16}),
            workload("long", 4, "30m"),
            workload("short", 8, "5m"),
        ],
    )
    observed = ok(cp(capsys, "observe", specs)).json()
    nodes = {n["name"]: n for c in observed["clusters"] for n in c["nodes"]}
    assert nodes["a100-1"]["state"] == "idle"
    [window] = nodes["a100-1"]["reservations"]
    assert window["name"] == "cp-test-maint" and window["maintenance"] is True
    assert "reservations" not in nodes["a100-2"]

    planned = ok(cp(capsys, "plan", specs, "--json")).json()
    placed = {a["workload"]: [r["node"] for r in a["replicas"]] for a in planned["actions"]}
    assert placed == {"mnt/long": ["a100-2"], "mnt/short": ["a100-1"]}, planned["pending"]
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    wait_for(lambda: running_on(squeue, "mnt/long") == [("RUNNING", "a100-2")])
    wait_for(lambda: running_on(squeue, "mnt/short") == [("RUNNING", "a100-1")])


def test_a_job_waiting_on_a_node_under_an_announced_maintenance_is_placed_again(
    maintenance: None,
    adapter: SlurmAdapter,
    make_action: Helper,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    squeue: Helper,
    slurm: Helper,
    wait_for: Helper,
) -> None:
    """Submitted as a plan made before the announcement did, pinned to a100-1 (the tightest
    fit then), the job waits there: Slurm will not start it. The next plan cancels it and
    runs it on a100-2, saying why."""
    specs = tmp_path / "specs"
    write_specs(
        specs, [cluster_doc, doc("Project", "mnt", quota={"gpus": 16}), workload("a", 4, "30m")]
    )
    pinned = make_action(
        workload="mnt/a", nodes=["a100-1"], gpus=4, walltime=1800, command=["sleep", "600"]
    )
    job = adapter.execute(pinned, plan_id="before-the-announcement").job
    assert job is not None

    def refused() -> str | None:
        out = slurm("squeue", "-h", "-j", job, "-o", "%T|%r|%n").stdout.strip()
        return out if "ReqNodeNotAvail" in out else None

    shown = wait_for(refused)
    assert shown.startswith("PENDING|") and shown.endswith("|a100-1"), shown

    again = ok(cp(capsys, "plan", specs, "--json")).json()
    ops = sorted(
        (a["op"], a.get("job"), [r["node"] for r in a["replicas"] or []]) for a in again["actions"]
    )
    assert ops == [("cancel", job, []), ("submit", None, ["a100-2"])]
    [cancel] = [a for a in again["actions"] if a["op"] == "cancel"]
    assert "a100-1 is reserved for maintenance from" in cancel["reason"]["message"]
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    wait_for(lambda: running_on(squeue, "mnt/a") == [("RUNNING", "a100-2")])


def test_a_backfill_candidate_is_not_forecast_into_an_announced_maintenance(
    maintenance: None,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    wait_for: Helper,
) -> None:
    """a100-2 busy for an hour (somebody else's job); a100-1 idle, its maintenance ten
    minutes away. A backfill candidate (time-min 15 min) cannot start on a100-1 before the
    window, and Slurm does not start it: its forecast is not "now". It was (the judgement
    read the queue's pending jobs, not the node's reservations), so the candidate was
    chosen as starting now, the full-limit one dropped as no earlier, and the workload
    waited through the whole window (user trial)."""
    held = slurm(
        "sbatch", "--parsable", "-o", "/dev/null", "-p", "gpu-a100", "-w", "a100-2",
        "--gres=gpu:a100_80:8", "--time=60", "--wrap", "sleep 3000",
    )  # fmt: skip
    assert held.returncode == 0, held.stderr
    job = held.stdout.strip()
    wait_for(lambda: "JobState=RUNNING" in slurm("scontrol", "-o", "show", "job", job).stdout)
    segmented = doc(
        "Workload",
        "seg",
        project="mnt",
        gpus=8,
        gpuTypes=["a100_80"],
        walltime="1h",
        command=["sleep", "600"],
        checkpoint={"signal": "USR1", "grace": "1m", "total": "2h"},
        strategy={"fanOut": True, "maxParallel": 2},
    )
    specs = write_specs(
        tmp_path / "specs", [cluster_doc, doc("Project", "mnt", quota={"gpus": 16}), segmented]
    )
    table = ok(cp(capsys, "cost", "mnt/seg", "--dir", specs, "--json")).json()
    backfill = next(c for c in table["candidates"] if c["name"] == "local.a100.1x8.backfill")
    assert backfill["timeMin"] == 900
    assert backfill["estimatedStart"] is None, backfill
    assert backfill["status"] != "chosen", backfill
    # and Slurm agrees: the same request, sent by hand, is not started before the window
    asked = slurm(
        "sbatch", "--parsable", "-o", "/dev/null", "-p", "gpu-a100", "--gres=gpu:a100_80:8",
        "--time=60", "--time-min=15", "--wrap", "sleep 3000",
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    time.sleep(12)  # a few of the local slurmctld's backfill passes
    shown = slurm("scontrol", "-o", "show", "job", asked.stdout.strip()).stdout
    assert "JobState=PENDING" in shown, shown
