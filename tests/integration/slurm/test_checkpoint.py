"""Checkpoint segments and retry backoff on the real local Slurm.

A workload runs in two segments, each stopped by its checkpoint signal, and completes; a
segment cancelled while it runs saves first; a failing workload waits out its backoff.
(The segment wrapper alone, without Slurm, is tested in
tests/adapters/slurm/test_segment_script.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.slurm import SlurmAdapter
from specs.actions import Op
from specs.snapshot import JobState
from tests.builders.cli import cp, ok, write_specs
from tests.builders.programs import SAVES

Helper = Callable[..., Any]
Capsys = pytest.CaptureFixture[str]


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def show_job(slurm: Helper, job_id: str) -> dict[str, str]:
    out = slurm("scontrol", "-o", "show", "job", job_id).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def ours(squeue: Helper, workload: str) -> list[Any]:
    return [j for j in squeue() if j.workload == workload]


@pytest.mark.slurm
def test_a_workload_runs_in_two_segments_and_completes(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    squeue: Helper,
    wait_for: Helper,
) -> None:
    """16 s of work in segments of at most 15 s, checkpoint signal 5 s before each end: a
    10 s segment, then one for what is left."""
    state = tmp_path / "state"
    work = doc(
        "Workload",
        "long",
        project="p",
        gpus=1,
        gpuTypes=["v100"],
        walltime="15s",
        checkpoint={"signal": "USR1", "grace": "5s", "total": "16s"},
        command=["python3", "-c", SAVES, str(state)],
    )
    specs = write_specs(
        tmp_path / "specs", [cluster_doc, doc("Project", "p", quota={"gpus": 4}), work]
    )
    first = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()
    [one] = [a["job"] for a in first["actions"]]
    wait_for(lambda: show_job(slurm, one).get("JobState") == "COMPLETED", timeout=40)
    assert show_job(slurm, one)["ExitCode"] == "0:0"

    resume = ok(cp(capsys, "plan", specs, "--json")).json()
    [submit] = resume["actions"]
    assert submit["reason"]["code"] == "checkpoint-resume"
    assert submit["reason"]["message"].startswith("segment 2: 1")  # 10s or 11s of 16s done
    assert "of 16s done" in submit["reason"]["message"]
    assert submit["submit"]["segment"] == 2 and submit["submit"]["walltime"] <= 11
    second = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()
    [two] = [a["job"] for a in second["actions"]]
    assert two != one
    wait_for(lambda: show_job(slurm, two).get("JobState") == "COMPLETED", timeout=40)

    done = ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()
    assert done["actions"] == [] and done["pending"] == []  # 16 s reached: complete
    assert state.read_text() == "start\nsaved\nstart\nsaved\n"
    assert sorted(j.id for j in ours(squeue, "p/long")) == sorted([one, two])


@pytest.mark.slurm
@pytest.mark.parametrize(
    ("op", "workload"), [(Op.CANCEL, "chem/seg"), (Op.PREEMPT, "chem/preempted")]
)
def test_a_segment_stopped_gets_its_checkpoint_signal_and_grace(
    adapter: SlurmAdapter,
    make_action: Helper,
    wait_for: Helper,
    tmp_path: Path,
    op: Op,
    workload: str,
) -> None:
    """A running segment whose workload was edited (replaced) or removed got a plain
    scancel: SIGTERM, never its checkpoint signal, while the plan said it saves first
    (user trial); one a plan preempted was requeued (``scontrol requeue``): SIGTERM too,
    and the work since its last save lost. Its script's shell now passes the signal on to
    ``timeout``: the command saves and exits, and the job ends seen as preempted (planned
    again, to resume from its checkpoint), not as a completed segment, nor back in the
    queue."""
    marker = tmp_path / "progress"
    action = make_action(
        workload=workload,
        checkpoint_signal="USR1",
        walltime=300,
        command=["python3", "-c", SAVES, str(marker)],
    )
    assert action.submit is not None
    details = action.submit.model_copy(update={"checkpoint_grace": 5, "segment": 1})
    submitted = adapter.execute(action.model_copy(update={"submit": details}), plan_id="p")
    job_id = submitted.job
    assert job_id is not None
    wait_for(lambda: marker.exists(), timeout=30)
    stop = make_action(op, workload=workload, job=job_id, details=False)
    result = adapter.execute(stop, plan_id="p2")
    assert result.ok and "checkpoint signal" in result.message, result.message
    wait_for(lambda: "saved" in marker.read_text(), timeout=30)
    job = wait_for(
        lambda: (
            (j := next((j for j in adapter.observe().jobs if j.id == job_id), None))
            and not j.state.active
            and j
        )
    )
    assert job.state is JobState.PREEMPTED and job.workload == workload
    assert marker.read_text() == "start\nsaved\n"
    again = adapter.execute(stop, plan_id="p2")  # a rerun of the apply: nothing more
    assert again.ok and "ended" in again.message, again.message


@pytest.mark.slurm
def test_a_segment_preempted_by_a_plan_saves_and_runs_again(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    wait_for: Helper,
) -> None:
    """End to end: urgent work takes the GPUs a running segment holds. The plan preempts
    the segment, which gets its checkpoint signal (it used to be requeued: SIGTERM, and
    back in the queue beside the work it made room for), saves and ends; once the urgent
    work is done, a plan submits the workload again, to resume from its checkpoint."""
    state = tmp_path / "state"
    cluster = {
        **cluster_doc,
        "spec": {**cluster_doc["spec"], "nodePools": cluster_doc["spec"]["nodePools"][1:]},
    }  # the two 4-GPU v100 nodes only
    # its own name: Slurm still shows the jobs of the first test's p/long, completed
    long = doc(
        "Workload",
        "resumes",
        project="p",
        gpus=4,
        walltime="10m",
        checkpoint={"signal": "USR1", "grace": "5s", "total": "20m"},
        command=["python3", "-c", SAVES, str(state)],
    )
    urgent = doc(
        "Workload",
        "urgent",
        project="p",
        type="inference",
        gpus=4,
        replicas=2,
        walltime="2m",
        command=["sleep", "5"],
    )
    project = doc("Project", "p", quota={"gpus": 8})
    specs = write_specs(tmp_path / "specs", [cluster, project, long])
    [one] = [
        a["job"]
        for a in ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()["actions"]
    ]
    wait_for(lambda: state.exists(), timeout=30)

    write_specs(tmp_path / "specs", [cluster, project, long, urgent])
    made = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()
    assert sorted((a["op"], a["workload"]) for a in made["actions"]) == [
        ("preempt", "p/resumes"),
        ("submit", "p/urgent"),
    ]
    wait_for(lambda: "saved" in state.read_text(), timeout=30)
    wait_for(lambda: show_job(slurm, one).get("JobState") not in ("RUNNING", "COMPLETING"))
    assert show_job(slurm, one)["JobState"] != "PENDING"  # not requeued

    def resubmitted() -> list[dict[str, Any]]:
        again = ok(cp(capsys, "plan", specs, "--json")).json()
        return [a for a in again["actions"] if a["workload"] == "p/resumes"]

    [submit] = wait_for(resubmitted, timeout=60)  # once the urgent gang is done
    assert submit["op"] == "submit" and submit["submit"]["segment"] == 1
    assert state.read_text() == "start\nsaved\n"


@pytest.mark.slurm
def test_a_failed_job_waits_out_its_backoff(
    clean_slurm: Any,
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    slurm: Helper,
    wait_for: Helper,
) -> None:
    failing = doc(
        "Workload",
        "bad",
        project="p",
        gpus=1,
        gpuTypes=["v100"],
        walltime="5m",
        command=["bash", "-c", "exit 3"],
    )
    specs = write_specs(
        tmp_path / "specs", [cluster_doc, doc("Project", "p", quota={"gpus": 4}), failing]
    )
    [job] = [
        a["job"]
        for a in ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()["actions"]
    ]
    wait_for(lambda: show_job(slurm, job).get("JobState") == "FAILED")
    waits = ok(cp(capsys, "plan", specs, "--json")).json()
    assert waits["actions"] == []
    [pending] = waits["pending"]
    assert pending["reason"]["code"] == "failed"
    assert f"job {job} failed (exit 3:0)" in pending["reason"]["message"]
    assert "the 1st failure in a row" in pending["reason"]["message"]
    later = (datetime.now(UTC) + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%S%z")
    retry = ok(cp(capsys, "plan", specs, "--json", "--now", later)).json()
    assert [(a["op"], a["workload"]) for a in retry["actions"]] == [("submit", "p/bad")]
