"""Preempting a checkpointable Slurm job with its own signal and grace (eviction.py), the
pure parts: the tag, the shortened time limit, how an evicted job is observed, and which
commands wind a job down (with a stand-in for Slurm). The adapter's half runs on the real
local Slurm (tests/integration/slurm/test_adapter.py, test_checkpoint.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters.base import TemporaryError
from adapters.slurm.accounting import SacctRow, runs_of
from adapters.slurm.eviction import grace_of, observed_state, shortened_limit, wind_down
from adapters.slurm.observation import build_job
from adapters.slurm.parse import QueueRow
from adapters.slurm.script import BatchRequest, render_script
from adapters.slurm.tags import Tag, format_tag, parse_tag
from adapters.slurm.transport import Completed
from specs.snapshot import JobState

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
EVICTED = "cp:v1;workload=chem/md;plan=p1;ckpt=USR1@120;evicted=p2"


def row(state: str, comment: str) -> QueueRow:
    started = NOW - timedelta(minutes=10)
    return QueueRow("7", "7", state, "cp.chem.md", "gpu", 1, ["a100-1"], "gpu:a100_80:2",
                    started, started, 3600, None, comment)  # fmt: skip


def test_the_tag_names_the_plan_that_evicted_the_job() -> None:
    tag = parse_tag(EVICTED)
    assert tag == Tag("chem/md", plan_id="p1", checkpoint="USR1@120", evicted="p2")
    assert parse_tag(format_tag(tag)) == tag
    assert grace_of("USR1@120") == 120 and grace_of("USR1") is None


@pytest.mark.parametrize(
    ("slurm", "seen"),
    [
        ("RUNNING", JobState.COMPLETING),  # winding down: holds its GPUs until it ends
        ("COMPLETED", JobState.PREEMPTED),  # saved and exited on its signal
        ("TIMEOUT", JobState.PREEMPTED),  # stopped by the shortened limit
        ("FAILED", JobState.PREEMPTED),  # died of the signal (no handler)
        ("PENDING", JobState.PENDING),  # it requeued itself: waits like any queued job
    ],
)
def test_an_evicted_job_is_winding_down_then_preempted(slurm: str, seen: JobState) -> None:
    job = build_job(row(slurm, EVICTED), None, [])
    assert job.state is seen and job.workload == "chem/md"
    plain = build_job(row(slurm, EVICTED.removesuffix(";evicted=p2")), None, [])
    assert plain.state is JobState(slurm) is observed_state(plain.state, None)


def test_an_evicted_job_ends_preempted_in_accounting_too() -> None:
    """A job Slurm forgot before anyone looked is read from sacct: evicted, it is a
    preemption, not a failure that starts a retry backoff."""
    end = NOW - timedelta(minutes=1)
    sacct = SacctRow(
        "7", "TIMEOUT", NOW - timedelta(minutes=9), end, 2, "a100_80", 540, "a100-1", EVICTED
    )
    [run] = runs_of([sacct], {})
    assert run.state is JobState.PREEMPTED and run.ended_at == end


def test_the_shortened_limit_leaves_the_grace_and_a_check_of_slurmctld() -> None:
    started = NOW - timedelta(minutes=10, seconds=5)
    # ran 605 s; + 120 s grace + 30 s for the controller's check = 755 s -> 13 minutes
    assert shortened_limit(started, 3600, 120, NOW) == 13
    assert shortened_limit(started, 13 * 60, 120, NOW) is None  # its own limit is as close
    assert shortened_limit(None, None, 60, NOW) == 2


SEGMENT = render_script(
    BatchRequest("chem/md", "p1", (None,), 1, walltime=3600, command=("train",),
                 checkpoint_signal="USR1", checkpoint_grace=120, segment=1)
)  # fmt: skip


def commands_of(script: str) -> list[list[str]] | None:
    """What winding a running job with ``script`` down runs; None: nothing (the caller
    requeues or cancels it)."""
    ran: list[list[str]] = []

    def run(argv: list[str]) -> Completed:
        ran.append(argv)
        return Completed(tuple(argv), 0, "", "")

    tag = parse_tag(EVICTED.removesuffix(";evicted=p2"))
    assert tag is not None
    ending = wind_down(
        run, row("RUNNING", format_tag(tag)), tag, JobState.RUNNING, "p2", lambda: script
    )  # fmt: skip
    return ran if ending is not None else None


def test_a_segment_is_tagged_then_its_shell_signalled() -> None:
    """Preempted or cancelled alike (a preempted segment was requeued: SIGTERM, not its
    signal). Tagged first: a segment that saves and exits at once is preempted, not
    completed."""
    update, signal = commands_of(SEGMENT) or []
    assert update[:2] == ["scontrol", "update"] and "Comment=" + EVICTED in update
    assert signal == ["scancel", "--batch", "--signal=USR1", "7"]


def test_an_older_segment_script_is_left_to_the_caller() -> None:
    older = SEGMENT.replace("trap forward USR1\n", "")  # its shell would die of the signal
    assert commands_of(older) is None  # requeued, or cancelled
    plain = "#!/bin/bash\nexec train\n"
    [update] = commands_of(plain) or [[]]
    assert update[:2] == ["scontrol", "update"]  # its limit in: Slurm's own --signal fires


FROZEN = "Job update not available right now, the DB index is being set, try again in a bit"


@pytest.mark.parametrize(
    ("storage", "gives_up"),
    [("accounting_storage/none", True), ("accounting_storage/slurmdbd", False), ("", False)],
)
def test_a_job_slurm_will_never_update_is_left_to_the_caller(storage: str, gives_up: bool) -> None:
    """A job an earlier version resized in place on a cluster without accounting storage
    refuses every update for ever (trialN, real Slurm): its eviction failed as temporary on
    every rerun, and held up the apply's other actions. It is left to the caller then (a
    cancel, a requeue); with accounting storage the refusal passes, and is retried."""
    ran: list[list[str]] = []

    def run(argv: list[str]) -> Completed:
        ran.append(argv)
        if argv[:2] == ["scontrol", "update"]:
            return Completed(tuple(argv), 1, "", f"scontrol: error: {FROZEN} for job 7")
        if not storage:  # its configuration could not be read: no giving up
            return Completed(tuple(argv), 1, "", "slurm_load_ctl_conf error")
        return Completed(tuple(argv), 0, f"AccountingStorageType = {storage}\n", "")

    tag = parse_tag(EVICTED.removesuffix(";evicted=p2"))
    assert tag is not None
    running = row("RUNNING", format_tag(tag))

    def wound() -> object:
        return wind_down(run, running, tag, JobState.RUNNING, "p2", lambda: "#!/bin/bash\n")

    if gives_up:
        assert wound() is None
    else:
        with pytest.raises(TemporaryError):
            wound()
