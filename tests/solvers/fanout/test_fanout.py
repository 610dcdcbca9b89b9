"""Fan-out, checkpoint segments and retry backoff: the pure core, through ``reconcile.plan``.

Builders with keyword defaults; every case states its world (pools, jobs, forecasts) and
the plan it expects. Time is an input everywhere (``NOW``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from adapters.simulator import SimulatedCluster, nodes_from_spec
from controlplane.observe import with_unseen_endings
from controlplane.reconcile import plan
from solvers.fanout import (
    NEVER,
    Candidate,
    Estimate,
    Mode,
    Status,
    backfill_time_min,
    choose,
    dominates,
    enumerate_candidates,
    node_counts,
)
from solvers.problem import build_problem
from solvers.segments import Segments, ended_early, progress_from_jobs
from solvers.sitepolicy.backoff import backoff_seconds, latest_failure
from specs.actions import Action, Op, ReasonCode
from specs.desired import DesiredState
from specs.snapshot import (
    ClusterState,
    Failure,
    Job,
    JobRun,
    JobState,
    Progress,
    Replica,
    Snapshot,
)
from tests.builders import NOW, cluster, desired, project, workload

HOUR = 3600
# a100: 8 GPUs a node, 2 nodes, 3 days max; v100: 4 a node, 2 nodes, 1 hour max.
# Cost per GPU-hour (builders): a100_80 3, v100 1.
POOLS = [
    {
        "name": "a100",
        "gpuType": "a100_80",
        "gpusPerNode": 8,
        "nodes": 2,
        "partition": "gpu-a100",
        "maxWalltime": "3d",
    },
    {
        "name": "v100",
        "gpuType": "v100",
        "gpusPerNode": 4,
        "nodes": 2,
        "partition": "gpu-v100",
        "maxWalltime": "1h",
    },
]
FAN = {"fanOut": True, "maxParallel": 4}


def world(d: DesiredState, *jobs: Job, **extra: Any) -> Snapshot:
    nodes = [n for c in d.clusters.values() for n in nodes_from_spec(c)]
    return Snapshot(
        now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=list(jobs))], **extra
    )


def specs(
    *workloads: dict[str, Any], quota: int = 16, limit: int | None = None, adapter: str = "slurm"
) -> DesiredState:
    return desired(
        [cluster(pools=POOLS, adapter=adapter), project("p", gpus=quota, limit=limit), *workloads]
    )


def job(
    id: str,
    state: JobState = JobState.PENDING,
    *,
    workload: str = "p/w",
    node: str | None = None,
    gpus: int = 4,
    started: datetime | None = None,
    ended: datetime | None = None,
    candidate: str | None = None,
    pool: str = "a100",
    walltime: int | None = None,
    exit_code: str | None = None,
) -> Job:
    return Job(
        id=id,
        workload=workload,
        state=state,
        pool=pool,
        candidate=candidate,
        replicas=[Replica(node=node, gpus=gpus)],
        started_at=started,
        ended_at=ended,
        walltime=walltime,
        exit_code=exit_code,
    )


def candidates_for(d: DesiredState, key: str = "p/w") -> list[Candidate]:
    problem = build_problem(d, world(d), NOW)
    req = problem.jobs[key]
    return enumerate_candidates(
        req, d.workloads[key].spec, problem.pools, node_counts(problem), problem.segments.get(key)
    )


def names(cands: list[Candidate]) -> list[str]:
    return [c.name for c in cands]


def at(minutes: float) -> datetime:
    return NOW + timedelta(minutes=minutes)


# ------------------------------------------------------------------ 1. enumeration


def test_candidates_are_type_times_pool_times_shape() -> None:
    d = specs(workload("w", "p", gpus=4, replicas=2, walltime="30m", strategy=FAN))
    cands = candidates_for(d)
    # a100 takes both replicas on one node (8 GPUs) or one per node; v100 only one per node
    assert names(cands) == ["sim.a100.1x8.direct", "sim.a100.2x4.direct", "sim.v100.2x4.direct"]
    single = cands[0]
    assert (single.nodes, single.gpus_per_node, single.tasks_per_node) == (1, 8, 2)
    # cost = GPUs x hours x the type's cost per GPU-hour
    assert [c.cost for c in cands] == [8 * 0.5 * 3, 8 * 0.5 * 3, 8 * 0.5 * 1]


def test_memory_types_and_walltime_filter_candidates() -> None:
    big = specs(workload("w", "p", gpus=4, walltime="30m", minGpuMemoryGiB=40, strategy=FAN))
    assert names(candidates_for(big)) == ["sim.a100.1x4.direct"]
    typed = specs(workload("w", "p", gpus=4, walltime="30m", gpuTypes=["v100"], strategy=FAN))
    assert names(candidates_for(typed)) == ["sim.v100.1x4.direct"]
    # longer than v100's maxWalltime and no checkpoint to split it: a100 only
    long = specs(workload("w", "p", gpus=4, walltime="2h", strategy=FAN))
    assert names(candidates_for(long)) == ["sim.a100.1x4.direct"]


def test_segmented_work_gets_checkpoint_and_backfill_modes() -> None:
    d = specs(
        workload(
            "w",
            "p",
            gpus=4,
            walltime="4h",
            strategy=FAN,
            checkpoint={"signal": "USR1", "grace": "5m", "total": "10h"},
        )
    )
    by_name = {c.name: c for c in candidates_for(d)}
    assert sorted(by_name) == [
        "sim.a100.1x4.backfill",
        "sim.a100.1x4.direct",
        "sim.v100.1x4.backfill",
        "sim.v100.1x4.checkpoint",
    ]
    assert by_name["sim.a100.1x4.direct"].walltime == 4 * HOUR
    # v100 allows 1 h: segments of one hour instead of four
    assert by_name["sim.v100.1x4.checkpoint"].walltime == HOUR
    bf = by_name["sim.a100.1x4.backfill"]
    assert (bf.walltime, bf.time_min) == (4 * HOUR, HOUR)  # a quarter of the segment
    # the cost is for the whole remaining run time, whatever the mode
    assert by_name["sim.v100.1x4.checkpoint"].cost == 4 * 10 * 1
    assert backfill_time_min(4 * HOUR, 300) == HOUR
    assert backfill_time_min(600, 300) == 600  # twice the grace: no shorter limit left
    assert backfill_time_min(15, 5) == 15  # under a minute: nothing to backfill


# ------------------------------------------------------------------ 2-3. judge and choose


def cand(name: str, cost: float, mode: Mode = Mode.DIRECT, pool: str | None = None) -> Candidate:
    return Candidate(
        workload="p/w",
        cluster="c",
        pool=pool or name,
        partition=None,
        gpu_type="t",
        nodes=1,
        gpus_per_node=1,
        tasks_per_node=1,
        mode=mode,
        walltime=HOUR,
        time_min=None,
        hours=1.0,
        cost_per_gpu_hour=cost,
    )


def verdicts(
    cands: list[Candidate], forecasts: dict[str, Estimate] | None, max_parallel: int = 4
) -> dict[str, tuple[Status, str]]:
    return {
        v.candidate.pool + ("/bf" if v.candidate.mode is Mode.BACKFILL else ""): (v.status, v.note)
        for v in choose(cands, forecasts, max_parallel)
    }


def test_dominated_candidates_are_pruned() -> None:
    fast_dear, slow_cheap, slow_dear = cand("a", 3), cand("b", 1), cand("c", 3)
    f = {fast_dear.key: at(0), slow_cheap.key: at(60), slow_dear.key: at(60)}
    got = verdicts([fast_dear, slow_cheap, slow_dear], f)
    assert got["a"][0] is got["b"][0] is Status.CHOSEN  # neither is better in both
    assert got["c"] == (Status.DOMINATED, "dominated by c.a.1x1.direct")
    assert dominates(fast_dear, at(0), slow_dear, at(60))
    assert not dominates(fast_dear, at(0), slow_cheap, at(60))
    assert not dominates(fast_dear, at(0), cand("d", 3), at(0))  # equal: nobody strictly better
    # a known start beats an unknown one; two unknown starts are not compared
    assert dominates(fast_dear, at(0), slow_dear, None)
    assert not dominates(slow_dear, None, fast_dear, None)


def test_ranked_by_start_then_cost_then_name_up_to_max_parallel() -> None:
    cands = [cand("a", 1), cand("b", 2), cand("c", 3)]
    f: dict[str, Estimate] = {cands[0].key: at(30), cands[1].key: at(10), cands[2].key: at(0)}
    ranked = choose(cands, f, 2)
    assert [(v.candidate.pool, v.status) for v in ranked] == [
        ("c", Status.CHOSEN),
        ("b", Status.CHOSEN),
        ("a", Status.SPARE),
    ]


def test_never_and_no_forecasts() -> None:
    a, b = cand("a", 2), cand("b", 1)
    assert verdicts([a, b], {a.key: NEVER, b.key: at(5)})["a"][0] is Status.NEVER
    # without forecasts nothing is dominated: cheapest first
    ranked = choose([a, b], None, 4)
    assert [(v.candidate.pool, v.status) for v in ranked] == [
        ("b", Status.CHOSEN),
        ("a", Status.CHOSEN),
    ]


def test_backfill_kept_only_when_it_starts_earlier() -> None:
    full, bf = cand("x", 3, Mode.DIRECT, "p"), cand("x", 3, Mode.BACKFILL, "p")
    earlier = verdicts([full, bf], {full.key: at(60), bf.key: at(0)})
    assert earlier["p/bf"][0] is Status.CHOSEN and earlier["p"][0] is Status.DOMINATED
    same = verdicts([full, bf], {full.key: at(0), bf.key: at(0)})
    assert same["p/bf"][0] is Status.NO_EARLIER and same["p"][0] is Status.CHOSEN
    assert verdicts([full, bf], None)["p/bf"][0] is Status.NO_EARLIER


def test_starts_a_moment_apart_are_the_same_start() -> None:
    """The forecasts are read a moment apart (squeue's backfill view, then sbatch
    --test-only), so one start could come out a second earlier than another only because
    a second ticked between the reads; that decided which candidates ran, sent the one
    at three times the cost, or a backfill candidate that ran 5 minutes of its 20 (user
    trial on Slurm). Starts within a minute of each other are the same start."""
    dear, cheap = cand("a100", 3), cand("v100", 1)
    got = verdicts([dear, cheap], {dear.key: at(0), cheap.key: at(1 / 60)}, max_parallel=1)
    assert got["v100"][0] is Status.CHOSEN and got["a100"][0] is Status.DOMINATED
    full, bf = cand("x", 3, Mode.DIRECT, "p"), cand("x", 3, Mode.BACKFILL, "p")
    second = verdicts([full, bf], {full.key: at(1 / 60), bf.key: at(0)})
    assert second["p/bf"][0] is Status.NO_EARLIER and second["p"][0] is Status.CHOSEN
    # a start more than a minute earlier still counts
    assert verdicts([full, bf], {full.key: at(1.5), bf.key: at(0)})["p/bf"][0] is Status.CHOSEN


def test_choice_is_deterministic() -> None:
    cands = [cand(n, c) for n, c in [("d", 1), ("a", 1), ("c", 2), ("b", 1)]]
    f: dict[str, Estimate] = {c.key: at(0) for c in cands}
    first = choose(cands, f, 2)
    assert choose(list(reversed(cands)), f, 2) == first
    # one of those that start together at one cost: chosen both, both would run
    assert [(v.candidate.pool, v.status, v.note) for v in first] == [
        ("a", Status.CHOSEN, "1 of up to 2"),
        ("b", Status.DOMINATED, "starts with c.a.1x1.direct at its cost (both would run)"),
        ("d", Status.DOMINATED, "starts with c.a.1x1.direct at its cost (both would run)"),
        ("c", Status.DOMINATED, "dominated by c.a.1x1.direct"),
    ]
    # now and dear beside later and cheap: no twins, the race fan-out is for
    dear, cheap = cands[2], cands[1]
    race = choose([dear, cheap], {dear.key: at(0), cheap.key: at(30)}, 2)
    assert [v.status for v in race] == [Status.CHOSEN, Status.CHOSEN]


# ------------------------------------------------------------------ reconcile: submit, gate


def test_plan_submits_one_job_per_chosen_candidate() -> None:
    d = specs(workload("w", "p", gpus=4, walltime="30m", strategy=FAN))
    forecasts: dict[str, Estimate] = {
        "p/w@sim.a100.1x4.direct": at(0),
        "p/w@sim.v100.1x4.direct": at(90),
    }
    p = plan(d, world(d), now=NOW, forecasts=forecasts)
    assert [(a.op, a.pool, a.submit.candidate if a.submit else None) for a in p.actions] == [
        (Op.SUBMIT, "a100", "sim.a100.1x4.direct"),
        (Op.SUBMIT, "v100", "sim.v100.1x4.direct"),
    ]
    first = p.actions[0]
    assert [r.node for r in first.replicas or []] == [None]  # the cluster places it
    assert first.submit is not None and first.submit.partition == "gpu-a100"
    assert first.submit.walltime == 1800 and first.submit.time_min is None
    assert first.reason.code is ReasonCode.FAN_OUT
    assert "candidate 1 of 2" in first.reason.message and "starts now" in first.reason.message
    assert "cost 6 (4 GPUs x 0.5 h x 3)" in first.reason.message
    assert "starts in ~1h30m" in p.actions[1].reason.message
    assert p.pending == []
    assert p.projects["p"].allocated == 4  # counted once


def test_a_single_node_candidate_asks_for_one_node() -> None:
    d = specs(
        workload(
            "w",
            "p",
            gpus=4,
            replicas=2,
            walltime="30m",
            gpuTypes=["a100_80"],
            strategy={"fanOut": True, "maxParallel": 1},
        )
    )
    [a] = plan(d, world(d), now=NOW).actions  # no forecasts: by cost, then name
    assert a.submit is not None and (a.submit.candidate, a.submit.nodes) == (
        "sim.a100.1x8.direct",
        1,
    )
    assert [r.gpus for r in a.replicas or []] == [4, 4]


def test_a_backfill_candidate_carries_time_min() -> None:
    d = specs(
        workload(
            "w",
            "p",
            gpus=4,
            walltime="2h",
            gpuTypes=["a100_80"],
            strategy=FAN,
            checkpoint={"signal": "USR1", "grace": "1m", "total": "8h"},
        )
    )
    f: dict[str, Estimate] = {
        "p/w@sim.a100.1x4.direct": at(120),
        "p/w@sim.a100.1x4.backfill": at(0),
    }
    [a] = plan(d, world(d), now=NOW, forecasts=f).actions
    assert a.submit is not None and a.submit.candidate == "sim.a100.1x4.backfill"
    assert (a.submit.walltime, a.submit.time_min, a.submit.segment) == (2 * HOUR, 30 * 60, 1)


@pytest.mark.parametrize(
    "limit,quota,preemptible,code",
    [
        (4, 2, True, "over-limit"),
        (None, 4, False, "non-preemptible-over-deserved"),
    ],
)
def test_the_quota_gate_holds_for_fan_out(
    limit: int | None, quota: int, preemptible: bool, code: str
) -> None:
    d = specs(
        workload("w", "p", gpus=8, walltime="30m", preemptible=preemptible, strategy=FAN),
        quota=quota,
        limit=limit,
    )
    p = plan(d, world(d), now=NOW)
    assert p.actions == []
    assert [(x.workload, x.reason.code.value) for x in p.pending] == [("p/w", code)]
    assert "counts its 8 GPUs once" in p.pending[0].reason.message


def test_the_gate_counts_gpus_once_and_waiting_candidates_too() -> None:
    one = workload("w", "p", gpus=4, replicas=2, walltime="30m", strategy=FAN)
    d = specs(one, quota=8, limit=8)
    assert len(plan(d, world(d), now=NOW).actions) == 3  # three candidates, 8 GPUs, limit 8
    # w's candidates wait; a second fan-out workload of p would exceed the limit
    d2 = specs(one, workload("x", "p", gpus=4, walltime="30m", strategy=FAN), quota=8, limit=8)
    waiting = world(
        d2,
        job("1", candidate="sim.a100.1x8.direct", gpus=8),
        job("2", candidate="sim.v100.2x4.direct", pool="v100"),
    )
    p = plan(d2, waiting, now=NOW)
    assert p.actions == []
    assert {x.workload: x.reason.code.value for x in p.pending} == {
        "p/w": "submitted",
        "p/x": "over-limit",
    }
    assert p.pending[0].reason.message.startswith("2 fan-out candidate(s) wait")


def test_nothing_new_while_candidates_wait_then_losers_are_cancelled() -> None:
    d = specs(workload("w", "p", gpus=4, walltime="30m", strategy=FAN))
    both = world(
        d,
        job("11", candidate="sim.a100.1x4.direct"),
        job("12", candidate="sim.v100.1x4.direct", pool="v100"),
    )
    p = plan(d, both, now=NOW)
    assert p.actions == [] and [x.reason.code.value for x in p.pending] == ["submitted"]
    one_runs = world(
        d,
        job("11", JobState.RUNNING, node="a100-01", started=at(-1)),
        job("12", candidate="sim.v100.1x4.direct", pool="v100"),
    )
    p = plan(d, one_runs, now=NOW)
    assert [(a.op, a.job, a.reason.code.value) for a in p.actions] == [
        (Op.CANCEL, "12", "fan-out-loser")
    ]
    # job ids repeat across clusters: the winner's is named with its cluster (user trial)
    assert "job 11 on sim of p/w runs; candidate sim.v100.1x4.direct" in p.actions[0].reason.message


def test_of_candidates_started_together_the_cheaper_wins() -> None:
    """Two candidates that started between two observations started at once; the lower job
    id won, though ids of two clusters say nothing, and the dearer candidate ran on (user
    trial). The cheaper one wins; one that started more than a minute earlier still wins."""
    d = specs(workload("w", "p", gpus=4, walltime="30m", strategy=FAN))
    dear = job("11", JobState.RUNNING, node="a100-01", started=at(-1))  # 3 a GPU-hour
    cheap = job("12", JobState.RUNNING, node="v100-01", pool="v100", started=at(-1))  # 1
    p = plan(d, world(d, dear, cheap), now=NOW)
    assert [(a.op, a.job, a.reason.code.value) for a in p.actions] == [
        (Op.CANCEL, "11", "fan-out-loser")
    ]
    dear.started_at = at(-3)  # two minutes before the other
    assert [(a.op, a.job) for a in plan(d, world(d, dear, cheap), now=NOW).actions] == [
        (Op.CANCEL, "12")
    ]


def test_a_candidate_that_ran_to_completion_unseen_won_its_round() -> None:
    """Candidate 11 started and completed between two plans; candidate 12, queued by the
    same plan, was left waiting ("the first to run wins"), then ran the workload again
    (user trial, high). It lost: cancelled, and the workload is complete. A candidate of
    a later round (another plan) is no rival of it."""
    d = specs(workload("w", "p", gpus=4, walltime="30m", strategy=FAN))
    done = job("11", JobState.COMPLETED, node="a100-01", started=at(-40), ended=at(-10))
    rival = job("12", candidate="sim.v100.1x4.direct", pool="v100")
    done.plan_id = rival.plan_id = "plan-a"
    p = plan(d, world(d, done, rival), now=NOW)
    assert [(a.op, a.job, a.reason.code.value) for a in p.actions] == [
        (Op.CANCEL, "12", "fan-out-loser")
    ]
    assert p.actions[0].reason.message.startswith("fan-out: job 11 on sim of p/w ran to completion")
    assert p.pending == []
    rival.state = JobState.RUNNING  # it started meanwhile: it runs the work a second time
    rival.replicas, rival.started_at = [Replica(node="v100-01", gpus=4)], at(-5)
    assert [(a.op, a.job) for a in plan(d, world(d, done, rival), now=NOW).actions] == [
        (Op.CANCEL, "12")
    ]
    # two of the round completed, started together: the cheaper won (the one its
    # checkpoint progress would count), whichever the snapshot lists last
    cheap = job("13", JobState.COMPLETED, node="v100-02", pool="v100", started=at(-40))
    cheap.ended_at, cheap.plan_id = at(-10), "plan-a"
    [cancel] = plan(d, world(d, cheap, done, rival), now=NOW).actions
    assert cancel.reason.message.startswith("fan-out: job 13 on sim of p/w ran to completion")


def test_a_winner_slurm_forgot_still_wins_its_round_from_its_accounting() -> None:
    """Slurm forgets an ended job ``MinJobAge`` after it ends; the observation then adds it
    back from the cluster's accounting. It came back without the plan that submitted it,
    so it won no round: the rival the same plan queued was not cancelled, and ran the work
    again (noticed while fixing the checkpoint progress of such rounds)."""
    d = specs(workload("w", "p", gpus=4, walltime="30m", strategy=FAN))
    rival = job("12", candidate="sim.v100.1x4.direct", pool="v100")
    rival.plan_id = "plan-a"
    snap = world(d, rival)
    snap.clusters[0].runs = [
        JobRun(
            job="11",
            workload="p/w",
            started_at=at(-40),
            ended_at=at(-10),
            gpus=4,
            state=JobState.COMPLETED,
            plan_id="plan-a",
        )
    ]
    seen = with_unseen_endings(snap)
    [back] = [j for j in seen.clusters[0].jobs if j.id == "11"]
    assert back.plan_id == "plan-a"
    assert [(a.op, a.job, a.reason.code.value) for a in plan(d, seen, now=NOW).actions] == [
        (Op.CANCEL, "12", "fan-out-loser")
    ]


def test_a_candidate_queued_in_a_pool_the_specs_removed_is_cancelled() -> None:
    """A candidate queued in pool v100, which a later commit removed, stayed "submitted"
    for ever: never reaped, its workload never planned again (user trial, simulator).
    The specs no longer have that pool: the candidate is cancelled, the others wait on,
    and with none left the workload is planned again in the pools it has."""
    gone = {**POOLS[0], "name": "a100"}
    d = desired(
        [
            cluster(pools=[gone]),
            project("p", gpus=16),
            workload("w", "p", gpus=4, walltime="30m", strategy=FAN),
        ]
    )
    both = world(
        d,
        job("11", candidate="sim.a100.1x4.direct"),
        job("12", candidate="sim.v100.1x4.direct", pool="v100"),
    )
    p = plan(d, both, now=NOW)
    assert [(a.op, a.job, a.reason.code.value) for a in p.actions] == [
        (Op.CANCEL, "12", "spec-changed")
    ]
    assert "pool v100, which the specs no longer have" in p.actions[0].reason.message
    assert [(x.workload, x.reason.code.value) for x in p.pending] == [("p/w", "submitted")]

    alone = world(d, job("12", candidate="sim.v100.1x4.direct", pool="v100"))
    p = plan(d, alone, now=NOW)
    assert sorted((a.op, a.job or a.pool) for a in p.actions) == [
        (Op.CANCEL, "12"),
        (Op.SUBMIT, "a100"),
    ]


def test_several_started_at_once_keep_the_earliest_then_the_lowest_id() -> None:
    d = specs(workload("w", "p", gpus=4, walltime="30m", strategy=FAN))
    tie = world(
        d,
        job("10", JobState.RUNNING, node="a100-01", started=at(-1)),
        job("9", JobState.RUNNING, node="v100-01", started=at(-1), pool="v100"),
        job("8", JobState.RUNNING, node="a100-02", started=at(0)),
    )
    p = plan(d, tie, now=NOW)
    # 9 and 10 started first; "9" < "10" as numbers (not as strings)
    assert sorted(a.job or "" for a in p.actions if a.op == Op.CANCEL) == ["10", "8"]
    assert all(a.reason.code is ReasonCode.FAN_OUT_LOSER for a in p.actions)


def test_simulator_fan_out_converges_without_assuming_a_winner() -> None:
    """The virtual world of a plan leaves candidates pending: all of them are submitted."""
    d = specs(workload("w", "p", gpus=4, walltime="30m", strategy=FAN), adapter="simulator")
    p = plan(
        d,
        world(d),
        now=NOW,
        forecasts={"p/w@sim.a100.1x4.direct": at(0), "p/w@sim.v100.1x4.direct": at(30)},
    )
    assert len(p.actions) == 2
    sim = SimulatedCluster(world(d).clusters[0])
    for a in p.execution_order():
        sim.execute(a, plan_id=p.id, now=NOW)
    states = sorted((j.candidate, j.state.value) for j in sim.state.jobs)
    assert states == [("sim.a100.1x4.direct", "RUNNING"), ("sim.v100.1x4.direct", "RUNNING")]


def test_simulator_queues_what_does_not_fit_and_starts_it_later() -> None:
    d = specs(workload("w", "p", gpus=8, walltime="30m", strategy=FAN), adapter="simulator")
    full = Job(
        id="1",
        workload=None,
        replicas=[Replica(node="a100-01", gpus=8)],
        started_at=at(-5),
        walltime=600,
    )  # not ours: the cluster's other users
    state = world(
        d,
        full,
        Job(id="2", workload=None, replicas=[Replica(node="a100-02", gpus=8)], started_at=at(-5)),
    ).clusters[0]
    sim = SimulatedCluster(state)
    [a] = plan(d, world(d, *state.jobs), now=NOW).actions
    assert sim.fits_now(a) is False
    assert sim.execute(a, plan_id="p", now=NOW).message == "queued"
    queued = sim.find("1001") or sim.state.jobs[-1]
    assert queued.state is JobState.PENDING and queued.started_at is None
    sim.refresh(at(6))  # the first job's walltime is over: room on a100-01
    assert queued.state is JobState.RUNNING and [r.node for r in queued.replicas] == ["a100-01"]


# ------------------------------------------------------------------ checkpoint segments


SEG = {"signal": "USR1", "grace": "10m", "total": "24h"}


def test_segments_math() -> None:
    base = Segments(total=24 * HOUR, walltime=8 * HOUR, grace=600)
    assert (base.number, base.remaining, base.walltime_for()) == (1, 24 * HOUR, 8 * HOUR)
    two = Segments(total=24 * HOUR, walltime=8 * HOUR, grace=600, elapsed=16 * HOUR, done=2)
    assert two.describe() == "segment 3: 16h of 24h done"
    assert two.walltime_for() == 8 * HOUR and two.walltime_for(4 * HOUR) == 4 * HOUR
    last = Segments(total=24 * HOUR, walltime=8 * HOUR, grace=600, elapsed=22 * HOUR, done=3)
    assert last.walltime_for() == 2 * HOUR + 600  # only what is left, plus the grace
    assert Segments(total=10, walltime=20, grace=5, elapsed=10).complete
    # a segment that stops at its checkpoint ran walltime - grace; one far shorter finished
    assert not ended_early(base, 8 * HOUR - 600, 8 * HOUR - 600, None)
    assert ended_early(base, 2 * HOUR, 2 * HOUR, None)
    assert not ended_early(base, 3 * HOUR, 3 * HOUR, 3 * HOUR + 600)  # backfilled: 3 h limit
    tiny = Segments(total=16, walltime=15, grace=5)
    assert not ended_early(tiny, 10, 10, 60)  # Slurm rounds the limit up to a minute
    assert not ended_early(tiny, 16, 6, 60)  # the last, short segment: what was left
    assert ended_early(tiny, 1, 1, 60)


def test_progress_from_the_jobs_of_a_snapshot() -> None:
    runs = [
        job("1", JobState.COMPLETED, started=at(-120), ended=at(-60), walltime=3660),
        job("2", JobState.COMPLETED, started=at(-50), ended=at(-20), walltime=3660),
        job("3", JobState.FAILED, started=at(-19), ended=at(-18)),
    ]
    p = progress_from_jobs("p/w", [("sim", j) for j in runs])
    assert p == Progress(
        workload="p/w",
        elapsed_seconds=90 * 60,
        segments=2,
        last_seconds=30 * 60,
        last_limit_seconds=3660,
    )


def test_candidates_of_one_round_that_all_completed_ran_one_segment() -> None:
    """Room freed on two pools at once: both candidates of a segmented fan-out workload
    started, and both ran to completion before a plan saw them run. Each run counted as a
    segment: two copies of segment 1 made "segment 3: 8h of 12h done" (with three
    candidates the workload was complete after one segment; user trial). One plan
    submitted them, one round: only its winner's run counts, the earliest started and, of
    those started together, the cheaper. A run of another plan is another segment."""
    seg = {"signal": "USR1", "grace": "10m", "total": "12h"}
    d = specs(
        workload("w", "p", gpus=4, walltime="4h", checkpoint=seg, strategy=FAN),
        adapter="simulator",
    )
    dear = job("11", JobState.COMPLETED, node="a100-01", started=at(-250), ended=at(-10))
    cheap = job(  # v100 runs segments of its pool's maxWalltime: 1 h
        "12", JobState.COMPLETED, node="v100-01", pool="v100", walltime=HOUR
    )
    cheap.started_at, cheap.ended_at = at(-249.5), at(-189.5)
    dear.walltime = 4 * HOUR
    dear.plan_id = cheap.plan_id = "plan-a"

    def standing(*jobs: Job) -> tuple[int, int]:
        seg = build_problem(d, world(d, *jobs), NOW).segments["p/w"]
        return seg.done, seg.elapsed

    assert standing(dear, cheap) == (1, HOUR)  # started together: the cheaper won
    messages = [a.reason.message for a in plan(d, world(d, dear, cheap), now=NOW).actions]
    assert messages and all(m.startswith("segment 2: 1h of 12h done") for m in messages)
    dear.started_at = at(-252)  # two minutes before the other: it won, whatever it cost
    assert standing(dear, cheap) == (1, 4 * HOUR + 2 * 60)
    later = job("13", JobState.COMPLETED, started=at(-9), ended=at(-1), walltime=4 * HOUR)
    later.plan_id = "plan-b"  # the next round
    assert standing(dear, cheap, later) == (2, 4 * HOUR + 10 * 60)


def test_a_segment_done_submits_the_next_until_the_total() -> None:
    d = specs(
        workload("w", "p", gpus=4, walltime="8h", checkpoint=SEG, gpuTypes=["a100_80"]),
        adapter="simulator",
    )
    fresh = plan(d, world(d), now=NOW)
    [first] = fresh.actions
    assert first.submit is not None and (first.submit.walltime, first.submit.segment) == (
        8 * HOUR,
        1,
    )
    assert first.reason.code is ReasonCode.WITHIN_DESERVED
    done = job("5", JobState.COMPLETED, started=at(-500), ended=at(-20), walltime=8 * HOUR)
    progress = [
        Progress(
            workload="p/w",
            elapsed_seconds=16 * HOUR,
            segments=2,
            last_seconds=8 * HOUR - 600,
            last_limit_seconds=8 * HOUR,
        )
    ]
    [nxt] = plan(d, world(d, done, progress=progress), now=NOW).actions
    assert nxt.reason.code is ReasonCode.CHECKPOINT_RESUME
    assert nxt.reason.message.startswith("segment 3: 16h of 24h done; project p holds")
    assert nxt.submit is not None and (nxt.submit.walltime, nxt.submit.segment) == (8 * HOUR, 3)
    finished = [
        Progress(
            workload="p/w",
            elapsed_seconds=24 * HOUR,
            segments=3,
            last_seconds=8 * HOUR - 600,
            last_limit_seconds=8 * HOUR,
        )
    ]
    end = plan(d, world(d, done, progress=finished), now=NOW)
    assert end.actions == [] and end.pending == []
    # the command finished the work early (a 2-minute segment): complete as well
    early = [
        Progress(
            workload="p/w",
            elapsed_seconds=8 * HOUR,
            segments=2,
            last_seconds=120,
            last_limit_seconds=8 * HOUR,
        )
    ]
    assert plan(d, world(d, done, progress=early), now=NOW).actions == []


def test_fan_out_of_a_segment_resumes_with_the_remaining_time() -> None:
    d = specs(
        workload(
            "w",
            "p",
            gpus=4,
            walltime="4h",
            strategy=FAN,
            gpuTypes=["v100"],
            checkpoint={"signal": "USR1", "grace": "5m", "total": "10h"},
        )
    )
    progress = [
        Progress(
            workload="p/w",
            elapsed_seconds=9 * HOUR + 1800,
            segments=10,
            last_seconds=HOUR - 300,
            last_limit_seconds=HOUR,
        )
    ]
    done = job("4", JobState.COMPLETED, started=at(-61), ended=at(-1), pool="v100")
    p = plan(d, world(d, done, progress=progress), now=NOW)
    # half an hour is left: it fits v100's 1 h limit again, so no checkpoint mode is needed
    [a] = p.actions
    assert a.submit is not None and a.submit.candidate == "sim.v100.1x4.direct"
    assert a.reason.code is ReasonCode.CHECKPOINT_RESUME
    assert a.reason.message.startswith("segment 11: 9h30m of 10h done; candidate 1 of 1")
    assert (a.submit.walltime, a.submit.segment) == (1800 + 300, 11)


# ------------------------------------------------------------------ retry backoff


def test_backoff_schedule() -> None:
    assert [backoff_seconds(n) for n in range(1, 9)] == [60, 120, 240, 480, 960, 1920, 3600, 3600]
    assert backoff_seconds(40) == 3600


def test_a_failed_workload_waits_out_its_backoff() -> None:
    d = specs(workload("w", "p", gpus=4, walltime="30m"), adapter="simulator")
    failed = job("7", JobState.FAILED, started=at(-3), ended=at(-0.5), exit_code="1:0")
    p = plan(d, world(d, failed), now=NOW)
    assert p.actions == []
    [w] = p.pending
    assert w.reason.code is ReasonCode.FAILED
    assert w.reason.message == (
        "job 7 failed (exit 1:0) at 2026-11-22T09:59:30Z, the 1st failure "
        "in a row; retried after 2026-11-22T10:00:30Z (backoff 1m)"
    )
    assert [a.op for a in plan(d, world(d, failed), now=at(0.6)).actions] == [Op.SUBMIT]
    # the third failure in a row (the store's count): four minutes
    streak = [Failure(workload="p/w", count=3, job="7", ended_at=at(-0.5), exit_code="1:0")]
    assert plan(d, world(d, failed, failures=streak), now=at(3)).actions == []
    assert plan(d, world(d, failed, failures=streak), now=at(3.6)).actions


def test_a_node_failure_is_retried_at_once_and_a_second_in_a_row_waits() -> None:
    """A node that failed under a job (or left the simulator's specs) is not the workload's
    fault: it starts again elsewhere at once. A second in a row starts the backoff: the
    workload may be what takes its nodes down."""
    d = specs(workload("w", "p", gpus=4, walltime="30m"), adapter="simulator")
    lost = job("7", JobState.NODE_FAIL, started=at(-3), ended=at(-0.5))
    assert [a.op for a in plan(d, world(d, lost), now=NOW).actions] == [Op.SUBMIT]
    # seen ending just after the plan's clock was read: no wait of 0 s either
    late = job("8", JobState.NODE_FAIL, started=at(-3), ended=at(0.01))
    assert [a.op for a in plan(d, world(d, late), now=NOW).actions] == [Op.SUBMIT]
    before = job("6", JobState.NODE_FAIL, started=at(-6), ended=at(-4))
    p = plan(d, world(d, before, lost), now=NOW)
    assert p.actions == []
    [w] = p.pending
    assert w.reason.code is ReasonCode.FAILED
    assert "the 2nd failure in a row" in w.reason.message and "(backoff 1m)" in w.reason.message
    assert [a.op for a in plan(d, world(d, before, lost), now=at(0.6)).actions] == [Op.SUBMIT]


def test_a_retry_says_which_failure_it_retries() -> None:
    """Two node failures in a row were nowhere in `cp history`: each retry read only
    "within-deserved …", as a first start does (user trial). docs/reasons.md: `cp explain`
    and `cp history` show the failures. A retry's reason names the job that failed, how,
    and the streak; the history keeps every plan's reasons."""
    d = specs(workload("w", "p", gpus=4, walltime="30m"), adapter="simulator")
    lost = job("7", JobState.NODE_FAIL, started=at(-3), ended=at(-0.5))
    [retry] = plan(d, world(d, lost), now=NOW).actions
    assert retry.op is Op.SUBMIT and retry.reason.code is ReasonCode.WITHIN_DESERVED
    assert retry.reason.message.endswith(
        "; a retry: job 7 failed (NODE_FAIL) at 2026-11-22T09:59:30Z, the 1st failure in a row"
    ), retry.reason.message
    failed = job("8", JobState.FAILED, started=at(-3), ended=at(-0.5), exit_code="1:0")
    [retry] = plan(d, world(d, failed), now=at(2)).actions
    assert "; a retry: job 8 failed (exit 1:0) at 2026-11-22T09:59:30Z" in retry.reason.message
    # preempted since (cancelled, not failed): a start, not a retry
    stopped = job("9", JobState.CANCELLED, started=at(0), ended=at(1))
    [start] = plan(d, world(d, failed, stopped), now=at(2)).actions
    assert "retry" not in start.reason.message


def test_the_streak_from_a_snapshot_and_its_end() -> None:
    jobs = [
        job("1", JobState.FAILED, ended=at(-10)),
        job("2", JobState.TIMEOUT, ended=at(-5)),
        job("3", JobState.CANCELLED, ended=at(-7)),
    ]
    f = latest_failure("p/w", jobs, None)
    assert f is not None and (f.job, f.count) == ("2", 1)  # a cancel between breaks the streak
    jobs.append(job("4", JobState.NODE_FAIL, ended=at(-1)))
    f = latest_failure("p/w", jobs, None)
    assert f is not None and (f.job, f.count) == ("4", 2)
    assert latest_failure("p/w", [*jobs, job("5", JobState.COMPLETED, ended=at(0))], None) is None
    # the store remembers a failure the cluster has forgotten
    old = Failure(workload="p/w", count=5, job="0", ended_at=at(-2))
    assert latest_failure("p/w", [], old) == old


def test_fan_out_waits_out_the_backoff_too() -> None:
    d = specs(workload("w", "p", gpus=4, walltime="30m", strategy=FAN))
    failed = job("7", JobState.FAILED, started=at(-3), ended=at(-0.5))
    p = plan(d, world(d, failed), now=NOW)
    assert p.actions == [] and [x.reason.code.value for x in p.pending] == ["failed"]


def test_submit_action_round_trips_as_json() -> None:
    d = specs(workload("w", "p", gpus=4, walltime="30m", strategy=FAN))
    p = plan(d, world(d), now=NOW)
    again = [Action.model_validate_json(a.model_dump_json(by_alias=True)) for a in p.actions]
    assert again == p.actions
    assert '"timeMin":null' in p.actions[0].model_dump_json(by_alias=True)


def test_a_start_now_the_plan_itself_takes_away_is_not_counted() -> None:
    """The forecast saw V100 free, but this plan places other work there: not 'now'."""
    d = specs(
        workload("w", "p", gpus=4, walltime="30m", strategy=FAN),
        workload("hog", "p", gpus=4, gpuTypes=["v100"], walltime="30m"),
        workload("hog2", "p", gpus=4, gpuTypes=["v100"], walltime="30m"),
    )
    f: dict[str, Estimate] = {"p/w@sim.a100.1x4.direct": at(0), "p/w@sim.v100.1x4.direct": at(0)}
    p = plan(d, world(d), now=NOW, forecasts=f)
    fan = [a for a in p.actions if a.workload == "p/w"]
    # with V100 "now", the cheaper V100 would dominate A100; unknown, it does not
    assert [a.pool for a in fan] == ["a100", "v100"]
    assert "start unknown" in fan[1].reason.message


# ------------------------------------------------------------------ GPUs held by candidates


def _apply_on_simulator(d: DesiredState, snap: Snapshot, **kw: Any) -> SimulatedCluster:
    """Plan against ``snap`` and run the plan on a simulated copy of it, in execution order;
    an action the simulator refuses (a node over-committed) fails the test."""
    p = plan(d, snap, now=NOW, **kw)
    sim = SimulatedCluster(snap.clusters[0].model_copy(deep=True))
    for a in p.execution_order():
        result = sim.execute(a, plan_id=p.id, now=NOW)
        assert result.ok, (a.workload, result.message)
    return sim


def test_a_candidate_and_a_planned_workload_never_share_gpus() -> None:
    """The candidate sorts first by name and the cluster places it where it fits tightest:
    on the node the plan gave to ``b``. Submitted after the pinned work, it finds its own."""
    d = desired(
        [
            cluster(pools=[POOLS[1]]),
            project("p", gpus=16),
            workload("a", "p", gpus=2, walltime="30m", strategy=FAN),
            workload("b", "p", gpus=4, walltime="30m"),
        ]
    )
    sim = _apply_on_simulator(d, world(d))
    running = sorted((j.workload, [r.node for r in j.replicas]) for j in sim.state.jobs)
    assert [w for w, _ in running] == ["p/a", "p/b"]
    assert all(j.state is JobState.RUNNING for j in sim.state.jobs)


def test_a_waiting_candidate_that_fits_holds_its_gpus() -> None:
    """A candidate in the cluster's queue that fits now is about to start there: the plan
    places nothing else on the GPUs it will take (in the virtual rounds of a plan too)."""
    d = desired(
        [
            cluster(pools=[POOLS[1]]),
            project("p", gpus=16),
            workload("a", "p", gpus=4, walltime="30m", strategy=FAN),
            workload("b", "p", gpus=4, walltime="30m"),
            workload("c", "p", gpus=4, walltime="30m"),
        ]
    )
    queued = job("7", workload="p/a", candidate="sim.v100.1x4.direct", pool="v100")
    p = plan(d, world(d, queued), now=NOW)
    submits = [a.workload for a in p.actions if a.op == Op.SUBMIT]
    assert len(submits) == 1  # two nodes of 4: one for the candidate, one for b or c
    assert [x.reason.code.value for x in p.pending if x.workload == "p/a"] == ["submitted"]
