"""SlurmAdapter against a real slurmctld + slurmd (started by conftest), no mocks.

Every test starts from an empty queue. The test that stops the controller runs last
in this module and brings it back.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.base import PermanentError, TemporaryError
from adapters.slurm import SlurmAdapter, StartForecast
from adapters.slurm.localcluster import LocalSlurm
from specs.actions import NEVER, Action, Op
from specs.models import Cluster
from specs.reach import SlurmSettings
from specs.snapshot import Job, JobState
from tests.builders.programs import REQUEUES_ITSELF, SAVES

pytestmark = pytest.mark.slurm
Helper = Callable[..., Any]  # the builders conftest hands out as fixtures


def job_of(adapter: SlurmAdapter, job_id: str | None) -> Job | None:
    assert job_id is not None
    return next((j for j in adapter.observe().jobs if j.id == job_id), None)


def running(adapter: SlurmAdapter, job_id: str | None) -> Job | None:
    job = job_of(adapter, job_id)
    return job if job is not None and job.state is JobState.RUNNING else None


def show_job(job_id: str | None) -> str:
    assert job_id is not None
    done = subprocess.run(
        ["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, check=False
    )
    return done.stdout


# ------------------------------------------------------------------------ observe


def test_observe_reports_nodes_gpus_and_pools(adapter: SlurmAdapter) -> None:
    state = adapter.observe()
    assert state.name == "local"
    nodes = {n.name: n for n in state.nodes}
    assert sorted(nodes) == ["a100-1", "a100-2", "cpu-1", "cpu-2", "v100-1", "v100-2"]
    assert (nodes["a100-1"].gpus, nodes["a100-1"].gpu_type, nodes["a100-1"].pool) == (
        8,
        "a100_80",
        "a100",
    )
    assert (nodes["v100-2"].gpus, nodes["v100-2"].gpu_type, nodes["v100-2"].pool) == (
        4,
        "v100",
        "v100",
    )
    assert nodes["v100-2"].partition == "gpu-v100"
    assert (nodes["cpu-1"].gpus, nodes["cpu-1"].pool, nodes["cpu-1"].partition) == (
        0,
        None,
        "debug",
    )
    assert {n.state for n in state.nodes} == {"idle"}
    assert [j for j in state.jobs if j.state.active] == []
    # the partitions' MaxTime (7 days on the GPU partitions), for the pools that have one
    week = 7 * 24 * 3600
    assert [(p.name, p.max_walltime) for p in state.pools] == [("a100", week), ("v100", week)]


# ------------------------------------------------------------------------- submit


def test_submit_runs_on_the_planned_node_with_the_planned_gres(
    adapter: SlurmAdapter, tmp_path: Path, make_action: Helper, wait_for: Helper
) -> None:
    # argv elements a shell would mangle: they must reach the program exactly
    args = ["a b", "$HOME", "c;d'e", '"q"', "*"]
    program = "import json,sys,time; print(json.dumps(sys.argv[1:]), flush=True); time.sleep(300)"
    action = make_action(nodes=["a100-2"], gpus=3, command=["python3", "-c", program, *args])
    before = datetime.now(UTC)
    result = adapter.execute(action, plan_id="plan-1")
    assert result.ok and result.job and result.job.isdigit()

    job = wait_for(lambda: running(adapter, result.job))
    assert job.workload == "chem/md-run" and job.plan_id == "plan-1"
    assert [(r.node, r.gpus) for r in job.replicas] == [("a100-2", 3)]
    assert (job.pool, job.partition, job.gpu_type, job.walltime) == (
        "a100",
        "gpu-a100",
        "a100_80",
        3600,
    )
    # aware UTC times, taken by Slurm within seconds of now (Slurm's clock is this host's)
    assert job.submitted_at is not None and job.started_at is not None
    assert job.submitted_at.utcoffset() == timedelta(0)
    assert before - timedelta(seconds=5) <= job.submitted_at <= job.started_at
    assert job.started_at <= datetime.now(UTC) + timedelta(seconds=5)

    detail = show_job(result.job)
    assert "TresPerNode=gres:gpu:a100_80:3" in detail
    assert "Partition=gpu-a100" in detail and "NodeList=a100-2" in detail
    assert "Comment=cp:v1;workload=chem/md-run;plan=plan-1" in detail
    assert "JobName=cp.chem.md-run" in detail

    output = tmp_path / "work" / f"cp.chem.md-run-{result.job}.out"
    assert wait_for(lambda: output.exists() and output.read_text().strip())
    assert json.loads(output.read_text()) == args
    script = tmp_path / "work" / "cp.chem.md-run.plan-1.sh"
    assert script.read_text().startswith("#!/bin/bash\n")


def test_a_job_gets_its_environment_and_directory_not_the_control_planes(
    cluster_spec: Cluster,
    clean_slurm: LocalSlurm,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_action: Helper,
    wait_for: Helper,
) -> None:
    """sbatch exported the environment `cp` ran in: the store's password in `CP_DB`, cloud
    credentials, and `cp`'s virtualenv first on PATH (a job's `python3` was `cp`'s) reached
    every job (user trial on a real cluster). A job gets a login's basics, and what the
    cluster's `slurm.exportEnv` names."""
    own = str(Path(sys.prefix) / "bin")
    monkeypatch.setenv("CP_DB", "postgresql://cp:s3cret@db/cp")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cret")
    monkeypatch.setenv("PATH", f"{own}:{os.environ['PATH']}")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("SITE_SCRATCH", "/scratch")
    # the job starts in the work dir, not where cp runs (a CI runner, a service: trialP)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    settings = SlurmSettings(export_env=["SITE_SCRATCH"])
    spec = cluster_spec.model_copy(
        update={"spec": cluster_spec.spec.model_copy(update={"slurm": settings})}
    )
    adapter = SlurmAdapter(spec, work_dir=tmp_path / "work", timeout=30)
    result = adapter.execute(make_action(command=["env"]), plan_id="env-1")
    output = tmp_path / "work" / f"cp.chem.md-run-{result.job}.out"
    text = wait_for(
        lambda: output.exists() and "SLURM_JOB_ID=" in output.read_text() and output.read_text()
    )
    seen = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert "s3cret" not in text and "CP_DB" not in seen
    assert own not in seen["PATH"].split(":") and "/usr/bin" in seen["PATH"].split(":")
    assert (seen["LANG"], seen["SITE_SCRATCH"]) == ("C.UTF-8", "/scratch")
    assert seen["HOME"] == os.environ["HOME"]
    assert seen["PWD"] == str(tmp_path / "work") and f"WorkDir={tmp_path / 'work'}" in show_job(
        result.job
    )


def test_times_are_utc_whatever_the_local_zone(
    adapter: SlurmAdapter, monkeypatch: pytest.MonkeyPatch, make_action: Helper, wait_for: Helper
) -> None:
    # Slurm prints local time without a zone; a control plane in Kolkata must still see UTC
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    result = adapter.execute(make_action(), plan_id="p")
    job = wait_for(lambda: running(adapter, result.job))
    assert abs(job.submitted_at - datetime.now(UTC)) < timedelta(seconds=30)


def test_resubmitting_the_same_plan_returns_the_same_job(
    adapter: SlurmAdapter, make_action: Helper
) -> None:
    action = make_action(nodes=["a100-1"], gpus=2)
    first = adapter.execute(action, plan_id="plan-7")
    again = adapter.execute(action, plan_id="plan-7")
    assert again.job == first.job and "already submitted" in again.message
    assert [j.id for j in adapter.jobs_of("chem/md-run") if j.state.active] == [first.job]
    # a new plan is a new decision: it gets its own job
    other = adapter.execute(action, plan_id="plan-8")
    assert other.job != first.job


def test_gang_spans_two_nodes(
    adapter: SlurmAdapter, make_action: Helper, slurm: Helper, wait_for: Helper
) -> None:
    planned = adapter.execute(
        make_action(workload="ml/gang", nodes=["a100-1", "a100-2"], gpus=4), plan_id="g"
    )
    job = wait_for(lambda: running(adapter, planned.job))
    assert sorted((r.node, r.gpus) for r in job.replicas) == [("a100-1", 4), ("a100-2", 4)]
    # one srun task per node: the workload runs on both
    assert wait_for(
        lambda: re.search(
            r"Nodes=2 .*Tasks=2", slurm("scontrol", "-o", "show", "step", f"{planned.job}.0").stdout
        )
    )

    # without node names Slurm places the gang itself, still one replica per node
    placed = adapter.execute(
        make_action(
            workload="ml/gang2",
            nodes=[None, None],
            gpus=2,
            pool="v100",
            partition="gpu-v100",
            gpu_type="v100",
        ),
        plan_id="g",
    )
    job = wait_for(lambda: running(adapter, placed.job))
    assert sorted(r.node for r in job.replicas) == ["v100-1", "v100-2"]
    assert {r.gpus for r in job.replicas} == {2}


def test_a_pending_job_names_the_nodes_it_waits_for(
    adapter: SlurmAdapter, make_action: Helper, wait_for: Helper
) -> None:
    """A job pinned to a node (--nodelist) waits there: its replicas name the node it asked
    for (squeue %n), so a plan can tell when others hold it; it holds no GPUs yet."""
    adapter.execute(
        make_action(
            workload="a/fill",
            nodes=["v100-1"],
            gpus=4,
            pool="v100",
            partition="gpu-v100",
            gpu_type="v100",
        ),
        plan_id="p",
    )
    waiting = adapter.execute(
        make_action(
            workload="a/wait",
            nodes=["v100-1"],
            gpus=1,
            pool="v100",
            partition="gpu-v100",
            gpu_type="v100",
        ),
        plan_id="p",
    )
    job = wait_for(
        lambda: (j := job_of(adapter, waiting.job)) and j.reason not in (None, "None") and j
    )
    assert job.state is JobState.PENDING and job.started_at is None
    assert not job.state.holds_gpus
    assert [(r.node, r.gpus) for r in job.replicas] == [("v100-1", 1)]


# ------------------------------------------------------------------ cancel / preempt


def test_cancel_and_cancel_again(
    adapter: SlurmAdapter, make_action: Helper, wait_for: Helper
) -> None:
    submitted = adapter.execute(make_action(), plan_id="p")
    wait_for(lambda: running(adapter, submitted.job))
    cancel = make_action(Op.CANCEL, job=submitted.job)
    assert adapter.execute(cancel, plan_id="p2").ok
    job = wait_for(lambda: (j := job_of(adapter, submitted.job)) and not j.state.holds_gpus and j)
    assert job.state is JobState.CANCELLED and job.workload == "chem/md-run"
    # already gone, or never known: done
    assert "already ended" in adapter.execute(cancel, plan_id="p2").message
    assert adapter.execute(make_action(Op.CANCEL, job="999999"), plan_id="p2").ok


def start_checkpointable(
    adapter: SlurmAdapter,
    make_action: Helper,
    wait_for: Helper,
    workload: str,
    node: str,
    program: str,
    marker: Path,
) -> str:
    """A checkpointable job (USR1, 5 s grace) of ``program`` on ``node``, running and
    started (``marker`` written); its id."""
    action = make_action(
        workload=workload,
        checkpoint_signal="USR1",
        nodes=[node],
        command=["python3", "-c", program, str(marker)],
    )
    assert action.submit is not None
    grace = action.submit.model_copy(update={"checkpoint_grace": 5})
    submitted = adapter.execute(action.model_copy(update={"submit": grace}), plan_id="p")
    wait_for(lambda: running(adapter, submitted.job) and marker.exists())
    assert submitted.job is not None
    return submitted.job


def test_preempt_gives_a_checkpointable_job_its_signal_and_grace(
    adapter: SlurmAdapter, make_action: Helper, wait_for: Helper, tmp_path: Path
) -> None:
    """Slurm's own ``--signal`` delivers the checkpoint signal once the time limit is
    brought in; the workload saves and exits, and the job is seen as preempted (not
    completed, not failed). A requeue gave SIGTERM and, KillWait later, SIGKILL."""
    marker = tmp_path / "progress"
    # chem/ckpt ends COMPLETED: another test's plan "p" would find it
    job_id = start_checkpointable(
        adapter, make_action, wait_for, "chem/ckpt", "a100-1", SAVES, marker
    )
    preempt = make_action(Op.PREEMPT, workload="chem/ckpt", job=job_id, details=False)
    result = adapter.execute(preempt, plan_id="p2")
    assert result.ok and result.job == job_id and "checkpoint signal" in result.message
    detail = show_job(job_id)
    assert "evicted=p2" in detail and "TimeLimit=00:01:00" in detail  # 5 s + 30 s, a minute
    job = job_of(adapter, job_id)
    assert job is not None and job.state is JobState.COMPLETING  # holds its GPUs till it ends
    assert "already ending" in adapter.execute(preempt, plan_id="p3").message
    wait_for(lambda: "saved" in marker.read_text(), timeout=90)
    job = wait_for(lambda: (j := job_of(adapter, job_id)) and not j.state.active and j)
    assert job.state is JobState.PREEMPTED and job.workload == "chem/ckpt"
    assert marker.read_text() == "start\nsaved\n"  # one signal, and no restart


def test_an_evicted_job_cannot_requeue_itself(
    adapter: SlurmAdapter, make_action: Helper, wait_for: Helper, tmp_path: Path
) -> None:
    """A workload that requeues its own job on the checkpoint signal (PyTorch Lightning's
    SLURM environment) came back PENDING after an eviction, with the shortened time
    limit, and ran again briefly beside the work it was evicted for. The eviction now
    makes the job not requeueable: the workload saves, its requeue is refused, and the
    job ends at the limit, seen as preempted."""
    marker = tmp_path / "progress"
    job_id = start_checkpointable(
        adapter, make_action, wait_for, "chem/lightning", "a100-2", REQUEUES_ITSELF, marker
    )
    preempt = make_action(Op.PREEMPT, workload="chem/lightning", job=job_id, details=False)
    assert adapter.execute(preempt, plan_id="p2").ok
    wait_for(lambda: "saved" in marker.read_text(), timeout=90)
    assert "requeue=0" not in marker.read_text()  # refused
    job = wait_for(
        lambda: (j := job_of(adapter, job_id)) and not j.state.holds_gpus and j,
        timeout=120,
    )
    assert job.state is JobState.PREEMPTED, job.state
    assert marker.read_text().count("start") == 1  # it never ran again


def test_a_cancel_gives_a_checkpointable_job_its_signal_and_grace(
    adapter: SlurmAdapter, make_action: Helper, wait_for: Helper, tmp_path: Path
) -> None:
    """A checkpointable job cancelled (its workload edited and replaced, or removed) got a
    plain scancel: no checkpoint signal, no grace, while a preemption gave both, and a
    Kubernetes deletion gives its grace and preStop signal (user trial on Slurm)."""
    marker = tmp_path / "progress"
    job_id = start_checkpointable(
        adapter, make_action, wait_for, "chem/edited", "a100-1", SAVES, marker
    )
    cancel = make_action(Op.CANCEL, workload="chem/edited", job=job_id, details=False)
    result = adapter.execute(cancel, plan_id="p2")
    assert result.ok and "checkpoint signal" in result.message, result.message
    wait_for(lambda: "saved" in marker.read_text(), timeout=90)
    job = wait_for(lambda: (j := job_of(adapter, job_id)) and not j.state.active and j)
    assert not job.state.holds_gpus and marker.read_text() == "start\nsaved\n"


def test_a_move_gives_the_old_checkpointable_job_its_signal_and_grace(
    adapter: SlurmAdapter, make_action: Helper, wait_for: Helper, tmp_path: Path
) -> None:
    """A move (or resize) submits the new job, then ends the old one; the old job got a
    plain scancel, SIGTERM, so the move lost what it had done since its last checkpoint,
    while a cancel and a preemption give the signal and grace (noticed with the segment
    fix)."""
    marker = tmp_path / "progress"
    job_id = start_checkpointable(
        adapter, make_action, wait_for, "chem/moved", "a100-1", SAVES, marker
    )
    move = make_action(
        Op.MOVE,
        workload="chem/moved",
        job=job_id,
        nodes=["a100-2"],
        checkpoint_signal="USR1",
        command=["python3", "-c", SAVES, str(marker)],
    )
    assert adapter.execute(move, plan_id="p2").ok
    wait_for(lambda: "saved" in marker.read_text(), timeout=90)
    old = wait_for(lambda: (j := job_of(adapter, job_id)) and not j.state.active and j)
    assert old.state is JobState.PREEMPTED, old.state


def test_preempt_cancels_a_job_without_checkpoint(
    adapter: SlurmAdapter, make_action: Helper, wait_for: Helper
) -> None:
    submitted = adapter.execute(make_action(), plan_id="p")
    wait_for(lambda: running(adapter, submitted.job))
    result = adapter.execute(
        make_action(Op.PREEMPT, job=submitted.job, details=False), plan_id="p2"
    )
    assert result.ok and "cancelled" in result.message
    assert wait_for(lambda: (j := job_of(adapter, submitted.job)) and j.state is JobState.CANCELLED)


def test_unmanaged_job_is_observed_but_never_touched(
    adapter: SlurmAdapter, make_action: Helper, slurm: Helper, wait_for: Helper
) -> None:
    out = slurm(
        "sbatch",
        "--parsable",
        "-p",
        "gpu-v100",
        "--gres=gpu:v100:2",
        "-o",
        "/dev/null",
        "--comment=somebody else's job",
        "--wrap",
        "sleep 300",
    )
    foreign = out.stdout.strip()
    assert foreign.isdigit(), out.stderr
    job = wait_for(lambda: running(adapter, foreign))
    assert job.workload is None and job.plan_id is None
    assert [r.gpus for r in job.replicas] == [2] and job.pool == "v100"
    for op in (Op.CANCEL, Op.PREEMPT, Op.MOVE):
        with pytest.raises(PermanentError, match="not tagged"):
            adapter.execute(make_action(op, job=foreign, nodes=["v100-2"]), plan_id="p")
    assert running(adapter, foreign)

    # ours, but for another workload: also refused
    mine = adapter.execute(make_action(workload="chem/a"), plan_id="p")
    with pytest.raises(PermanentError, match="belongs to workload chem/a"):
        adapter.execute(make_action(Op.CANCEL, workload="chem/b", job=mine.job), plan_id="p")


def test_a_job_of_a_renamed_project_is_touched_as_the_tag_it_carries(
    adapter: SlurmAdapter, make_action: Helper, wait_for: Helper
) -> None:
    """Project chem renamed bio (spec.renamedFrom): the plan cancels bio/a, whose job is
    tagged chem/a, and says so (``tagged_as``); another workload's tag is still refused."""
    mine = adapter.execute(make_action(workload="chem/a"), plan_id="p")
    wait_for(lambda: running(adapter, mine.job))

    def cancel(tagged_as: str) -> Action:
        action = make_action(Op.CANCEL, workload="bio/a", job=mine.job)
        return action.model_copy(update={"tagged_as": tagged_as})

    with pytest.raises(PermanentError, match="belongs to workload chem/a, not bio/a"):
        adapter.execute(cancel("chem/b"), plan_id="p")
    assert running(adapter, mine.job)
    assert adapter.execute(cancel("chem/a"), plan_id="p").ok
    assert wait_for(lambda: (j := job_of(adapter, mine.job)) and j.state is JobState.CANCELLED)


# ------------------------------------------------------------------- move / resize


def test_move_resubmits_on_the_new_node_and_cancels_the_old_job(
    adapter: SlurmAdapter, make_action: Helper, slurm: Helper, wait_for: Helper
) -> None:
    first = adapter.execute(
        make_action(nodes=["a100-1"], gpus=2, checkpoint_signal="USR1", command=["sleep", "301"]),
        plan_id="p1",
    )
    wait_for(lambda: running(adapter, first.job))
    # as plans write it: no submit details, only the new placement
    move = make_action(Op.MOVE, job=first.job, nodes=["a100-2"], gpus=2, details=False)
    moved = adapter.execute(move, plan_id="p2")
    assert moved.ok and moved.job != first.job
    job = wait_for(lambda: running(adapter, moved.job))
    assert [(r.node, r.gpus) for r in job.replicas] == [("a100-2", 2)] and job.plan_id == "p2"
    # the old job, checkpointable, is given its signal and grace: it ends preempted
    assert wait_for(
        lambda: (j := job_of(adapter, first.job)) and j.state is JobState.PREEMPTED, timeout=120
    )
    detail = show_job(moved.job)
    assert "ckpt=USR1@60" in detail and "TimeLimit=01:00:00" in detail
    assert "exec sleep 301" in slurm("scontrol", "write", "batch_script", moved.job, "-").stdout
    # retried: nothing new
    assert adapter.execute(move, plan_id="p2").job == moved.job

    # resize to a gang of two: the command now runs under srun on both nodes
    resize = make_action(
        Op.RESIZE, job=moved.job, nodes=["a100-1", "a100-2"], gpus=2, details=False
    )
    grown = adapter.execute(resize, plan_id="p3")
    job = wait_for(lambda: running(adapter, grown.job))
    assert sorted(r.node for r in job.replicas) == ["a100-1", "a100-2"]
    assert (
        "exec srun --kill-on-bad-exit=1 --ntasks-per-node=1 sleep 301"
        in slurm("scontrol", "write", "batch_script", grown.job, "-").stdout
    )


@pytest.fixture
def stored(
    accounting_slurm: LocalSlurm,
    cluster_spec: Cluster,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    slurm: Helper,
) -> Iterator[SlurmAdapter]:
    """The adapter of the cluster whose slurmctld stores jobs (slurmdbd), its queue empty
    before and after; this test's own Slurm commands (``slurm``, ``show_job``) go to it."""
    monkeypatch.setenv("SLURM_CONF", str(accounting_slurm.slurm_conf))

    def cancel_all() -> None:
        if ids := slurm("squeue", "-h", "-o", "%i").stdout.split():
            slurm("scancel", *ids)

    cancel_all()
    spec = cluster_spec.model_dump(by_alias=True)
    spec["spec"]["slurm"] = {"account": "cp-test"}  # its associations are enforced
    yield SlurmAdapter(Cluster.model_validate(spec), work_dir=tmp_path / "work", timeout=30)
    cancel_all()


def elastic_gang(
    adapter: SlurmAdapter, make_action: Helper, wait_for: Helper, *, seconds: int, plan_id: str
) -> Any:
    """``ml/elastic``, a gang of 2 x 2 GPUs on a100-1 and a100-2 that sleeps ``seconds``,
    submitted and running: the adapter's result."""
    gang = make_action(
        workload="ml/elastic", nodes=["a100-1", "a100-2"], gpus=2,
        command=["sleep", str(seconds)], elastic=True,
    )  # fmt: skip
    started = adapter.execute(gang, plan_id=plan_id)
    wait_for(lambda: running(adapter, started.job))
    return started


def test_an_elastic_gang_gives_a_node_back_in_place(
    stored: SlurmAdapter, make_action: Helper, slurm: Helper, wait_for: Helper
) -> None:
    """A resize that takes a replica from a running elastic gang (reclaim, preemption)
    keeps its job: Slurm releases the node, and the task on the node it keeps runs on. It
    used to be a new job, which restarted every replica. The node its batch script runs on
    cannot be released: a resize that takes that one replaces the job as before. (On a
    cluster that stores jobs: see the next test for one that does not.)"""
    adapter = stored
    started = elastic_gang(adapter, make_action, wait_for, seconds=303, plan_id="e1")
    script = slurm("scontrol", "write", "batch_script", started.job, "-").stdout
    assert "exec srun --no-kill --kill-on-bad-exit=0 --ntasks-per-node=1 sleep 303" in script
    assert wait_for(
        lambda: (
            "State=RUNNING" in slurm("scontrol", "-o", "show", "step", f"{started.job}.0").stdout
        )
    )
    host = re.search(r"BatchHost=(\S+)", show_job(started.job))
    assert host is not None
    kept, freed = host.group(1), ({"a100-1", "a100-2"} - {host.group(1)}).pop()
    shrink = make_action(
        Op.RESIZE, workload="ml/elastic", job=started.job, nodes=[kept], gpus=2, elastic=True
    )
    shrunk = adapter.execute(shrink, plan_id="e2")
    assert shrunk.ok and shrunk.job == started.job, shrunk
    job = wait_for(lambda: (j := running(adapter, started.job)) and len(j.replicas) == 1 and j)
    assert [(r.node, r.gpus) for r in job.replicas] == [(kept, 2)]
    assert job.plan_id == "e1" and job.started_at is not None  # the same job runs on
    # the released node takes other work now
    other = adapter.execute(make_action(workload="ml/next", nodes=[freed], gpus=8), plan_id="e3")
    wait_for(lambda: running(adapter, other.job))
    # the step on the node kept still runs (the batch shell execs it: were it gone, the job
    # would have ended)
    step = slurm("scontrol", "-o", "show", "step", f"{started.job}.0").stdout
    assert "State=RUNNING" in step, step
    assert running(adapter, started.job) is not None
    # retried (an apply interrupted after the update): nothing more happens
    again = adapter.execute(shrink, plan_id="e2")
    assert again.job == started.job and "already" in again.message

    # a gang that is not elastic is replaced as before: a new job on the node kept; so is
    # an elastic one that gives back the node its batch script runs on
    batch = adapter.execute(
        make_action(workload="ml/batch", nodes=["v100-1", "v100-2"], gpus=1, pool="v100",
                    partition="gpu-v100", gpu_type="v100", command=["sleep", "305"], elastic=True),
        plan_id="b1",
    )  # fmt: skip
    wait_for(lambda: running(adapter, batch.job))
    host = re.search(r"BatchHost=(\S+)", show_job(batch.job))
    assert host is not None
    other_node = ({"v100-1", "v100-2"} - {host.group(1)}).pop()
    moved = adapter.execute(
        make_action(Op.RESIZE, workload="ml/batch", job=batch.job, nodes=[other_node], gpus=1,
                    pool="v100", partition="gpu-v100", gpu_type="v100", command=["sleep", "305"],
                    elastic=True),
        plan_id="b2",
    )  # fmt: skip
    assert moved.job != batch.job
    fixed = adapter.execute(
        make_action(workload="ml/fixed", nodes=["v100-1", "v100-2"], gpus=1, pool="v100",
                    partition="gpu-v100", gpu_type="v100", command=["sleep", "304"]),
        plan_id="f1",
    )  # fmt: skip
    wait_for(lambda: running(adapter, fixed.job))
    replaced = adapter.execute(
        make_action(Op.RESIZE, workload="ml/fixed", job=fixed.job, nodes=["v100-2"], gpus=1,
                    pool="v100", partition="gpu-v100", gpu_type="v100", command=["sleep", "304"]),
        plan_id="f2",
    )  # fmt: skip
    assert replaced.job != fixed.job


def test_without_accounting_storage_an_elastic_gang_is_replaced(
    adapter: SlurmAdapter, make_action: Helper, wait_for: Helper
) -> None:
    """On a slurmctld without accounting storage a job resized in place refused every
    later update for ever ("the DB index is being set"; trialN): its checkpoint eviction,
    its next shrink, its cancel with grace all failed on every rerun, and held up the
    apply's other actions. Such a cluster's elastic gang is replaced instead, and the job
    that replaces it takes updates."""
    started = elastic_gang(adapter, make_action, wait_for, seconds=306, plan_id="n1")
    host = re.search(r"BatchHost=(\S+)", show_job(started.job))
    assert host is not None
    shrink = make_action(
        Op.RESIZE, workload="ml/elastic", job=started.job, nodes=[host.group(1)], gpus=2,
        command=["sleep", "306"], elastic=True,
    )  # fmt: skip
    replaced = adapter.execute(shrink, plan_id="n2")
    assert replaced.ok and replaced.job != started.job, replaced
    job = wait_for(lambda: running(adapter, replaced.job))
    assert [(r.node, r.gpus) for r in job.replicas] == [(host.group(1), 2)]
    update = subprocess.run(
        ["scontrol", "update", f"JobId={replaced.job}", "TimeLimit=30"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert update.returncode == 0, update.stderr


# ------------------------------------------------------------------ errors, forecast


def test_slurm_rejections_are_permanent_with_slurms_message(
    adapter: SlurmAdapter, make_action: Helper
) -> None:
    with pytest.raises(PermanentError, match="Requested node configuration is not available"):
        adapter.execute(make_action(gpus=9), plan_id="p")
    with pytest.raises(PermanentError, match=r"[Ii]nvalid partition"):
        adapter.execute(make_action(partition="no-such-partition"), plan_id="p")
    with pytest.raises(PermanentError, match="same GRES on every node"):
        adapter.execute(
            make_action(nodes=["a100-1", "a100-2"]).model_copy(
                update={"replicas": [make_action().replicas[0], make_action(gpus=2).replicas[0]]}
            ),
            plan_id="p",
        )


def test_test_only_forecasts_a_start_or_never(
    adapter: SlurmAdapter, make_action: Helper, wait_for: Helper
) -> None:
    now = datetime.now(UTC)
    forecast = adapter.test_only(make_action(nodes=[None, None], gpus=8))
    assert isinstance(forecast, StartForecast)
    assert forecast.partition == "gpu-a100" and forecast.nodes == ("a100-1", "a100-2")
    assert now - timedelta(seconds=5) < forecast.start < now + timedelta(minutes=5)
    # nothing was queued
    assert [j for j in adapter.observe().jobs if j.state.active] == []

    # busy: the estimate moves to when the running job's time limit ends
    blocker = adapter.execute(
        make_action(workload="x/blocker", gpus=8, nodes=["a100-1"], walltime=7200), plan_id="p"
    )
    wait_for(lambda: running(adapter, blocker.job))
    later = adapter.test_only(make_action(nodes=["a100-1"], gpus=1))
    assert isinstance(later, StartForecast) and later.start > now + timedelta(minutes=100)

    assert adapter.test_only(make_action(gpus=9)) == NEVER


# ------------------------------------------------------------- controller down (last)


def test_unreachable_controller_is_a_temporary_error(
    adapter: SlurmAdapter,
    local_slurm: LocalSlurm,
    cluster_spec: Cluster,
    tmp_path: Path,
    make_action: Helper,
) -> None:
    local_slurm.stop_controller()
    try:
        with pytest.raises(TemporaryError, match="Unable to contact slurm controller"):
            adapter.execute(make_action(), plan_id="p")
        # a controller that hangs rather than refuses: the command timeout turns it into a retry
        impatient = SlurmAdapter(cluster_spec, work_dir=tmp_path, timeout=2)
        with pytest.raises(TemporaryError, match="timed out"):
            impatient.observe()
    finally:
        local_slurm.start()
    assert len(adapter.observe().nodes) == 6
