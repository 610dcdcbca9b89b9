"""The simulation's turn order from runs (solvers/kai/turns.py) is the allocate loop's order.

The allocate loop (``Allocator.pop_next``) pops every waiting job in queue order; the
runs compute the same order of the simulated jobs from each queue's records. Random
queue trees (up to three levels, ranks, quotas), random running work (allocations),
random waiting jobs, and random sets of simulated jobs, some of which are placed when
their turn comes (the allocation changes between turns): both orders must agree.
"""

from __future__ import annotations

import heapq
import random
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.kai.allocate import Allocator, HeapEntry, next_chunk
from solvers.kai.turns import StaticRuns, Turns
from solvers.kai.waiting import WaitingIndex
from solvers.order import job_order
from solvers.problem import JobRequest, NodeInfo, PoolInfo, Problem, Queue
from solvers.session import Session

NOW = datetime(2026, 11, 22, 10, tzinfo=UTC)
POOL = ("c", "p")


def _problem(seed: int) -> Problem:
    rng = random.Random(seed)
    queues: dict[str, Queue] = {}
    top: list[str] = []
    projects: list[str] = []

    def add(qid: str, kind: str, parent: str | None) -> None:
        deserved = float(rng.choice([0, 0, 2, 4, 8, 16]))
        queues[qid] = Queue(
            qid,
            qid.split(":")[1],
            kind,
            parent,
            deserved,
            None,
            float(rng.choice([0, 1, 2])),
            rng.choice([90, 100, 100, 110]),
        )
        if parent is None:
            top.append(qid)
        else:
            queues[parent].children.append(qid)
        if kind == "project":
            projects.append(qid)

    for d in range(rng.randint(1, 3)):
        did = f"department:d{d}"
        add(did, "department", None)
        for sub in range(rng.randint(0, 2)):
            sid = f"department:d{d}s{sub}"
            add(sid, "department", did)
            for p in range(rng.randint(1, 3)):
                add(f"project:d{d}s{sub}p{p}", "project", sid)
        for p in range(rng.randint(0 if queues[did].children else 1, 3)):
            add(f"project:d{d}p{p}", "project", did)
    if rng.random() < 0.5:
        add("project:top", "project", None)
    for q in queues.values():
        q.children.sort()
    nodes = {f"c/n{i}": NodeInfo(f"n{i}", "c", POOL, 8, 0, True) for i in range(40)}
    pools = {POOL: PoolInfo(POOL, "t", 80.0, 8, None, None, 1.0, None)}
    jobs: dict[str, JobRequest] = {}
    node_ids = sorted(nodes)
    for i in range(rng.randint(0, 30)):  # running work: the allocations
        q = rng.choice(projects)
        gpus = rng.choice([1, 2, 4])
        where = rng.choice(node_ids)
        if nodes[where].used + gpus > 8:
            continue
        nodes[where].used += gpus
        job = _job(f"{q.split(':')[1]}/r{i}", q, gpus, 1, rng)
        job.job_id, job.cluster, job.pool, job.placed = str(i), "c", POOL, [where]
        jobs[job.key] = job
    for i in range(rng.randint(2, 60)):  # waiting work
        q = rng.choice(projects)
        replicas = rng.choice([1, 1, 1, 2, 3])
        job = _job(f"{q.split(':')[1]}/w{i}", q, rng.choice([1, 1, 2, 4, 8]), replicas, rng)
        jobs[job.key] = job
    order = {qid: i for i, qid in enumerate(sorted(queues))}
    return Problem(NOW, queues, top, nodes, pools, jobs, {}, set(), [], [], order)


def _job(key: str, queue: str, gpus: int, replicas: int, rng: random.Random) -> JobRequest:
    return JobRequest(
        key=key,
        queue=queue,
        priority=rng.choice([50, 50, 100]),
        preemptible=True,
        gpus=gpus,
        replicas=replicas,
        min_replicas=rng.randint(1, replicas),
        created=NOW - timedelta(minutes=rng.randrange(1000)),
        pools=[POOL],
        walltime=None,
    )


def _replay(s: Session, waiting: set[str], todo: set[str], placed: set[str]) -> list[str]:
    """The allocate loop, every waiting job taking its turn; ``placed`` ones are charged."""
    jobs = s.problem.jobs
    heaps: dict[str, list[HeapEntry]] = {}
    for key in waiting - todo:
        job = jobs[key]
        heaps.setdefault(job.queue, []).append((job_order(job, 0), key))
    for heap in heaps.values():
        heapq.heapify(heap)
    counts = {k: next_chunk(jobs[k], 0) for k in todo}
    order = Allocator(s, keys=todo, counts=counts, heaps=heaps)
    out, left = [], set(todo)
    while left and (key := order.pop_next()) is not None:
        if key in left:
            left.discard(key)
            out.append(key)
            if key in placed:
                s.charge(jobs[key], counts[key] * jobs[key].gpus)
    return out


def _runs(
    s: Session, index: WaitingIndex, static: StaticRuns, todo: set[str], placed: set[str]
) -> list[str]:
    jobs = s.problem.jobs
    turns = Turns(
        s,
        index,
        static,
        {k: (job_order(jobs[k], 0), next_chunk(jobs[k], 0) * jobs[k].gpus) for k in todo},
    )
    out = []
    while (key := turns.next()) is not None:
        out.append(key)
        if key in placed:
            s.charge(jobs[key], next_chunk(jobs[key], 0) * jobs[key].gpus)
    return out


@settings(max_examples=400)  # commits between simulations: a stale subtree is rare
@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_runs_give_the_allocate_loops_order(seed: int, pick: int) -> None:
    problem = _problem(seed)
    jobs = problem.jobs
    rng = random.Random(pick)
    waiting = {k for k, j in jobs.items() if not j.running}
    s = Session.open(problem)
    index = WaitingIndex(s, waiting)
    static = StaticRuns(s, index)
    committed: set[str] = set()  # projects a commit changed: their runs must be new
    for _ in range(6):  # several simulations share one index and its static runs
        # jobs of other projects, so the changed ones are merged as untouched subtrees
        pool = sorted(k for k in waiting if jobs[k].queue not in committed) or sorted(waiting)
        if not pool:
            break
        todo = set(rng.sample(pool, rng.randint(1, min(6, len(pool)))))
        placed = {k for k in todo if rng.random() < 0.6}
        before = dict(s.alloc)
        expected = _replay(s, waiting, todo, placed)
        s.alloc.clear()
        s.alloc.update(before)
        got = _runs(s, index, static, todo, placed)
        s.alloc.clear()
        s.alloc.update(before)
        assert got == expected
        if placed and rng.random() < 0.7:  # a commit: the job runs, and waits no more
            key = min(placed)
            s.charge(jobs[key], next_chunk(jobs[key], 0) * jobs[key].gpus)
            waiting.discard(key)
            index.remove([key])
            static.forget([jobs[key].queue])
            committed.add(jobs[key].queue)
