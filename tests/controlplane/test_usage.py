"""Usage from job facts: exact to the second however rarely anyone observes.

The issue's scenario: a 4-GPU job of 5 h started at 00:00 and next observed at 06:00,
after it ended, counted 0 GPU-hours (usage was accrued only between observations that saw
it running), so a 10 GPU-hour monthly budget let a second job start; with one observation
at 01:00 it counted 4 instead of 20. Here the store counts runs from the cluster's
accounting (the simulator's job records), driven through apply and observe.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from solvers.sitepolicy.budgets import usage_this_month
from solvers.sitepolicy.prices import Prices
from specs.snapshot import JobRun, JobState, UsageRecord
from tests.builders import cluster, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]
POOLS = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]


def specs(root: Path, *extra: dict[str, object]) -> Path:
    docs = [
        cluster(pools=POOLS),
        project("p", gpus=8, budget={"gpuHoursPerMonth": 10}),
        workload("first", "p", gpus=4, walltime="5h"),
        *extra,
    ]
    return write_specs(root, docs)


def usage(capsys: Capsys, root: Path, now: str) -> float:
    snap = cp(capsys, "observe", root, "--now", now).json()
    return sum(u["gpuHours"] for u in snap["usage"] if u["project"] == "p")


@pytest.mark.parametrize("between", [[], ["2026-11-02T01:00:00"]], ids=["none", "one at 01:00"])
def test_a_job_ended_between_observations_counts_in_full(
    tmp_path: Path, capsys: Capsys, between: list[str]
) -> None:
    root = specs(tmp_path / "s")
    assert cp(capsys, "apply", root, "--auto-approve", "--now", "2026-11-02T00:00:00").code == 0
    for now in between:
        assert cp(capsys, "observe", root, "--now", now).code == 0
    assert usage(capsys, root, "2026-11-02T06:00:00") == pytest.approx(20.0, abs=1e-6)


def test_the_budget_then_stops_the_second_job(tmp_path: Path, capsys: Capsys) -> None:
    root = specs(tmp_path / "s")
    assert cp(capsys, "apply", root, "--auto-approve", "--now", "2026-11-02T00:00:00").code == 0
    specs(root, workload("second", "p", gpus=1, walltime="1h"))
    plan = cp(capsys, "plan", root, "--json", "--now", "2026-11-02T06:00:00").json()
    assert plan["actions"] == []
    [waits] = plan["pending"]
    assert waits["workload"] == "p/second" and waits["reason"]["code"] == "over-budget"
    assert "used 20 of its 10 GPU-hours" in waits["reason"]["message"]


def test_a_preempted_job_counts_until_it_was_stopped(tmp_path: Path, capsys: Capsys) -> None:
    root = specs(tmp_path / "s")
    assert cp(capsys, "apply", root, "--auto-approve", "--now", "2026-11-02T00:00:00").code == 0
    write_specs(root, [cluster(pools=POOLS), project("p", gpus=8)])  # pruned at 02:30
    assert cp(capsys, "apply", root, "--auto-approve", "--now", "2026-11-02T02:30:00").code == 0
    assert usage(capsys, root, "2026-11-02T09:00:00") == pytest.approx(10.0, abs=1e-6)


def test_usage_survives_a_month_boundary_split_by_month(tmp_path: Path, capsys: Capsys) -> None:
    """A run from 22:00 on the last day of November to 03:00 on December 1st: 2 h belong to
    November and 3 to December (budgets are monthly)."""
    root = specs(tmp_path / "s")
    assert cp(capsys, "apply", root, "--auto-approve", "--now", "2026-11-30T22:00:00").code == 0
    snap = cp(capsys, "observe", root, "--now", "2026-12-01T06:00:00").json()
    records = sorted((u["endedAt"], round(u["gpuHours"], 6)) for u in snap["usage"])
    assert records == [("2026-12-01T00:00:00Z", 8.0), ("2026-12-01T03:00:00Z", 12.0)]
    records_in = [UsageRecord.model_validate(u) for u in snap["usage"]]
    december = usage_this_month(records_in, datetime(2026, 12, 1, 6, tzinfo=UTC), Prices({}))
    assert december["p"].gpu_hours == pytest.approx(12.0)


def test_accounting_that_fails_keeps_its_window_open(tmp_path: Path) -> None:
    """When the cluster's accounting cannot be read (slurmdbd down), the observation uses
    what the jobs show and the window is read again next time: a run that started and
    ended meanwhile still counts. The failure is injected into the real simulator adapter
    (no real accounting daemon can be made to fail on cue here)."""
    from adapters.base import TemporaryError
    from adapters.simulator import SimulatorAdapter
    from controlplane.observe import observe
    from controlplane.workflow import apply_specs, load, open_store

    class FlakyAccounting(SimulatorAdapter):
        down = True

        def runs(self, since: datetime, until: datetime) -> list[JobRun]:
            if self.down:
                raise TemporaryError("slurmdbd is not responding")
            return super().runs(since, until)

    root = specs(tmp_path / "s")
    start = datetime(2026, 11, 2, tzinfo=UTC)
    apply_specs(root, load(root), now=start)  # the 4-GPU job runs 00:00 to 05:00
    loaded = load(root)
    store = open_store(root, None)
    sim = loaded.desired.clusters["sim"]
    at_six = datetime(2026, 11, 2, 6, tzinfo=UTC)
    flaky = FlakyAccounting(sim, state_dir=root / ".cp", clock=lambda: at_six)
    before = store.accounting_since("sim")
    observe(loaded.desired, {"sim": flaky}, at_six, store, record=True)
    assert store.accounting_since("sim") == before  # not advanced past what was missed
    flaky.down = False
    snap = observe(loaded.desired, {"sim": flaky}, at_six, store, record=True)
    assert sum(u.gpu_hours for u in snap.usage) == pytest.approx(20.0, abs=1e-6)
    assert store.accounting_since("sim") == at_six


def test_many_short_runs_add_up_exactly(tmp_path: Path) -> None:
    """Each run's GPU-hours were rounded to 6 decimals, so 96 runs of 20 minutes on 8
    GPUs came to 255.999999 GPU-hours in `cp usage --json`, not 256 (user trial)."""
    from controlplane.workflow import open_store

    store = open_store(specs(tmp_path / "s"), None)
    start = datetime(2026, 11, 2, tzinfo=UTC)
    runs = [
        JobRun(
            job=str(i),
            workload="p/first",
            started_at=start + i * timedelta(minutes=20),
            ended_at=start + (i + 1) * timedelta(minutes=20),
            gpus=8,
            gpu_type="a100_80",
            state=JobState.COMPLETED,
        )
        for i in range(96)
    ]
    end = start + timedelta(days=2)
    store.record_runs({"sim": runs}, end)
    used = usage_this_month(store.usage_records(end), end, Prices({("sim", "a100_80"): 1.0}))["p"]
    assert round(used.gpu_hours, 6) == 256 and round(used.cost, 6) == 256


def test_a_run_whose_job_vanished_ends_where_it_was_last_seen(tmp_path: Path) -> None:
    """A Kubernetes job the control plane deleted is gone, not reported ended: its run
    stayed open for ever, and with the cluster unreachable the plan held its GPUs as
    running work, against the project's limit (user trial on Kubernetes)."""
    from controlplane.workflow import open_store

    store = open_store(specs(tmp_path / "s"), None)
    start = datetime(2026, 11, 2, tzinfo=UTC)
    run = JobRun(job="ns/old", workload="p/first", started_at=start, gpus=8, gpu_type="a100_80")
    store.record_runs({"sim": [run]}, start + timedelta(hours=1))
    assert store.running_on("sim") == {"p/first": 8}
    store.record_runs({"sim": []}, start + timedelta(hours=2), complete=[])  # accounting failed
    assert store.running_on("sim") == {"p/first": 8}
    store.record_runs({"sim": []}, start + timedelta(hours=3))  # answered, the job is gone
    assert store.running_on("sim") == {}
    later = start + timedelta(hours=4)
    used = usage_this_month(store.usage_records(later), later, Prices({}))["p"]
    assert round(used.gpu_hours, 6) == 8  # until it was last seen


def test_a_segment_resized_while_it_ran_counts_its_whole_run(tmp_path: Path) -> None:
    """An elastic workload in checkpoint segments grew in place twice (04:00, 06:00): each
    resize closes the job's run and opens another, and only the last piece (6 h of a 12 h
    segment) counted as progress. The segment looked as if it had ended well before its
    checkpoint time, and the 24 h workload was completed after one segment (user trial).
    A job's pieces count together, when it completed."""
    from controlplane.workflow import open_store

    store = open_store(specs(tmp_path / "s"), None)
    start = datetime(2026, 11, 2, tzinfo=UTC)

    def piece(job: str, begin: int, end: int, state: JobState, gpus: int) -> JobRun:
        return JobRun(
            job=job,
            workload="p/first",
            started_at=start + timedelta(hours=begin),
            ended_at=start + timedelta(hours=end),
            gpus=gpus,
            gpu_type="a100_80",
            state=state,
            time_limit=12 * 3600,
        )

    runs = [
        piece("1", 0, 4, JobState.RUNNING, 2),  # resized at 04:00
        piece("1", 4, 6, JobState.RUNNING, 3),  # resized at 06:00
        piece("1", 6, 12, JobState.COMPLETED, 4),
        piece("2", 12, 14, JobState.RUNNING, 4),  # the next segment, resized, then cancelled
        piece("2", 14, 15, JobState.CANCELLED, 2),
    ]
    end = start + timedelta(hours=16)
    store.record_runs({"sim": runs}, end)
    [progress] = store.progress({"p/first"}, now=end)
    assert (progress.elapsed_seconds, progress.segments) == (12 * 3600, 1)
    assert (progress.last_seconds, progress.last_limit_seconds) == (12 * 3600, 12 * 3600)


def test_fan_out_candidates_of_one_round_that_all_completed_are_one_segment(
    tmp_path: Path,
) -> None:
    """Two candidates of a segmented fan-out workload, submitted by one plan, started at
    once and both completed before a plan saw them run: each counted as a segment (two
    copies of segment 1 made "segment 3: 8h of 12h done", user trial). Only the round's
    winner counts (started together: the cheaper), as the plan's own reading of the jobs."""
    from controlplane.workflow import open_store

    store = open_store(specs(tmp_path / "s"), None)
    start = datetime(2026, 11, 2, tzinfo=UTC)

    def run(job: str, begin: float, hours: int, gpu_type: str, plan: str) -> JobRun:
        return JobRun(
            job=job,
            workload="p/first",
            started_at=start + timedelta(hours=begin),
            ended_at=start + timedelta(hours=begin + hours),
            gpus=4,
            gpu_type=gpu_type,
            state=JobState.COMPLETED,
            time_limit=hours * 3600,
            plan_id=plan,
        )

    runs = [
        run("1", 0, 4, "a100_80", "plan-a"),  # 3 a GPU-hour
        run("2", 0.01, 3, "v100", "plan-a"),  # 1 a GPU-hour, started 36 s later
        run("3", 5, 4, "a100_80", "plan-b"),  # the next segment
    ]
    end = start + timedelta(hours=10)
    store.record_runs({"sim": runs}, end, prices={("sim", "a100_80"): 3.0, ("sim", "v100"): 1.0})
    [progress] = store.progress({"p/first"}, now=end)
    assert (progress.elapsed_seconds, progress.segments) == (7 * 3600, 2)
    assert (progress.last_seconds, progress.last_limit_seconds) == (4 * 3600, 4 * 3600)


def test_a_usage_share_weighed_by_cost_says_so(tmp_path: Path, capsys: Capsys) -> None:
    """With fairshare.byCost the usage share is cost over the cost the clusters could
    deliver, but the table's footnote defined it as the decayed GPU-hours beside it over
    the GPU-hours they could deliver: a reader checking it got another number (user
    trial). The rows weighed by cost are marked, and the footnote says what they are."""
    root = specs(tmp_path / "s")
    weighed = project("w", gpus=8, fairshare={"byCost": True})
    write_specs(root, [cluster(pools=POOLS), project("p", gpus=8), weighed])
    text = cp(capsys, "usage", root, "--now", "2026-11-02T00:00:00").out
    rows = {line.split()[0]: line for line in text.splitlines() if line.split()}
    assert "% *" in rows["w"] and "*" not in rows["p"], text
    assert "*: fairshare.byCost: each GPU-hour weighed by its type's costPerGpuHour" in " ".join(
        text.split()
    )


def test_an_observation_leaves_past_runs_as_they_were_recorded(tmp_path: Path) -> None:
    """Each observation read and rewrote every run ever recorded (trial U: 1.0 s of a
    3.6 s apply after 1,347 runs, 9 s for `cp observe` after 21,000), and set the price
    of every past run to today's: a run that ended last week at 2.0 an hour read 3.0 once
    the price was raised. Only open runs and those the observation reports are written."""
    from controlplane.workflow import open_store

    root = specs(tmp_path / "s")
    store = open_store(root, None)
    start = datetime(2026, 11, 2, tzinfo=UTC)
    old = JobRun(
        job="1",
        workload="p/first",
        started_at=start,
        ended_at=start + timedelta(hours=2),
        gpus=8,
        gpu_type="a100_80",
        state=JobState.COMPLETED,
    )
    # 3 runs on, reported again later as ended; 4 runs on, and is gone unreported
    running = [
        JobRun(job=job, workload="p/first", started_at=start, gpus=1, gpu_type="a100_80")
        for job in ("3", "4")
    ]
    first = start + timedelta(hours=3)
    store.record_runs({"sim": [old, *running]}, first, prices={("sim", "a100_80"): 2.0})
    later = start + timedelta(days=7)
    new = JobRun(job="2", workload="p/first", started_at=later, gpus=4, gpu_type="a100_80")
    ended = running[0].model_copy(
        update={"ended_at": start + timedelta(hours=5), "state": JobState.COMPLETED}
    )
    store.record_runs({"sim": [new, ended]}, later, prices={("sim", "a100_80"): 3.0})
    with sqlite3.connect(root / ".cp" / "controlplane.db") as db:
        rows = db.execute("SELECT job, price, ended_at FROM runs").fetchall()
    prices = {job: price for job, price, _ in rows}
    ends = {job: end and end[:16] for job, _, end in rows}
    assert prices == {"1": 2.0, "2": 3.0, "3": 3.0, "4": 3.0}, prices
    assert ends == {
        "1": "2026-11-02 02:00",
        "2": None,
        "3": "2026-11-02 05:00",
        "4": "2026-11-02 03:00",
    }, ends


def test_a_read_only_plan_counts_the_progress_a_recorded_one_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only plan merges the runs it sees into the stored ones, as if recorded. The
    cluster still reports a renamed project's job under its old name, while the store
    keeps its runs under the new one: a segment that completed since the last recorded
    observation must count for the new name (review: reading only the runs stored under
    the segmented names, then merging only the runs seen under them, lost it), and a
    run seen under a segmented name but stored under another must not count twice."""
    from controlplane.workflow import open_store

    start = datetime(2026, 11, 2, tzinfo=UTC)
    end = start + timedelta(hours=6)

    def run(job: str, name: str, state: JobState, ended: datetime | None) -> JobRun:
        return JobRun(
            job=job,
            workload=name,
            started_at=start,
            ended_at=ended,
            gpus=2,
            gpu_type="a100_80",
            state=state,
            time_limit=4 * 3600,
        )

    stored = [
        run("1", "new/x", JobState.RUNNING, None),
        run("2", "other/y", JobState.RUNNING, None),
    ]
    seen = {
        "sim": [
            run("1", "old/x", JobState.COMPLETED, start + timedelta(hours=4)),  # renamed since
            run("2", "new/z", JobState.COMPLETED, start + timedelta(hours=3)),  # stored as other/y
            run("3", "new/z", JobState.COMPLETED, start + timedelta(hours=2)),  # never recorded
        ]
    }
    wanted = {"new/x", "new/z"}
    read_only = open_store(specs(tmp_path / "a"), None)
    read_only.record_runs({"sim": stored}, start + timedelta(hours=1))
    told = read_only.progress(wanted, now=end, seen=seen)
    recorded = open_store(specs(tmp_path / "b"), None)
    recorded.record_runs({"sim": stored}, start + timedelta(hours=1))
    recorded.record_runs(seen, end)
    assert told == recorded.progress(wanted, now=end)
    assert [(p.workload, p.segments, p.elapsed_seconds) for p in told] == [
        ("new/x", 1, 4 * 3600),
        ("new/z", 1, 2 * 3600),
    ]
    # the names and jobs asked for go to the database in lists of a bounded length
    monkeypatch.setattr("controlplane.store.database.IN_CHUNK", 1)
    assert read_only.progress(wanted, now=end, seen=seen) == told


def test_the_usage_by_gpu_type_is_laid_out_as_the_queue_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table by GPU type listed departments and then projects, with nothing to tell
    them apart (trial X); it follows the tree of the usage table above it."""
    import shutil

    root = Path(__file__).resolve().parents[2]
    specs = tmp_path / "quickstart"
    shutil.copytree(root / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-12-01T10:00:00Z").code == 0
    out = cp(capsys, "usage", specs, "--now", "2026-12-01T14:00:00Z").out
    typed = out[out.index("By GPU type") :].splitlines()[3:7]  # after the title and header
    heads = ["product (dept) ", "product (dept) ", "  ads ", "  search "]
    assert all(line.startswith(head) for line, head in zip(typed, heads, strict=True)), typed
