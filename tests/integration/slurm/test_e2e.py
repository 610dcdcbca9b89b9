"""The control plane end to end on a real Slurm: specs -> cp plan -> cp apply -> squeue.

No mocks: the session's local slurmctld + slurmd run every job (``sleep``), and every
claim is checked with Slurm's own tools. Covered here:

* a spec repo converges: every planned job RUNS with the planned partition, GRES and
  nodes, and the next plan is empty; an unmanaged job (plain sbatch, no tag) is never
  touched and the planner leaves its GPUs alone;
* a spec edit: a removed workload is cancelled (prune), a shrunk quota has a
  checkpointable job given its checkpoint signal and grace (its time limit brought in),
  waited for while it winds down, then planned again as preempted (no retry backoff) while
  a within-quota job takes its GPUs;
* placeholders: a job that pends in Slurm is recorded, keeps the workload from being
  submitted twice, and is reaped once it starts or dies; a job the observation does not
  show yet is injected until the grace period is over.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controlplane.store import Store, default_url
from tests.builders.cli import cp, ok, write_specs

pytestmark = pytest.mark.slurm
Helper = Callable[..., Any]
Capsys = pytest.CaptureFixture[str]
SLEEP = ["sleep", "600"]


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def project(name: str, gpus: int) -> dict[str, Any]:
    return doc("Project", name, quota={"gpus": gpus})


def workload(name: str, project: str, gpus: int, gpu_type: str, **spec: Any) -> dict[str, Any]:
    return doc(
        "Workload",
        name,
        project=project,
        gpus=gpus,
        gpuTypes=[gpu_type],
        **{"walltime": "1h", "command": SLEEP, **spec},
    )


def show_job(slurm: Helper, job_id: str) -> dict[str, str]:
    """``scontrol -o show job`` as a dict (the values we check have no spaces)."""
    out = slurm("scontrol", "-o", "show", "job", job_id).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def ours(squeue: Helper, workload: str) -> list[Any]:
    return [j for j in squeue() if j.workload == workload]


def waiting(plan: dict[str, Any]) -> dict[str, str]:
    """workload -> the reason code it waits with."""
    return {p["workload"]: p["reason"]["code"] for p in plan["pending"]}


def placeholder_rows(spec_dir: Path) -> dict[str, str]:
    """workload -> job id, read straight from the SQLite store."""
    with sqlite3.connect(spec_dir / ".cp" / "controlplane.db") as db:
        return dict(db.execute("SELECT workload, job FROM placeholders"))


# ----------------------------------------------------------------- converge, then edit


def test_specs_converge_then_an_edit_prunes_and_reclaims(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    squeue: Helper,
    wait_for: Helper,
) -> None:
    # somebody else's job holds all of v100-1: never ours to touch, its GPUs are taken
    foreign = slurm(
        "sbatch",
        "--parsable",
        "-p",
        "gpu-v100",
        "-w",
        "v100-1",
        "--gres=gpu:v100:4",
        "-o",
        "/dev/null",
        "--comment=not managed",
        "--wrap",
        "sleep 600",
    ).stdout.strip()
    assert foreign.isdigit()
    wait_for(lambda: show_job(slurm, foreign).get("JobState") == "RUNNING")

    specs = tmp_path / "specs"
    docs = [
        cluster_doc,
        project("chem", 9),
        project("bio", 8),
        project("ops", 7),
        workload("train", "chem", 8, "a100_80"),
        workload("small", "chem", 1, "v100"),
        workload("sweep", "bio", 8, "a100_80", checkpoint={"signal": "USR1", "grace": "1m"}),
        workload("tune", "ops", 2, "v100"),
        workload("notebook", "ops", 1, "v100", type="interactive"),
        workload("big", "ops", 4, "v100"),  # fits only where the foreign job runs
    ]
    write_specs(specs, docs)
    planned = ok(cp(capsys, "plan", specs, "--json", "--out", tmp_path / "plan.json")).json()
    submits = {a["workload"]: a for a in planned["actions"]}
    assert {a["op"] for a in planned["actions"]} == {"submit"}
    assert sorted(submits) == ["bio/sweep", "chem/small", "chem/train", "ops/notebook", "ops/tune"]
    assert waiting(planned) == {"ops/big": "no-capacity"}
    for w in ("chem/small", "ops/tune", "ops/notebook"):
        assert [r["node"] for r in submits[w]["replicas"]] == ["v100-2"], "not on the foreign node"

    applied = ok(cp(capsys, "apply", tmp_path / "plan.json", "--dir", specs, "--json")).json()
    assert applied["ok"] and {a["status"] for a in applied["actions"]} == {"done"}
    jobs = {a["workload"]: a["job"] for a in applied["actions"]}

    # every job runs where and how the plan said, with the workload's tag
    for w, action in submits.items():
        job = jobs[w]
        detail = wait_for(lambda: (d := show_job(slurm, job)).get("JobState") == "RUNNING" and d)  # noqa: B023
        gpu_type, gpus = action["submit"]["gpuType"], action["submit"]["gpusPerReplica"]
        assert detail["Partition"] == action["submit"]["partition"]
        assert detail["TresPerNode"] == f"gres:gpu:{gpu_type}:{gpus}"
        assert detail["NodeList"] == ",".join(r["node"] for r in action["replicas"])
        assert [j.id for j in ours(squeue, w)] == [job]
    again = ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()
    assert again["actions"] == []
    assert waiting(again) == {"ops/big": "no-capacity"}

    # edit: chem/small leaves the specs; bio's quota goes to 0 and chem wants a second node
    edited = [d for d in copy.deepcopy(docs) if d["metadata"]["name"] != "small"]
    edited[1] = project("chem", 17)
    edited[2] = project("bio", 0)
    edited.append(workload("extra", "chem", 8, "a100_80"))
    write_specs(specs, edited)
    plan2 = ok(cp(capsys, "plan", specs, "--json", "--out", tmp_path / "plan2.json")).json()
    ops = sorted((a["op"], a["workload"], a["reason"]["code"]) for a in plan2["actions"])
    assert ops == [
        ("cancel", "chem/small", "prune"),
        ("preempt", "bio/sweep", "reclaim"),
        ("submit", "chem/extra", "within-deserved"),
    ]
    sweep_node = show_job(slurm, jobs["bio/sweep"])["NodeList"]
    extra = next(a for a in plan2["actions"] if a["workload"] == "chem/extra")
    assert [r["node"] for r in extra["replicas"]] == [sweep_node]

    ok(cp(capsys, "apply", tmp_path / "plan2.json", "--dir", specs))
    # pruned: cancelled, not requeued
    wait_for(lambda: show_job(slurm, jobs["chem/small"]).get("JobState") == "CANCELLED")
    # reclaimed with a checkpoint: its time limit brought in, so Slurm sends its USR1
    # (sleep dies of it) and ends it within its grace; until then it winds down
    sweep = show_job(slurm, jobs["bio/sweep"])
    assert "evicted=" in sweep["Comment"] and sweep["TimeLimit"] in ("00:01:00", "00:02:00")
    extra_job = next(j for j in ours(squeue, "chem/extra"))
    # a plan made meanwhile waits for it: no second eviction, and chem/extra, queued for
    # the sweep's node, is left to start there
    during = ok(cp(capsys, "plan", specs, "--json")).json()
    assert during["actions"] == [] and waiting(during)["chem/extra"] == "submitted"
    wait_for(lambda: show_job(slurm, jobs["bio/sweep"]).get("JobState") == "FAILED", timeout=120)
    wait_for(lambda: show_job(slurm, extra_job.id).get("JobState") == "RUNNING")
    assert show_job(slurm, extra_job.id)["NodeList"] == sweep_node
    # preempted, not failed: it waits for room, without a retry backoff
    final = ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()
    assert final["actions"] == []
    assert waiting(final) == {"bio/sweep": "no-capacity", "ops/big": "no-capacity"}
    # the foreign job ran through all of it untouched
    assert show_job(slurm, foreign)["JobState"] == "RUNNING"
    assert all(
        len([j for j in ours(squeue, w) if j.active]) == 1
        for w in ("chem/train", "chem/extra", "ops/tune", "ops/notebook")
    )
    history = ok(cp(capsys, "history", specs, "--workload", "bio/sweep", "--json")).json()
    assert [(h["op"], h["reason"]["code"]) for h in history] == [
        ("preempt", "reclaim"),
        ("submit", "within-deserved"),
    ]


# ------------------------------------------------------------------------- placeholders


def test_placeholders_hold_a_pending_submission_and_are_reaped(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    squeue: Helper,
    wait_for: Helper,
) -> None:
    specs = tmp_path / "specs"
    write_specs(specs, [cluster_doc, project("ph", 8), workload("wait", "ph", 2, "v100")])
    # Slurm knows a limit the control plane does not read: the job is accepted and pends
    # (PartitionNodeLimit) although the planner sees idle GPUs
    assert slurm("scontrol", "update", "PartitionName=gpu-v100", "MinNodes=2").returncode == 0
    try:
        ok(cp(capsys, "apply", specs, "--auto-approve"))
        first = placeholder_rows(specs)["ph/wait"]
        wait_for(lambda: show_job(slurm, first).get("Reason") == "PartitionNodeLimit")

        # recorded and respected: waits as "submitted", nothing submitted again
        plan = ok(cp(capsys, "plan", specs, "--json")).json()
        assert plan["actions"] == []
        assert waiting(plan) == {"ph/wait": "submitted"}
        assert first in plan["pending"][0]["reason"]["message"]
        assert placeholder_rows(specs) == {"ph/wait": first}

        # cancelled while pending: Slurm shows it ended without a start; reaped at observe
        slurm("scancel", first)
        wait_for(lambda: show_job(slurm, first).get("JobState") == "CANCELLED")
        observed = ok(cp(capsys, "observe", specs)).json()
        dead = next(j for c in observed["clusters"] for j in c["jobs"] if j["id"] == first)
        assert dead["state"] == "CANCELLED" and "startedAt" not in dead
        assert placeholder_rows(specs) == {}
        plan = ok(cp(capsys, "plan", specs, "--json")).json()
        assert [(a["op"], a["workload"]) for a in plan["actions"]] == [("submit", "ph/wait")]
    finally:
        slurm("scontrol", "update", "PartitionName=gpu-v100", "MinNodes=0")

    # submitted again, and once it runs it is a normal job: the placeholder goes
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    second = placeholder_rows(specs)["ph/wait"]
    assert second != first
    wait_for(lambda: show_job(slurm, second).get("JobState") == "RUNNING")
    assert ok(cp(capsys, "plan", specs, "--json")).json()["actions"] == []
    ok(cp(capsys, "observe", specs))  # observing records (a plan only reads)
    assert placeholder_rows(specs) == {}
    assert sorted(j.id for j in ours(squeue, "ph/wait")) == sorted([first, second])


def test_work_longer_than_a_partitions_max_time_waits_instead_of_pending_for_ever(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    squeue: Helper,
) -> None:
    """The specs say nothing of gpu-v100's MaxTime; Slurm would take a 1 h job there and
    keep it pending (PartitionTimeLimit) for ever. The plan reads the limit and says so."""
    specs = tmp_path / "specs"
    write_specs(
        specs,
        [
            cluster_doc,
            project("mt", 8),
            workload("long", "mt", 2, "v100"),  # walltime 1h
            workload("short", "mt", 2, "v100", walltime="5m"),
        ],
    )
    assert slurm("scontrol", "update", "PartitionName=gpu-v100", "MaxTime=00:10:00").returncode == 0
    try:
        observed = ok(cp(capsys, "observe", specs)).json()
        assert {"name": "v100", "maxWalltime": 600} in observed["clusters"][0]["pools"]
        planned = ok(cp(capsys, "plan", specs, "--json")).json()
        assert [(a["op"], a["workload"]) for a in planned["actions"]] == [("submit", "mt/short")]
        (pending,) = planned["pending"]
        assert pending["workload"] == "mt/long"
        assert pending["reason"]["code"] == "walltime-exceeds-limit"
        assert "partition gpu-v100" in pending["reason"]["message"]
        ok(cp(capsys, "apply", specs, "--auto-approve"))
        assert ours(squeue, "mt/long") == [] and len(ours(squeue, "mt/short")) == 1
    finally:
        slurm("scontrol", "update", "PartitionName=gpu-v100", "MaxTime=7-00:00:00")
    # raised again: planned at once
    planned = ok(cp(capsys, "plan", specs, "--json")).json()
    assert [(a["op"], a["workload"]) for a in planned["actions"]] == [("submit", "mt/long")]


def test_a_submission_the_cluster_does_not_show_yet_is_not_repeated(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    squeue: Helper,
) -> None:
    """Observation lag: the store knows of a job that squeue does not list (yet)."""
    specs = tmp_path / "specs"
    write_specs(specs, [cluster_doc, project("ph", 8), workload("lag", "ph", 1, "a100_80")])
    store = Store(default_url(specs), create_dir=True)
    store.add_placeholder("ph/lag", "local", "987654", "some-plan")

    plan = ok(cp(capsys, "plan", specs, "--json")).json()
    assert plan["actions"] == []
    assert waiting(plan) == {"ph/lag": "submitted"}
    assert "987654" in plan["pending"][0]["reason"]["message"]
    assert "987654" in placeholder_rows(specs).values()

    # after the grace period a job Slurm never showed is gone: the workload is planned again
    later = (datetime.now(UTC) + timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%S%z")
    plan = ok(cp(capsys, "plan", specs, "--json", "--now", later)).json()
    assert [(a["op"], a["workload"]) for a in plan["actions"]] == [("submit", "ph/lag")]
    assert "987654" in placeholder_rows(specs).values(), "a plan only reads"
    ok(cp(capsys, "observe", specs, "--now", later))
    assert placeholder_rows(specs) == {}
    assert ours(squeue, "ph/lag") == []


def test_nodes_of_a_closed_partition_are_not_planned_onto(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
) -> None:
    """gpu-v100 closed for maintenance: its idle nodes take no jobs, so none are planned."""
    specs = tmp_path / "specs"
    write_specs(specs, [cluster_doc, project("p", 8), workload("w", "p", 1, "v100")])
    assert slurm("scontrol", "update", "PartitionName=gpu-v100", "State=DOWN").returncode == 0
    try:
        observed = ok(cp(capsys, "observe", specs)).json()
        states = {n["name"]: n["state"] for c in observed["clusters"] for n in c["nodes"]}
        assert states["v100-1"] == states["v100-2"] == "drain" and states["a100-1"] == "idle"
        plan = ok(cp(capsys, "plan", specs, "--json")).json()
        assert plan["actions"] == [] and [p["workload"] for p in plan["pending"]] == ["p/w"]
    finally:
        slurm("scontrol", "update", "PartitionName=gpu-v100", "State=UP")
    plan = ok(cp(capsys, "plan", specs, "--json")).json()
    assert [(a["op"], a["pool"]) for a in plan["actions"]] == [("submit", "v100")]


def test_a_pool_whose_partition_the_cluster_lacks_is_named_in_the_plan(
    clean_slurm: Any, cluster_doc: dict[str, Any], tmp_path: Path, capsys: Capsys
) -> None:
    """A typo in a pool's partition (gpu-a10O) passes cp validate, which reads no cluster;
    the plan said only "0 free" and the work waited for ever. The observation lists the
    cluster's partitions, and the plan says the pool's is not among them."""
    specs = tmp_path / "specs"
    typo = copy.deepcopy(cluster_doc)
    typo["spec"]["gpuTypes"]["a10"] = {"memoryGiB": 24}
    typo["spec"]["nodePools"].append(
        {"name": "a10", "gpuType": "a10", "gpusPerNode": 4, "partition": "gpu-a10O"}
    )
    write_specs(specs, [typo, project("p", 8), workload("w", "p", 2, "a10")])
    ok(cp(capsys, "validate", specs))
    observed = ok(cp(capsys, "observe", specs)).json()
    assert observed["clusters"][0]["partitions"] == ["debug", "gpu-a100", "gpu-v100"]
    plan = ok(cp(capsys, "plan", specs, "--json")).json()
    assert plan["actions"] == [] and waiting(plan) == {"p/w": "no-eligible-pool"}
    assert plan["pending"][0]["reason"]["message"].startswith(
        "pool local/a10 asks for partition gpu-a10O, which cluster local does not have "
        "(it has debug, gpu-a100, gpu-v100)"
    )


def test_a_finished_workload_is_remembered_not_rerun(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    wait_for: Helper,
) -> None:
    """Slurm forgets a finished job after MinJobAge; the store keeps the workload completed."""
    specs = tmp_path / "specs"
    short = workload("once", "p", 1, "a100_80")
    short["spec"]["command"] = ["true"]
    write_specs(specs, [cluster_doc, project("p", 8), short])
    applied = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()
    [job] = [a["job"] for a in applied["actions"]]
    wait_for(lambda: show_job(slurm, job).get("JobState") == "COMPLETED")
    assert ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()["actions"] == []
    ok(cp(capsys, "observe", specs))  # observing records the completion (a plan only reads)
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        assert list(db.execute("SELECT workload, job FROM completions")) == [("p/once", job)]


# ------------------------------------------------------------------------------- drift


def test_an_edit_to_running_work_replaces_its_job_on_slurm(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    squeue: Helper,
    wait_for: Helper,
) -> None:
    """gpus 2 -> 4 on a running job: the plan replaces it (spec-changed, the fields named);
    apply cancels the old Slurm job and the new one runs with 4 GPUs; then nothing."""
    specs = tmp_path / "specs"
    docs = [cluster_doc, project("chem", 8), workload("edited", "chem", 2, "a100_80")]
    write_specs(specs, docs)
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    [old] = [j for j in ours(squeue, "chem/edited") if j.active]  # earlier tests' are gone
    wait_for(lambda: show_job(slurm, old.id).get("JobState") == "RUNNING")

    write_specs(specs, [cluster_doc, project("chem", 8), workload("edited", "chem", 4, "a100_80")])
    planned = ok(cp(capsys, "plan", specs, "--json")).json()
    ops = [(a["op"], a["reason"]["code"]) for a in planned["actions"]]
    assert ops == [("submit", "spec-changed"), ("cancel", "spec-changed")]
    assert planned["actions"][1]["job"] == old.id
    assert "gpus: 2 -> 4" in planned["actions"][1]["reason"]["message"]

    ok(cp(capsys, "apply", specs, "--auto-approve"))
    wait_for(lambda: show_job(slurm, old.id).get("JobState") == "CANCELLED")
    [new] = [j for j in ours(squeue, "chem/edited") if j.active]
    detail = wait_for(lambda: (d := show_job(slurm, new.id)).get("JobState") == "RUNNING" and d)
    assert new.id != old.id and detail["TresPerNode"] == "gres:gpu:a100_80:4"
    settled = ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()
    assert settled["actions"] == []


def test_a_job_waiting_for_nodes_someone_else_took_is_placed_again(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    squeue: Helper,
    wait_for: Helper,
) -> None:
    """Between `cp plan --out` and `cp apply` of that plan, a job of somebody else's took
    the node the plan gave ours: ours waited there (Resources) for ever, 8 GPUs idle on
    the other node, and every plan said no changes (user trial). The next plan sees it
    pinned (squeue %n) to a node that cannot hold it, cancels it and places it again."""
    specs = tmp_path / "specs"
    docs = [cluster_doc, project("p", 16), workload("big", "p", 6, "a100_80")]
    write_specs(specs, docs)
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    wait_for(lambda: [j.state for j in ours(squeue, "p/big")] == ["RUNNING"])
    write_specs(specs, [*docs, workload("late", "p", 2, "a100_80")])
    ok(cp(capsys, "plan", specs, "--out", tmp_path / "plan.json"))
    planned = json.loads((tmp_path / "plan.json").read_text())
    [node] = [r["node"] for a in planned["actions"] for r in a["replicas"]]
    taker = slurm(
        "sbatch", "-p", "gpu-a100", "--gres=gpu:a100_80:2", "-w", node, "-t", "20",
        "-J", "someone-else", "-o", "/dev/null", "--wrap", "sleep 1000",
    )  # fmt: skip
    assert taker.returncode == 0, taker.stderr
    wait_for(lambda: show_job(slurm, taker.stdout.split()[-1]).get("JobState") == "RUNNING")
    applied = ok(cp(capsys, "apply", tmp_path / "plan.json", "--dir", specs, "--json")).json()
    [stuck] = [a["job"] for a in applied["actions"]]
    wait_for(lambda: show_job(slurm, stuck).get("Reason") == "Resources")

    again = ok(cp(capsys, "plan", specs, "--json")).json()
    moves = sorted((a["op"], a.get("job"), a["reason"]["code"]) for a in again["actions"])
    assert moves == [("cancel", stuck, "no-capacity"), ("submit", None, "within-deserved")]
    [submit] = [a for a in again["actions"] if a["op"] == "submit"]
    assert [r["node"] for r in submit["replicas"]] != [node]
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    wait_for(
        lambda: (
            [(j.state, j.nodes) for j in ours(squeue, "p/late") if j.active]
            == [("RUNNING", submit["replicas"][0]["node"])]
        )
    )
