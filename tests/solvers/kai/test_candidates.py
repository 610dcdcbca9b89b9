"""The indexed victim queue (solvers/kai/candidates.py) hands out the candidates the search
as first written (solvers/kai/exhaustive.py) does, in the same order.

The indexed queue reads a project's candidates from one list per pool, or from one list
of all of them when the waiting job may use every pool the project holds candidates in;
the exhaustive one collects and filters every running job for each search. Random queue
trees, running work spread over three pools, waiting jobs allowed in some of them.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.kai import exhaustive
from solvers.kai.allocate import allocate
from solvers.kai.candidates import Holders, VictimQueue
from solvers.kai.disruption import Disruption, Ledger
from solvers.kai.preempt import Preempt
from solvers.kai.reclaim import Reclaim, reclaim
from solvers.problem import JobRequest, NodeInfo, PoolInfo, Problem
from solvers.session import Chunk, Session
from tests.solvers.kai.test_turns import _job, _problem

POOLS = [("c", "a"), ("c", "b"), ("c", "x")]


def _pooled(seed: int) -> Problem:
    """``_problem``'s queues and work, on nodes split over three pools, each running job
    in its node's pool and each waiting job allowed in one to three of them."""
    rng = random.Random(seed)
    problem = _problem(seed)
    pools = {p: PoolInfo(p, p[1], 80.0, 8, None, None, 1.0, None) for p in POOLS}
    nodes = {}
    for i, (key, node) in enumerate(sorted(problem.nodes.items())):
        nodes[key] = NodeInfo(node.name, "c", POOLS[i % 3], 8, node.used, True)
    jobs: dict[str, JobRequest] = {}
    for key, job in problem.jobs.items():
        if job.running:
            job.pool = nodes[job.placed[0]].pool
            job.pools = [job.pool] if job.pool else []
        else:
            job.pools = sorted(rng.sample(POOLS, rng.randint(1, 3)))
        jobs[key] = job
    for i in range(rng.randint(0, 6)):  # elastic running work, replicas on several nodes
        q = rng.choice(sorted(problem.queues))
        if problem.queues[q].kind != "project":
            continue
        pool = rng.choice(POOLS)
        there = [k for k, n in sorted(nodes.items()) if n.pool == pool and n.used + 1 <= 8]
        if len(there) < 2:
            continue
        job = _job(f"{q.split(':')[1]}/e{i}", q, 1, 3, rng)
        job.min_replicas = 1
        job.job_id, job.cluster, job.pool = f"e{i}", "c", pool
        job.placed = rng.sample(there, 2)
        job.pools = [pool]
        for n in job.placed:
            nodes[n].used += 1
        jobs[job.key] = job
    return Problem(
        problem.now,
        problem.queues,
        problem.top,
        nodes,
        pools,
        jobs,
        {},
        set(),
        [],
        [],
        problem.order,
    )


def _drain(queue: VictimQueue | exhaustive.VictimQueue) -> list[Chunk]:
    out = []
    while (chunk := queue.pop()) is not None:
        out.append(chunk)
    return out


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.integers(0, 10**6), st.sampled_from([Reclaim, Preempt]))
def test_the_indexed_victim_queue_offers_what_the_exhaustive_one_does(
    seed: int, step_type: type[Disruption]
) -> None:
    s = Session.open(_pooled(seed))
    step = step_type(s, Ledger())
    step.base_alloc, step.base_np = dict(s.alloc), dict(s.alloc_np)
    holders = Holders(s, step.min_runtime_protects)
    waiting = sorted(k for k, j in s.problem.jobs.items() if not j.running)
    for key in waiting:
        job = s.problem.jobs[key]
        step.count = 1
        indexed = VictimQueue(s, holders, set(s.pools_for(job)), step.victim_filter(job), [])
        reference = exhaustive.VictimQueue(s, exhaustive._candidates(step, job, {}))
        assert _drain(indexed) == _drain(reference), key


def _check_held(s: Session, holders: Holders, rng: random.Random) -> None:
    jobs = s.problem.jobs
    for pools in [set(POOLS), *(set(rng.sample(POOLS, rng.randint(1, 3))) for _ in range(4))]:
        banned = {q for q in s.problem.queues if rng.random() < 0.3}
        expected: dict[str, float] = {}
        for key in sorted(holders._entry):
            job = jobs[key]
            if s.pool[key] in pools and job.queue not in banned:
                expected[job.queue] = expected.get(job.queue, 0) + len(s.tasks[key]) * job.gpus
        got = holders.held(pools, (set(s.problem.queues) - banned).__contains__)
        assert dict(got) == {q: g for q, g in expected.items() if g}


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.integers(0, 10**6))
def test_held_gpus_are_summed_over_the_pools_asked_for(seed: int) -> None:
    """Per project (those a step may take from), the GPUs its candidates hold in the pools
    a waiting job may use: from the per-pool sums, or the project's total where the job
    may use every pool holding candidates; built afresh, and as a reclaim's commits left
    them."""
    s = Session.open(_pooled(seed))
    rng = random.Random(seed)
    _check_held(s, Holders(s, shields=True), rng)
    allocate(s)
    ledger = Ledger()
    reclaim(s, ledger)
    if ledger.indexes is not None:
        _check_held(s, ledger.indexes.holders, rng)
