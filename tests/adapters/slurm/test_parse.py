"""Reading Slurm's output and writing its input, without a cluster.

The sample lines are what Slurm 22.05 printed in this repository's local cluster.
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.base import PermanentError, TemporaryError
from adapters.slurm import hostlist
from adapters.slurm.errors import classify, is_gone
from adapters.slurm.forecast import StartForecast, parse_test_only
from adapters.slurm.idempotency import PlanIndex
from adapters.slurm.observation import build_job, build_node, cluster_state, match_pool, pool_states
from adapters.slurm.parse import (
    RS,
    US,
    NodeRow,
    QueueRow,
    job_state,
    node_state,
    parse_allocations,
    parse_gpu_gres,
    parse_sinfo,
    parse_squeue,
    parse_time,
    parse_time_limit,
)
from adapters.slurm.script import BatchRequest, command_of, render_script, sbatch_options
from adapters.slurm.tags import Tag, format_tag, job_name, parse_tag
from adapters.slurm.transport import Completed
from specs.actions import NEVER
from specs.models import NodePool
from specs.snapshot import JobState

POOLS = [
    NodePool(name="a100", gpu_type="a100_80", gpus_per_node=8, partition="gpu-a100"),
    NodePool(name="v100", gpu_type="v100", gpus_per_node=4, partition="gpu-v100"),
]


# ---------------------------------------------------------------------- hostlists


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("a100-1", ["a100-1"]),
        ("a100-[1-3]", ["a100-1", "a100-2", "a100-3"]),
        ("a100-[1,3-4],v100-2", ["a100-1", "a100-3", "a100-4", "v100-2"]),
        ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
        ("r[1-2]-n[1-2]", ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]),
        ("", []),
        ("(null)", []),
    ],
)
def test_hostlists_expand(expr: str, names: list[str]) -> None:
    assert hostlist.expand(expr) == names


@pytest.mark.parametrize("bad", ["a[1-2", "a]1", "a[3-1]", "a[x]"])
def test_bad_hostlists_are_errors(bad: str) -> None:
    with pytest.raises(ValueError):
        hostlist.expand(bad)


# --------------------------------------------------------------------------- tags


def test_tag_round_trip_and_job_name() -> None:
    tag = Tag(workload="chem/md-run", plan_id="p-1", checkpoint="USR1@600")
    assert format_tag(tag) == "cp:v1;workload=chem/md-run;plan=p-1;ckpt=USR1@600"
    assert parse_tag(format_tag(tag)) == tag
    assert job_name("chem/md.run") == "cp.chem.md.run"


@pytest.mark.parametrize(
    ("comment", "workload", "plan"),
    [
        ("cp:v1 workload=chem/md-run plan=abc", "chem/md-run", "abc"),  # the spaced spelling
        ("  cp:v1;plan=x;workload=a/b;future=1  ", "a/b", "x"),
        ("cp:v1;workload=a/b", "a/b", None),
    ],
)
def test_tags_parse_tolerantly(comment: str, workload: str, plan: str | None) -> None:
    tag = parse_tag(comment)
    assert tag is not None and (tag.workload, tag.plan_id) == (workload, plan)


@pytest.mark.parametrize(
    "comment",
    [
        None,
        "",
        "(null)",
        "hello world",
        "cp:v2;workload=a/b",
        "cp:v1",
        "cp:v1;workload=ab",
        "cp:v1;workload=a/b/c",
        "xcp:v1;workload=a/b",
        "cp:v1x;workload=a/b",
    ],
)
def test_anything_else_is_not_ours(comment: str | None) -> None:
    assert parse_tag(comment) is None


@given(plan=st.text(min_size=1), ckpt=st.none() | st.text(min_size=1))
def test_any_plan_id_survives_the_comment(plan: str, ckpt: str | None) -> None:
    tag = Tag(workload="chem/md-run", plan_id=plan, checkpoint=ckpt)
    text = format_tag(tag)
    assert " " not in text and "\n" not in text  # scontrol -o stays one parsable line
    assert parse_tag(text) == tag


# -------------------------------------------------------------------- gres, times


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("gpu:a100_80:8", ("a100_80", 8)),
        ("gpu:a100_80:8(S:0-1)", ("a100_80", 8)),
        ("gres:gpu:a100_80:2", ("a100_80", 2)),
        ("gres:gpu:3", (None, 3)),
        ("gres/gpu:v100=4", ("v100", 4)),
        ("gres/gpu=2", (None, 2)),
        ("gpu:a100_80:3(IDX:0-2)", ("a100_80", 3)),
        ("gpu:v100:2(IDX:0,2),gpu:a100:4(IDX:0-3)", ("a100", 6)),
        ("gpu:a100_80", ("a100_80", 1)),
        ("gres:shard:4", (None, 0)),
        ("(null)", (None, 0)),
        (None, (None, 0)),
    ],
)
def test_gpu_gres(text: str | None, parsed: tuple[str | None, int]) -> None:
    assert parse_gpu_gres(text) == parsed


def test_times_and_limits() -> None:
    assert parse_time("2026-11-22T19:13:41") == datetime(2026, 11, 22, 19, 13, 41, tzinfo=UTC)
    assert parse_time("N/A") is None and parse_time("Unknown") is None
    assert parse_time_limit("1:00:00") == 3600
    assert parse_time_limit("2-00:30:00") == 2 * 86400 + 1800
    assert parse_time_limit("UNLIMITED") is None


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("idle", "idle"),
        ("mixed", "mixed"),
        ("allocated", "allocated"),
        ("alloc", "allocated"),
        ("down*", "down"),
        ("idle*", "down"),
        ("drained", "drain"),
        ("draining", "drain"),
        ("mixed+drain", "drain"),
        ("drng", "drain"),
        ("unknown", "down"),
        ("inval", "down"),
        ("idle~", "idle"),
        ("completing", "mixed"),
        ("maint", "drain"),
        ("idle@", "drain"),
        ("planned", "idle"),
        ("something-new", "down"),
        ("", "down"),
    ],
)
def test_node_states(text: str, state: str) -> None:
    assert node_state(text) == state


def test_job_states() -> None:
    assert job_state("RUNNING", has_nodes=True) is JobState.RUNNING
    assert job_state("CONFIGURING", has_nodes=True) is JobState.RUNNING
    assert job_state("REQUEUE_HOLD", has_nodes=False) is JobState.REQUEUED
    assert job_state("OUT_OF_MEMORY", has_nodes=True) is JobState.FAILED
    assert job_state("BRAND_NEW", has_nodes=True) is JobState.RUNNING
    assert job_state("BRAND_NEW", has_nodes=False) is JobState.PENDING


# ------------------------------------------------------------------------ records


def record(*cols: str, requested: str = "") -> str:
    """A squeue record of ``cols`` (every field but the nodes it asked for, ``requested``)."""
    return RS + US.join([*cols[:12], requested, *cols[12:]]) + "\n"


def test_squeue_records_survive_hostile_names_and_comments() -> None:
    text = (
        record(
            "7",
            "7",
            "RUNNING",
            "my job\nwith newline",
            "gpu-a100",
            "2",
            "a100-[1-2]",
            "gres:gpu:a100_80:3",
            "2026-11-22T19:13:41",
            "2026-11-22T19:13:42",
            "1:00:00",
            "None",
            "evil\x1fcomment\nJobId=9 x",
        )
        + record(
            "8",
            "8",
            "PENDING",
            "cp.chem.md-run",
            "gpu-a100",
            "1",
            "",
            "gres:gpu:a100_80:2",
            "2026-11-22T19:13:41",
            "2026-11-22T21:13:00",
            "1:00:00",
            "Priority",
            "cp:v1;workload=chem/md-run;plan=p1",
        )
        + RS
        + "truncated\n"
    )
    first, second = parse_squeue(text)
    assert first.nodes == ["a100-1", "a100-2"] and first.comment == "evil\x1fcomment\nJobId=9 x"
    assert first.name == "my job\nwith newline"
    job = build_job(first, None, POOLS)
    assert job.workload is None and [(r.node, r.gpus) for r in job.replicas] == [
        ("a100-1", 3),
        ("a100-2", 3),
    ]
    assert job.pool == "a100" and job.started_at == datetime(2026, 11, 22, 19, 13, 42, tzinfo=UTC)

    job = build_job(second, None, POOLS)
    assert (job.workload, job.plan_id, job.state, job.reason) == (
        "chem/md-run",
        "p1",
        JobState.PENDING,
        "Priority",
    )
    assert job.started_at is None  # the StartTime of a pending job is only an estimate
    assert [(r.node, r.gpus) for r in job.replicas] == [(None, 2)]


def test_a_job_cancelled_while_pending_never_started() -> None:
    (row,) = parse_squeue(
        record(
            "3",
            "3",
            "CANCELLED",
            "x",
            "gpu-a100",
            "2",
            "",
            "gres:gpu:a100_80:8",
            "2026-11-22T19:13:41",
            "2026-11-22T19:14:00",
            "1:00:00",
            "Resources",
            "cp:v1;workload=a/b;plan=p",
        )
    )
    job = build_job(row, None, POOLS)
    assert job.state is JobState.CANCELLED and job.started_at is None
    assert [r.node for r in job.replicas] == [None, None]


def test_sinfo_rows_merge_partitions() -> None:
    text = (
        record("a100-1", "gpu-a100", "mixed", "gpu:a100_80:8(S:0)")
        + record("a100-1", "gpu-a100-urgent", "mixed", "gpu:a100_80:8(S:0)")
        + record("cpu-1", "debug*", "idle", "(null)")
    )
    a100, cpu = parse_sinfo(text)
    assert a100.partitions == ["gpu-a100", "gpu-a100-urgent"] and cpu.partitions == ["debug"]
    node = build_node(a100, POOLS)
    assert (node.pool, node.gpu_type, node.gpus, node.state, node.partition) == (
        "a100",
        "a100_80",
        8,
        "mixed",
        "gpu-a100",
    )


def sinfo_record(*cols: str) -> str:
    return RS + US.join(cols) + "\n"


def test_sinfo_reads_each_partitions_time_limit() -> None:
    """%l is the partition's MaxTime: a job asking more pends for ever (PartitionTimeLimit)."""
    text = (
        sinfo_record("a100-1", "gpu-a100", "idle", "gpu:a100_80:8(S:0)", "up", "7-00:00:00")
        + sinfo_record("v100-1", "gpu-v100", "idle", "gpu:v100:4(S:0)", "up", "30:00")
        + sinfo_record("cpu-1", "debug*", "idle", "(null)", "up", "infinite")
    )
    a100, v100, cpu = parse_sinfo(text)
    assert (a100.limits, v100.limits, cpu.limits) == ({"gpu-a100": 604800}, {"gpu-v100": 1800}, {})
    assert [(p.name, p.max_walltime) for p in pool_states([a100, v100, cpu], POOLS)] == [
        ("a100", 604800),
        ("v100", 1800),
    ]
    # an older format without the column: no limit known
    (old,) = parse_sinfo(sinfo_record("v100-1", "gpu-v100", "idle", "gpu:v100:4(S:0)", "up"))
    assert old.limits == {} and pool_states([old], POOLS) == []


def test_pool_matching_prefers_the_gpu_type_when_pools_share_a_partition() -> None:
    shared = [
        NodePool(name="a", gpu_type="a100_80", gpus_per_node=8, partition="gpu"),
        NodePool(name="v", gpu_type="v100", gpus_per_node=4, partition="gpu"),
    ]
    assert match_pool(shared, ["gpu"], "v100") is shared[1]
    assert match_pool(shared, ["other"], "v100") is None
    untyped = build_node(
        NodeRow(name="n1", partitions=["gpu-v100"], state="idle", gres="gpu:4"), POOLS
    )
    assert (untyped.gpu_type, untyped.gpus) == ("v100", 4)


def test_scontrol_detail_gives_per_node_gpus() -> None:
    line = (
        "JobId=4 JobName=wrap UserId=root(0) JobState=RUNNING NodeList=v100-[1-2] NumNodes=2 "
        "JOB_GRES=gpu:v100:3   Nodes=v100-1 CPU_IDs=0 Mem=1024 GRES=gpu:v100:2(IDX:0-1) "
        "  Nodes=v100-2 CPU_IDs=0 Mem=1024 GRES=gpu:v100:1(IDX:0) MinCPUsNode=1 "
        "Comment=hello Nodes=x CPU_IDs=y WorkDir=/tmp TresPerJob=gres:gpu:3\n"
        "No jobs in the system\n"
    )
    alloc = parse_allocations(line)["4"]
    assert alloc.per_node == {"v100-1": 2, "v100-2": 1}
    assert (alloc.gpu_type, alloc.per_job) == ("v100", 3)


# ------------------------------------------------------------------ test-only, errors


def test_test_only_output() -> None:
    text = "sbatch: Job 5 to start at 2026-11-22T21:43:42 using 2 processors on nodes a100-[1-2] in partition gpu-a100"
    assert parse_test_only(text) == StartForecast(
        datetime(2026, 11, 22, 21, 43, 42, tzinfo=UTC), ("a100-1", "a100-2"), "gpu-a100"
    )
    assert (
        parse_test_only("allocation failure: Requested node configuration is not available")
        == NEVER
    )
    assert parse_test_only("sbatch: error: invalid partition specified: nope") is None


def done(stderr: str, rc: int = 1) -> Completed:
    return Completed(("sbatch", "--parsable"), rc, "", stderr)


def test_errors_say_whether_a_retry_helps() -> None:
    down = classify(
        done(
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"
        )
    )
    assert isinstance(down, TemporaryError)
    assert (
        str(down)
        == "sbatch: Batch job submission failed: Unable to contact slurm controller (connect failure)"
    )
    rejected = classify(
        done(
            "sbatch: error: Batch job submission failed: Requested node configuration is not available"
        )
    )
    assert isinstance(rejected, PermanentError) and "Requested node configuration" in str(rejected)
    assert is_gone(done("scancel: error: Kill job error on job id 9: Invalid job id specified"))
    assert not is_gone(done("sbatch: error: invalid partition specified: x"))


# ------------------------------------------------------------------- scripts, options


def request(**kw: object) -> BatchRequest:
    base: dict[str, object] = {
        "workload": "chem/md-run",
        "plan_id": "p1",
        "nodes": ("a100-1",),
        "gpus_per_node": 2,
        "gpu_type": "a100_80",
        "partition": "gpu-a100",
    }
    return BatchRequest(**(base | kw))  # type: ignore[arg-type]


def test_script_quotes_every_argument_and_execs_it() -> None:
    argv = ("python", "train.py", "--name=a b", "$(rm -rf /)", "it's", "")
    script = render_script(request(command=argv, plan_id="p1\nrm -rf /"))
    exec_lines = [line for line in script.splitlines() if line.startswith("exec ")]
    assert len(exec_lines) == 1 and shlex.split(exec_lines[0])[1:] == list(argv)
    assert "\nrm -rf /" not in script  # a newline in a plan id cannot add a line
    assert command_of(script) == argv
    gang = render_script(request(nodes=("a100-1", "a100-2"), command=("x",)))
    assert "exec srun --kill-on-bad-exit=1 --ntasks-per-node=1 x" in gang and command_of(gang) == (
        "x",
    )
    assert command_of("#!/bin/sh\nsrun sleep 300\n") is None


def test_sbatch_options() -> None:
    req = request(
        nodes=("a100-1", "a100-2"),
        walltime=3 * 3600 + 1,
        checkpoint_signal="USR1",
        checkpoint_grace=600,
        account="chem",
        preemptible=True,
    )
    assert sbatch_options(req, work_dir="/w") == [
        "--job-name=cp.chem.md-run",
        "--comment=cp:v1;workload=chem/md-run;plan=p1;ckpt=USR1@600",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--chdir=/w",  # not the directory cp ran in (trialP)
        "--output=/w/%x-%j.out",
        "--requeue",
        "--partition=gpu-a100",
        "--gres=gpu:a100_80:2",
        "--nodelist=a100-1,a100-2",
        "--time=0-03:01:00",
        "--signal=B:USR1@600",
        "--account=chem",
    ]
    loose = sbatch_options(
        request(
            nodes=("a100-1", None),
            gpu_type=None,
            gpus_per_node=1,
            partition=None,
            preemptible=False,
        ),
        work_dir=None,  # a --test-only question: it runs nothing
    )
    assert "--gres=gpu:1" in loose and "--no-requeue" in loose and "--output=/dev/null" in loose
    assert not any(o.startswith("--chdir") for o in loose)
    assert not any(o.startswith(("--nodelist", "--partition", "--time", "--signal")) for o in loose)


@pytest.mark.parametrize(
    "bad",
    [
        {"nodes": ()},
        {"nodes": ("a100-1", "a100-1")},
        {"checkpoint_signal": "USR1; rm"},
        {"command": ()},
    ],
)
def test_requests_slurm_cannot_express_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        request(**bad)


# ------------------------------------------------------------------- idempotency index


def queue_row(job_id: str, state: str, comment: str) -> QueueRow:
    return QueueRow(job_id, job_id, state, "n", "p", 1, [], None, None, None, None, None, comment)


def test_plan_index_reads_the_queue_once_per_plan() -> None:
    queue = [
        queue_row("1", "RUNNING", "cp:v1;workload=a/x;plan=P"),
        queue_row("2", "CANCELLED", "cp:v1;workload=a/y;plan=P"),
        queue_row("3", "PENDING", "cp:v1;workload=a/z;plan=OTHER"),
    ]
    reads: list[str] = []
    now = [0.0]

    def read_queue() -> list[QueueRow]:
        reads.append("queue")
        return queue

    def read_job(job_id: str) -> QueueRow | None:
        reads.append(job_id)
        return next((r for r in queue if r.job_id == job_id), None)

    index = PlanIndex(read_queue, read_job, ttl=60, clock=lambda: now[0])
    assert index.lookup("P", "a/x") == "1" and reads == ["queue"]
    assert index.lookup("P", "a/y") is None  # cancelled: submit again
    assert index.lookup("P", "a/z") is None and reads == ["queue"]  # another plan's job
    index.record("P", "a/y", "4")
    queue.append(queue_row("4", "PENDING", "cp:v1;workload=a/y;plan=P"))
    assert index.lookup("P", "a/y") == "4" and reads == ["queue", "4"]  # a hit is confirmed
    queue[-1] = queue_row("4", "COMPLETED", "cp:v1;workload=a/y;plan=P")
    assert index.lookup("P", "a/y") == "4"  # ran to the end: never run twice
    queue[-1] = queue_row("4", "FAILED", "cp:v1;workload=a/y;plan=P")
    assert index.lookup("P", "a/y") is None  # died since: submit again
    queue.append(queue_row("5", "COMPLETED", "cp:v1;workload=a/v;plan=P"))
    index.forget("P")
    assert index.lookup("P", "a/v") == "5"  # found by a fresh read too
    index.forget("P")
    assert index.lookup("P", "a/x") == "1" and reads.count("queue") == 3
    now[0] = 61.0
    index.lookup("P", "a/x")
    assert reads.count("queue") == 4  # stale after ttl


# ------------------------------------------------------------------------------ sacct

SACCT = "\x1f".join


def test_sacct_rows_become_runs_of_our_jobs() -> None:
    """Lines as Slurm 22.05 printed them (epoch times): a completed job, a requeued one's
    two runs, a failed 2-node job, somebody else's job, one still running (no comment
    until it ends: its tag comes from squeue) and one that never started."""
    from adapters.slurm.accounting import parse_sacct, runs_of

    tag = "cp:v1;workload=team%2Fr;plan=p1"
    text = "\n".join(
        [
            SACCT(
                [
                    "1",
                    "COMPLETED",
                    "1795429987",
                    "1795429992",
                    "billing=1,cpu=1,gres/gpu:a100_80=2,gres/gpu=2,mem=1G,node=1",
                    "01:00:00",
                    "a100-1",
                    "cp:v1;workload=team%2Fa;plan=p1",
                ]
            ),
            SACCT(
                [
                    "2",
                    "REQUEUED",
                    "1795429985",
                    "1795429987",
                    "billing=1,cpu=1,gres/gpu:v100=4,gres/gpu=4,mem=1G,node=1",
                    "01:00:00",
                    "v100-1",
                    tag,
                ]
            ),
            SACCT(
                [
                    "3",
                    "FAILED",
                    "1795429985",
                    "1795429987",
                    "billing=2,gres/gpu:a100_80=16,gres/gpu=16,node=2",
                    "1-00:00:00",
                    "a100-[1-2]",
                    "cp:v1;workload=team%2Ff;plan=p1",
                ]
            ),
            SACCT(
                [
                    "4",
                    "COMPLETED",
                    "1795429985",
                    "1795429988",
                    "gres/gpu=1,node=1",
                    "10:00",
                    "v100-2",
                    "someone else | with a pipe",
                ]
            ),
            SACCT(
                [
                    "5",
                    "RUNNING",
                    "1795429987",
                    "Unknown",
                    "gres/gpu:a100_80=1,gres/gpu=1",
                    "UNLIMITED",
                    "a100-1",
                    "",
                ]
            ),
            SACCT(
                [
                    "2",
                    "COMPLETED",
                    "1795429993",
                    "1795429999",
                    "billing=1,cpu=1,gres/gpu:v100=4,gres/gpu=4,mem=1G,node=1",
                    "01:00:00",
                    "v100-1",
                    tag,
                ]
            ),
            SACCT(
                [
                    "6",
                    "CANCELLED by 0",
                    "None",
                    "1795429990",
                    "",
                    "01:00:00",
                    "None Assigned",
                    "cp:v1;workload=team%2Fc;plan=p1",
                ]
            ),
        ]
    )
    rows = parse_sacct(text)
    assert [r.job_id for r in rows] == ["1", "2", "3", "4", "5", "2", "6"]
    running = {"5": Tag(workload="team/long", plan_id="p2")}
    runs = runs_of(rows, running)
    assert [(r.job, r.workload, r.gpus, r.gpu_type, r.state.value) for r in runs] == [
        ("1", "team/a", 2, "a100_80", "COMPLETED"),
        ("2", "team/r", 4, "v100", "REQUEUED"),
        ("3", "team/f", 16, "a100_80", "FAILED"),
        ("5", "team/long", 1, "a100_80", "RUNNING"),
        ("2", "team/r", 4, "v100", "COMPLETED"),
    ]
    first, requeued, _, running_run, requeued_again = runs
    assert (first.ended_at - first.started_at).total_seconds() == 5
    # the run Slurm took back is over though its state (REQUEUED) is an active one
    assert requeued.ended_at == datetime.fromtimestamp(1795429987, UTC)
    assert running_run.ended_at is None and running_run.time_limit is None
    assert requeued_again.started_at == datetime.fromtimestamp(1795429993, UTC)
    assert first.time_limit == 3600


def test_a_job_waiting_for_the_nodes_a_plan_pinned_it_to_names_them() -> None:
    """A job waits for the nodes the plan gave it (--nodelist, squeue %n): the snapshot
    names them, so a plan can tell when others took them (a job pinned to nodes nobody
    will free waited for ever; user trial on real Slurm)."""
    (row,) = parse_squeue(
        record(
            "5",
            "5",
            "PENDING",
            "cp.p.late",
            "gpu-a100",
            "2",
            "",
            "gres:gpu:a100_80:4",
            "2026-11-22T19:13:41",
            "N/A",
            "1:00:00",
            "Resources",
            "cp:v1;workload=p/late;plan=p1",
            requested="a100-[1-2]",
        )
    )
    job = build_job(row, None, POOLS)
    assert job.state is JobState.PENDING and job.started_at is None
    assert [(r.node, r.gpus) for r in job.replicas] == [("a100-1", 4), ("a100-2", 4)]


def test_a_node_whose_cpus_are_all_taken_takes_no_new_job() -> None:
    """Slurm says ALLOCATED when every CPU of a node is allocated: a GPU job sent there
    waits (Resources), whatever GPUs are free (user trial). MIXED nodes take new jobs."""
    full = parse_sinfo(record("a100-2", "gpu-a100", "allocated", "gpu:a100_80:8(S:0)"))[0]
    busy = parse_sinfo(record("a100-1", "gpu-a100", "mixed", "gpu:a100_80:8(S:0)"))[0]
    assert build_node(full, POOLS).full and not build_node(busy, POOLS).full


def test_the_cluster_reports_the_partitions_sinfo_lists() -> None:
    """So a pool naming a partition the cluster lacks (a typo) is known as such, not as a
    pool with no free GPUs."""
    text = "".join(
        sinfo_record(node, part, "idle", gres, "up")
        for node, part, gres in [
            ("a100-1", "gpu-a100", "gpu:a100_80:8(S:0)"),
            ("cpu-1", "debug*", "(null)"),
            ("v100-1", "gpu-v100", "gpu:v100:4(S:0)"),
        ]
    )
    state = cluster_state("local", parse_sinfo(text), [], [], POOLS)
    assert state.partitions == ["debug", "gpu-a100", "gpu-v100"]
