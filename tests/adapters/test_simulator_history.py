"""The simulator over weeks of work (user trial U: a 300-node busy org, 25 simulated days).

Every action used to load and rewrite the whole state, ended jobs and their runs included:
50-110 ms an action at 300 nodes, and growing with the history, so that a first apply of
1,115 actions took 55 s and `cp get jobs` listed 25 days of ended jobs. Now an ended job
leaves the simulated queue a day after it ended, as Slurm forgets one ``MinJobAge`` after
its end, and its run stays in the cluster's accounting. The accounting is a file of its
own, appended to by each action and never rewritten (but by a prune of what is older
than the accounting keeps), so an action writes what it changed and no history.
"""

from __future__ import annotations

import itertools
import json
import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from adapters.base import LocalStateError, PermanentError
from adapters.simulator import SimulatorAdapter
from adapters.simulator.adapter import ACCOUNTING_DAYS, FORGET_ENDED_AFTER
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.models import Cluster
from specs.snapshot import JobState, Replica
from tests.builders import NOW, cluster, pool

HOUR = timedelta(hours=1)
WHY = Reason(code=ReasonCode.WITHIN_DESERVED, message="x")


def _spec(nodes: int = 2) -> Cluster:
    return Cluster.model_validate(cluster("c", pools=[pool("a100", nodes=nodes, gpus_per_node=8)]))


def _submit(workload: str, node: str | None, walltime: int | None = None) -> Action:
    return Action(
        op=Op.SUBMIT,
        workload=workload,
        cluster="c",
        pool="a100",
        replicas=[Replica(node=node, gpus=8)],
        submit=SubmitDetails(gpus_per_replica=8, gpu_type="a100_80", walltime=walltime),
        reason=WHY,
    )


def _preempt(workload: str, job: str | None) -> Action:
    return Action(op=Op.PREEMPT, workload=workload, cluster="c", job=job, reason=WHY)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self):  # type: ignore[no-untyped-def]
        return self.now


def test_a_job_leaves_the_queue_a_day_after_it_ended_and_its_run_stays_accounted(
    tmp_path: Path,
) -> None:
    clock = Clock()
    sim = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    node = sim.observe().nodes[0].name
    job = sim.execute(_submit("p/short", node, walltime=3600), plan_id="x").job
    clock.now = NOW + 2 * HOUR
    [ended] = sim.observe().jobs
    assert (ended.id, ended.state, ended.ended_at) == (job, JobState.COMPLETED, NOW + HOUR)
    clock.now = NOW + HOUR + FORGET_ENDED_AFTER + timedelta(minutes=1)
    assert sim.observe().jobs == []
    [run] = sim.runs(NOW, clock.now)
    assert (run.job, run.state, run.started_at, run.ended_at, run.gpus) == (
        job,
        JobState.COMPLETED,
        NOW,
        NOW + HOUR,
        8,
    )
    # and a read-only look (cp plan) sees the same
    look = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock, read_only=True)
    assert look.observe().jobs == [] and look.runs(NOW, clock.now) == [run]


def test_an_action_appends_its_runs_and_the_state_carries_no_history(tmp_path: Path) -> None:
    clock = Clock()
    sim = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    node = sim.observe().nodes[0].name
    folder = tmp_path / "simulator"
    sizes, ledgers = [], []
    for i in range(30):
        clock.now = NOW + i * HOUR
        job = sim.execute(_submit(f"p/w{i}", node), plan_id="x").job
        clock.now += timedelta(minutes=30)
        assert sim.execute(_preempt(f"p/w{i}", job), plan_id="y").ok
        sizes.append((folder / "c.json").stat().st_size)
        [ledger] = folder.glob("c.runs.*.jsonl")
        ledgers.append(ledger.read_bytes())
    # the state does not grow with the runs that ended (but for the digits of its numbers)
    assert max(sizes) - min(sizes) <= 8, sizes
    for before, after in itertools.pairwise(ledgers):
        assert after.startswith(before) and len(after) > len(before), "appended, not rewritten"
    assert len(sim.runs(NOW, clock.now)) == 30


def test_a_crash_between_the_accounting_and_the_state_counts_the_run_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The accounting is written first, the state then says how much of it counts: a run
    written by an action whose state never landed does not count, and the rerun writes it
    again. (The crash is an injected failure of the state's rename.)"""
    clock = Clock()
    sim = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    node = sim.observe().nodes[0].name
    job = sim.execute(_submit("p/w", node), plan_id="x").job
    clock.now = NOW + HOUR

    def crash(src: str, dst: str) -> None:
        raise OSError("the machine stopped")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="stopped"):
        sim.execute(_preempt("p/w", job), plan_id="y")
    monkeypatch.undo()
    after = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    assert [j.id for j in after.observe().jobs] == [job], "the preempt never landed"
    assert after.runs(NOW, clock.now)[0].ended_at is None
    clock.now = NOW + 2 * HOUR
    assert sim.execute(_preempt("p/w", job), plan_id="y").ok  # the rerun, same adapter
    [run] = after.runs(NOW, clock.now)
    assert (run.job, run.ended_at) == (job, NOW + 2 * HOUR)


def test_an_adapter_sees_what_another_wrote_since_its_last_action(tmp_path: Path) -> None:
    """An adapter keeps the state it saved, and reads it again when somebody else (another
    apply, an observation) changed it since: nothing another writer did is lost."""
    clock = Clock()
    one = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    other = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    first, second = sorted(n.name for n in one.observe().nodes)
    assert one.execute(_submit("p/a", first), plan_id="x").ok
    assert other.execute(_submit("p/b", second), plan_id="x").ok
    with pytest.raises(PermanentError, match="would use 16"):
        one.execute(_submit("p/c", second), plan_id="x")
    assert one.execute(_submit("p/d", None), plan_id="x").message == "queued"
    assert sorted(j.workload or "" for j in other.observe().jobs) == ["p/a", "p/b", "p/d"]


def test_runs_older_than_the_accounting_keeps_are_pruned(tmp_path: Path) -> None:
    clock = Clock()
    sim = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    node = sim.observe().nodes[0].name
    old = sim.execute(_submit("p/old", node), plan_id="x").job
    clock.now = NOW + HOUR
    assert sim.execute(_preempt("p/old", old), plan_id="y").ok
    clock.now = NOW + timedelta(days=ACCOUNTING_DAYS - 10)
    new = sim.execute(_submit("p/new", node), plan_id="x").job
    clock.now += HOUR
    assert sim.execute(_preempt("p/new", new), plan_id="y").ok
    everything = (NOW - HOUR, clock.now)
    assert [r.job for r in sim.runs(*everything)] == [old, new]
    clock.now = NOW + timedelta(days=ACCOUNTING_DAYS + 1)
    sim.observe()
    assert [r.job for r in sim.runs(*everything)] == [new]
    assert len(list((tmp_path / "simulator").glob("c.runs.*.jsonl"))) <= 2


def test_a_state_with_its_runs_inline_keeps_them(tmp_path: Path) -> None:
    """The state as earlier versions wrote it: the accounting inside the state file."""
    run = {
        "job": "1000",
        "workload": "p/w",
        "startedAt": NOW.isoformat(),
        "endedAt": (NOW + HOUR).isoformat(),
        "gpus": 8,
        "state": "CANCELLED",
    }
    body = {
        "clock": NOW.isoformat(),
        "nextId": 1001,
        "state": {"name": "c", "nodes": [], "jobs": []},
        "accounting": [run],
        "openSince": {},
    }
    (tmp_path / "simulator").mkdir()
    (tmp_path / "simulator" / "c.json").write_text(json.dumps(body, indent=1))
    clock = Clock()
    clock.now = NOW + 2 * HOUR
    sim = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    assert [r.job for r in sim.runs(NOW, clock.now)] == ["1000"]
    node = sim.observe().nodes[0].name  # a write: the runs move to the accounting file
    assert "1000" not in (tmp_path / "simulator" / "c.json").read_text()
    assert sim.execute(_submit("p/next", node), plan_id="x").job == "1001"
    assert [r.job for r in sim.runs(NOW, clock.now)] == ["1000", "1001"]


def test_a_state_whose_accounting_is_gone_is_an_error_naming_it(tmp_path: Path) -> None:
    """Not a cluster whose usage silently stops being read."""
    clock = Clock()
    sim = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    node = sim.observe().nodes[0].name
    job = sim.execute(_submit("p/w", node), plan_id="x").job
    assert sim.execute(_preempt("p/w", job), plan_id="y").ok
    [ledger] = (tmp_path / "simulator").glob("c.runs.*.jsonl")
    ledger.unlink()
    for adapter in (sim, SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)):
        with pytest.raises(LocalStateError, match=f"accounting {ledger} is missing"):
            adapter.observe()


def test_an_earlier_version_reads_the_state_this_one_writes(tmp_path: Path) -> None:
    """Trial V: after one action of this version, the version before refused the state
    ("1 validation error for JobRun"): it reads ``accounting`` as a list of runs. The list
    is still there (empty: the runs are in the accounting file); read here as it read it."""
    from specs.snapshot import ClusterState, JobRun

    clock = Clock()
    sim = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    node = sim.observe().nodes[0].name
    job = sim.execute(_submit("p/w", node), plan_id="x").job
    assert sim.execute(_preempt("p/w", job), plan_id="y").ok
    raw = json.loads((tmp_path / "simulator" / "c.json").read_text())
    ClusterState.model_validate(raw["state"])
    int(raw["nextId"])
    assert [JobRun.model_validate(r) for r in raw.get("accounting", [])] == []
    {k: datetime.fromisoformat(v) for k, v in raw.get("openSince", {}).items()}
    datetime.fromisoformat(raw["clock"])
    # and what such a version writes back (its runs inline, no mark) is read here: its
    # runs, and those of the accounting file it did not know of (review: those were lost)
    [ledger] = (tmp_path / "simulator").glob("c.runs.*.jsonl")
    before = ledger.read_bytes()
    raw["accounting"] = [json.loads(before.decode().split("\t", 1)[1])]
    raw["accounting"][0]["job"] = "older"
    del raw["ledger"]
    (tmp_path / "simulator" / "c.json").write_text(json.dumps(raw))
    again = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    assert sorted(r.job or "" for r in again.runs(NOW - HOUR, NOW + HOUR)) == [job, "older"]
    again.observe()
    assert ledger.read_bytes().startswith(before)
    assert sorted(r.job or "" for r in again.runs(NOW - HOUR, NOW + HOUR)) == [job, "older"]


def test_an_adapter_sees_a_state_written_over_in_place(tmp_path: Path) -> None:
    """What an adapter keeps is checked against the file it wrote, held open: another
    writer's file is another file (its inode number may be the one the kept file had,
    once that was gone: review), and one written over in place has another time or size."""
    clock = Clock()
    one = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    first, second = sorted(n.name for n in one.observe().nodes)
    assert one.execute(_submit("p/a", first), plan_id="x").ok
    path = tmp_path / "simulator" / "c.json"
    raw = json.loads(path.read_text())
    raw["state"]["jobs"][0]["replicas"][0]["node"] = second  # moved by hand
    path.write_text(json.dumps(raw))
    with pytest.raises(PermanentError, match="would use 16"):
        one.execute(_submit("p/b", second), plan_id="x")


def test_a_cancel_of_a_job_that_ended_meanwhile_keeps_its_run(tmp_path: Path) -> None:
    """A plan applied after its victim completed: the cancel finds the job ended, and the
    run it completed stays in the accounting (review: the job went, and its run with it)."""
    clock = Clock()
    sim = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    node = sim.observe().nodes[0].name
    job = sim.execute(_submit("p/w", node, walltime=3600), plan_id="x").job
    clock.now = NOW + 2 * HOUR
    result = sim.execute(_preempt("p/w", job), plan_id="y")
    assert result.ok and "already ended" in result.message, result
    [run] = sim.runs(NOW, clock.now)
    assert (run.job, run.state, run.ended_at) == (job, JobState.COMPLETED, NOW + HOUR)


def test_a_look_at_recent_runs_reads_only_the_end_of_the_accounting(tmp_path: Path) -> None:
    """Trial V: every observation parsed the whole accounting (400 days kept: seconds) to
    use the runs since the last one. Lines are stamped in order, never before their run's
    end, so the runs ended since T are all on lines stamped since T: a damaged old line
    shows that nothing before them is read."""
    clock = Clock()
    sim = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    node = sim.observe().nodes[0].name
    for day in range(30):
        clock.now = NOW + timedelta(days=day)
        job = sim.execute(_submit(f"p/w{day}", node), plan_id="x").job
        clock.now += HOUR
        assert sim.execute(_preempt(f"p/w{day}", job), plan_id="y").ok
    [ledger] = (tmp_path / "simulator").glob("c.runs.*.jsonl")
    lines = ledger.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"gpus":8', b'"gpus":?')  # as long as it was
    ledger.write_bytes(b"\n".join(lines))
    recent = sim.runs(NOW + timedelta(days=28), clock.now)
    assert [r.workload for r in recent] == ["p/w28", "p/w29"]
    with pytest.raises(LocalStateError, match="cannot be read"):
        sim.runs(NOW, clock.now)


def test_a_prune_keeps_the_recent_end_and_the_files_are_private(tmp_path: Path) -> None:
    """Trial V: each weekly prune rewrote the whole accounting (seconds at 400 days) even
    with nothing to drop; now it copies the end that is kept, when there is an older
    start, and every file is the owner's alone, as the state is."""
    clock = Clock()
    sim = SimulatorAdapter(_spec(), state_dir=tmp_path, clock=clock)
    node = sim.observe().nodes[0].name
    folder = tmp_path / "simulator"
    for day in range(0, 60, 2):
        clock.now = NOW + timedelta(days=day)
        job = sim.execute(_submit(f"p/w{day}", node), plan_id="x").job
        clock.now += HOUR
        assert sim.execute(_preempt(f"p/w{day}", job), plan_id="y").ok
    assert [p.name for p in folder.glob("c.runs.*.jsonl")] == ["c.runs.0.jsonl"]
    clock.now = NOW + timedelta(days=ACCOUNTING_DAYS + 31)
    sim.observe()
    kept = sorted(r.workload or "" for r in sim.runs(NOW, clock.now))
    assert kept == sorted(f"p/w{d}" for d in range(32, 60, 2)), kept
    for path in folder.iterdir():
        if path.suffix in (".json", ".jsonl"):
            assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))
