"""Shortcuts taken for speed never change an answer; each is checked against the work it
skips, on random busy problems.

- Allocate: a job that cannot fit is not bin-packed, and once a run of misses finds
  nothing left that could be placed, the rest get their reasons without walking the
  order (solvers/kai/allocate.py ``Allocator.run``): placements only take room.
- Preempt: a search is skipped when the free GPUs and every lower-priority candidate of
  the project together could not hold the job (``Preempt.most_freed``): no candidate
  set could pass the search's first check.
- Reclaim: a search, or a candidate set, is skipped when what reclaim's rules let it take
  from the projects it may take from could not make room (``Reclaim.most_taken``); a
  node's candidate set is not even built while what those rules let the sides on it give
  falls short (``Reclaim.side_bound``), each side's cap remembered per project and what
  the set holds under the job's chain (``NodeBound.most``).
- Whether any job left could be placed (``Allocator._any_placeable``) is asked once per
  shape: jobs of one project asking the same in the same pools get the same answer.
- The next step of a cycle takes over the candidate victims and the lanes of waiting
  jobs the last one left (``Search``, ``Ledger.indexes``): they must be what a fresh
  build from the session at rest would make, which also holds the lanes to being built
  at rest, never inside a simulation whose evictions are applied.
- The order at rest: between two placements (the allocate loop's own, or a disruptive
  step's commits) a project's next job that asks no more than the one just taken comes
  out next without the queue tree being walked (``Allocator.pop_next``).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest
from sortedcontainers import SortedList

import solvers.kai.allocate as allocate_module
import solvers.kai.victims as victims_module
from solvers.kai.allocate import Allocator, allocate
from solvers.kai.candidates import Holders
from solvers.kai.consolidate import consolidate
from solvers.kai.disruption import Disruption, Ledger
from solvers.kai.preempt import Preempt, preempt
from solvers.kai.reclaim import Reclaim, reclaim
from solvers.kai.turns import StaticRuns
from solvers.kai.victims import NodeBound
from solvers.kai.waiting import WaitingIndex
from solvers.problem import JobRequest, NodeInfo, PoolInfo, PoolKey, Problem
from solvers.session import Session
from tests.solvers.kai.test_turns import POOL, _job, _problem


def _busy(seed: int) -> Problem:
    """A random problem whose nodes are mostly taken by others' work, so the cluster fills
    while the loop walks its order."""
    problem = _problem(seed)
    rng = random.Random(seed)
    for node in problem.nodes.values():
        node.used = max(node.used, node.capacity - rng.choice([0, 0, 1, 2, 4]))
    return problem


def _answer(problem: Problem) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    s = Session.open(problem)
    done = allocate(s)
    return (
        {k: tuple(g.nodes) for k, g in done.grants.items()},
        {k: f"{r.code}: {r.message}" for k, r in done.pending.items()},
    )


def test_early_reasons_match_walking_the_whole_order(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = {"up front": 0, "mid-walk": 0}
    give_reasons = Allocator.give_reasons

    def counted(self: Allocator) -> None:
        taken["mid-walk" if self.grants or self.pending else "up front"] += 1
        give_reasons(self)

    compared = 0
    for seed in range(150):
        problem = _busy(seed)
        monkeypatch.setattr(allocate_module, "_FIRST_CHECK", 10**9)  # the plain walk
        walked = _answer(problem)
        monkeypatch.setattr(allocate_module, "_FIRST_CHECK", 1)  # check after every miss
        monkeypatch.setattr(Allocator, "give_reasons", counted)
        assert _answer(problem) == walked, f"seed {seed}"
        monkeypatch.setattr(Allocator, "give_reasons", give_reasons)
        compared += 1
    assert compared == 150
    assert taken["mid-walk"] > 20, taken  # the shortcut was really taken


def _two_pools(seed: int) -> Problem:
    """A busy problem with a second, smaller pool: pending jobs may use either or both."""
    problem = _busy(seed)
    rng = random.Random(seed)
    (first,) = problem.pools
    second = (first[0], "small")
    problem.pools[second] = PoolInfo(second, "u", 40.0, 4, None, None, 1.0, None)
    for i in range(8):
        node = NodeInfo(f"m{i}", first[0], second, 4, rng.choice([0, 2, 3, 4, 4]), True)
        problem.nodes[f"{first[0]}/m{i}"] = node
    for job in problem.jobs.values():
        if not job.running:
            job.pools = rng.choice([[first], [second], sorted([first, second])])
    return problem


def test_whether_any_job_fits_is_asked_once_per_shape() -> None:
    """Checked after every pick of the allocate loop against asking every job left."""
    asked = answered_no = 0
    for seed in range(120):
        s = Session.open(_two_pools(seed))
        order = Allocator(s, at_rest=True)
        while True:
            every = any(
                allocate_module.within_limits(
                    s, s.problem.jobs[k], order.chunk(s.problem.jobs[k]) * s.problem.jobs[k].gpus
                )
                and allocate_module.could_fit(s, s.problem.jobs[k], order.chunk(s.problem.jobs[k]))
                for heap in order.heaps.values()
                for _, k in heap
            )
            assert order._any_placeable() == every, f"seed {seed}"
            asked += 1
            answered_no += not every
            key = order.pop_next()
            if key is None:
                break
            job = s.problem.jobs[key]
            count = order.chunk(job)
            if (
                order.check_limits(job, count * job.gpus) is None
                and order._place(job, count) is None
            ):
                order.forget(job.queue)
                if len(s.tasks[key]) < job.replicas:
                    order.requeue(job)
    assert answered_no > 50, answered_no  # full clusters were met, not only free ones
    assert asked > 1000, asked


def _disrupted(
    problem: Problem, step: Callable[[Session, Ledger], None]
) -> tuple[dict[str, list[str]], dict[str, str], list[str]]:
    """What a disruptive step does after allocation: placements, who it disturbed and why,
    and whom it placed."""
    s = Session.open(problem)
    allocate(s)
    ledger = Ledger()
    step(s, ledger)
    return (
        {k: sorted(v) for k, v in s.tasks.items() if v},
        {k: r.message for k, r in ledger.disrupted.items()},
        sorted(ledger.grants),
    )


def test_preempt_skips_only_searches_that_would_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    none_below = 0
    most_freed = Preempt.most_freed

    def counted(self: Preempt, job: JobRequest, pools: set[PoolKey], holders: Holders) -> float:
        nonlocal none_below
        freed = most_freed(self, job, pools, holders)
        none_below += freed == 0  # no lower-priority candidate: the bound is all free GPUs
        return freed

    preempted = 0
    for seed in range(150):
        problem = _busy(seed)
        monkeypatch.setattr(Preempt, "most_freed", lambda *args: float("inf"))  # every search
        searched = _disrupted(problem, preempt)
        monkeypatch.setattr(Preempt, "most_freed", counted)
        assert _disrupted(problem, preempt) == searched, f"seed {seed}"
        preempted += bool(searched[2])
    assert preempted > 20 and none_below > 100, (preempted, none_below)


def test_reclaim_skips_only_what_its_rules_would_refuse(monkeypatch: pytest.MonkeyPatch) -> None:
    refused, calls = 0, {"bound": 0, "side bound": 0}
    most_taken = Reclaim.most_taken
    mode = "bound"

    def counted(
        self: Reclaim,
        job: JobRequest,
        count: int,
        held: dict[str, float],
        largest: dict[str, float],
    ) -> float:
        nonlocal refused
        taken = most_taken(self, job, count, held, largest)
        refused += taken < count * job.gpus
        calls[mode] += 1
        return taken

    side_bound = Reclaim.side_bound
    reclaimed = 0
    for seed in range(150):
        problem = _busy(seed)
        monkeypatch.setattr(Reclaim, "most_taken", lambda *args: float("inf"))  # no bound
        monkeypatch.setattr(Reclaim, "side_bound", lambda *args: None)  # every set opened
        searched = _disrupted(problem, reclaim)
        monkeypatch.setattr(Reclaim, "most_taken", counted)  # the bound on each set
        mode = "bound"
        assert _disrupted(problem, reclaim) == searched, f"seed {seed}"
        monkeypatch.setattr(Reclaim, "side_bound", side_bound)  # and sets skipped by sides
        mode = "side bound"
        assert _disrupted(problem, reclaim) == searched, f"seed {seed}"
        reclaimed += bool(searched[2])
    assert reclaimed > 10 and refused > 50, (reclaimed, refused)
    # the side bound skipped sets the per-set bound would have refused
    assert calls["side bound"] < calls["bound"] - 50, calls


def test_commits_recompute_only_the_order_they_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a commit, only the queues of the placed job and its victims are ordered
    afresh, and only their subtrees' turns in simulations; forgetting everything gives
    the same answers."""
    forget, forget_runs = Allocator.forget, StaticRuns.forget
    kept = 0

    def forget_all_runs(self: StaticRuns, projects: Iterable[str]) -> None:
        nonlocal kept
        forget_runs(self, projects)
        kept += len(self._runs)
        forget_runs(self, list(self.s.problem.queues))

    changed = 0
    for seed in range(150):
        problem = _busy(seed)
        for step in (reclaim, preempt):
            monkeypatch.setattr(Allocator, "forget", lambda self, qid=None: forget(self))
            monkeypatch.setattr(StaticRuns, "forget", forget_all_runs)
            whole = _disrupted(problem, step)
            monkeypatch.setattr(Allocator, "forget", forget)
            monkeypatch.setattr(StaticRuns, "forget", forget_runs)
            assert _disrupted(problem, step) == whole, f"seed {seed}, {step.__name__}"
            changed += bool(whole[1])
    assert changed > 20 and kept > 20, (changed, kept)


def test_an_order_at_rest_takes_runs_without_walking_the_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Popping a run of one project's jobs directly gives the order the walk gives, alone,
    in the allocate loop (whose placements end a run) and in the disruptive steps (whose
    commits do)."""
    next_in_run = Allocator._next_in_run
    direct = 0

    def counted(self: Allocator) -> str | None:
        nonlocal direct
        key = next_in_run(self)
        direct += key is not None
        return key

    def order(problem: Problem, at_rest: bool) -> list[str]:
        s = Session.open(problem)
        allocate(s)
        waiting = {k for k, j in problem.jobs.items() if len(s.tasks.get(k, [])) < j.replicas}
        popping = Allocator(s, keys=waiting, at_rest=at_rest)
        return list(iter(popping.pop_next, None))

    changed = 0
    for seed in range(150):
        problem = _busy(seed)
        monkeypatch.setattr(Allocator, "_next_in_run", lambda self: None)  # always walk
        walked = order(problem, at_rest=True)
        allocated = _answer(problem)
        steps = {step.__name__: _disrupted(problem, step) for step in (reclaim, preempt)}
        monkeypatch.setattr(Allocator, "_next_in_run", counted)
        assert order(problem, at_rest=False) == walked == order(problem, at_rest=True), seed
        assert _answer(problem) == allocated, f"seed {seed}"
        for step in (reclaim, preempt):
            assert _disrupted(problem, step) == steps[step.__name__], f"seed {seed}"
            changed += bool(steps[step.__name__][1])
    assert direct > 1000 and changed > 20, (direct, changed)


def test_the_side_bound_is_above_most_taken_for_every_set() -> None:
    """Reclaim's bound per side (``Reclaim.side_bound``), summed over the sides a set of
    victims holds and given what the set holds under the waiting job's own chain, is never
    below what ``most_taken`` lets that set give: skipping a node's set on it is safe."""
    checked = inside_counted = 0
    for seed in range(150):
        problem = _busy(seed)
        rng = random.Random(seed)
        s = Session.open(problem)
        allocate(s)
        step = Reclaim(s, Ledger())
        step.base_alloc = defaultdict(float, s.alloc)
        step.base_alloc_t = defaultdict(float, s.alloc_t)
        holders = Holders(s, shields=True)
        candidates = sorted(k for k in s.tasks if k in holders)
        waiting = sorted(k for k, j in problem.jobs.items() if not s.tasks.get(k))
        for key in waiting[:8]:
            job = problem.jobs[key]
            count = job.min_replicas
            bound = step.side_bound(job, count, holders)
            assert bound is not None
            mine = {q.id for q in s.chain(job.queue)}
            others = [k for k in candidates if problem.jobs[k].queue != job.queue]
            for _ in range(20):
                chosen = rng.sample(others, min(len(others), rng.randint(1, 4)))
                held: dict[str, float] = defaultdict(float)
                largest: dict[str, float] = defaultdict(float)
                inside: dict[str, float] = defaultdict(float)
                for k in chosen:
                    victim = problem.jobs[k]
                    gpus = len(s.tasks[k]) * victim.gpus
                    held[victim.queue] += gpus
                    largest[victim.queue] = max(largest[victim.queue], gpus)
                    for q in s.chain(victim.queue):
                        if q.id in mine:
                            inside[q.id] += gpus
                sides = {bound.side(q): q for q in held}
                most = sum(bound.cap(q, inside) for q in sides.values())
                assert step.most_taken(job, count, held, largest) <= most + 1e-9, (seed, key)
                checked += 1
                inside_counted += any(inside[step.sides(job.queue, q)[0].id] for q in held)
    assert checked > 1000 and inside_counted > 50, (checked, inside_counted)


def test_a_nodes_bound_remembers_each_cap_by_what_it_depends_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``NodeBound.most`` remembers a side's cap per project and GPUs held under the job's
    chain; every answer equals the sum worked out afresh from the node's victims, and the
    searches hold victims under their own chain often enough to tell."""
    most = NodeBound.most
    calls = inside = 0

    def checked(self: NodeBound, node: str) -> float:
        nonlocal calls, inside
        found = most(self, node)
        projects = {**self.recorded, **self.sides_on[node]}.values()
        held = self.inside + self.inside_on.get(node, Counter())
        assert found == sum(self.bound.cap(qid, held) for qid in projects), node
        calls += 1
        inside += bool(held)
        return found

    monkeypatch.setattr(NodeBound, "most", checked)
    for seed in range(150):
        _disrupted(_busy(seed), reclaim)
    assert calls > 2000 and inside > 1000, (calls, inside)


def _candidates(holders: Holders) -> dict[str, object]:
    """Everything a :class:`Holders` says, without the empty entries its updates leave."""

    def nonzero(by: Mapping[Any, Mapping[Any, float]]) -> dict[object, object]:
        return {(k, x): n for k, c in by.items() for x, n in c.items() if n}

    def order(lists: Mapping[Any, SortedList]) -> dict[object, object]:
        return {k: [(e[0].key, e[1]) for e in v] for k, v in lists.items() if v}

    return {
        "lists": order(holders.lists),
        "everywhere": order(holders.everywhere),
        "gpus": nonzero(holders.gpus),
        "total": {k: n for k, n in holders.total.items() if n},
        "pool_count": {k: n for k, n in holders.pool_count.items() if n},
        "in_pool": nonzero(holders.in_pool),
        "sizes": nonzero(holders.sizes),
        "by_priority": nonzero(holders.by_priority),
    }


def _lanes(index: WaitingIndex) -> dict[str, list[tuple[Any, str, int]]]:
    """Each lane's live entries, in order."""
    return {q: lane.live() for q, lane in index.lanes.items() if len(lane)}


def _elastic(seed: int) -> Problem:
    """A busy problem with running elastic work below its size: jobs that wait to grow and
    may be victims at once (a victim moved onto fewer nodes keeps waiting)."""
    problem = _busy(seed)
    rng = random.Random(seed)
    projects = sorted(q for q, queue in problem.queues.items() if queue.kind == "project")
    for i in range(rng.randint(2, 8)):
        room = sorted(k for k, n in problem.nodes.items() if n.capacity - n.used >= 1)
        if len(room) < 2:
            break
        q = rng.choice(projects)
        job = _job(f"{q.split(':')[1]}/e{i}", q, 1, rng.choice([3, 4]), rng)
        job.min_replicas = 1
        job.job_id, job.cluster, job.pool = f"e{i}", "c", POOL
        job.placed = rng.sample(room, 2)
        for n in job.placed:
            problem.nodes[n].used += 1
        problem.jobs[job.key] = job
    return problem


STEPS = [("consolidate", consolidate), ("reclaim", reclaim), ("preempt", preempt)]


def test_what_a_step_leaves_for_the_next_is_what_a_fresh_build_would_make() -> None:
    """After every step, the candidate victims and the lanes of waiting jobs it kept up to
    date through its commits (and hands to the next step) are what building them afresh
    from the session at rest makes: also for victims moved onto fewer nodes that still
    wait, and lanes built at rest, never inside a simulation whose evictions are applied."""
    checked = 0
    for seed in range(150):
        s = Session.open(_elastic(seed))
        allocate(s)
        ledger = Ledger()
        for name, step in STEPS:
            step(s, ledger)
            carried = ledger.indexes
            if carried is None:
                continue
            fresh = Holders(s, shields=carried.shields)
            assert _candidates(carried.holders) == _candidates(fresh), (seed, name)
            if carried.waiting is not None:
                rebuilt = WaitingIndex(s, carried.waiting.members)
                assert _lanes(carried.waiting) == _lanes(rebuilt), (seed, name)
                checked += bool(ledger.disrupted)
    assert checked >= 30, checked


def test_taking_indexes_over_changes_no_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The three steps with every step building its own indexes and with each taking over
    the last one's: the same placements, the same victims for the same reasons."""

    def outcome(problem: Problem) -> tuple[object, ...]:
        s = Session.open(problem)
        allocate(s)
        ledger = Ledger()
        for _, step in STEPS:
            step(s, ledger)
        return (
            {k: sorted(v) for k, v in s.tasks.items() if v},
            {k: r.message for k, r in ledger.disrupted.items()},
            {k: g.reason.message for k, g in ledger.grants.items()},
        )

    plans = [outcome(_elastic(seed)) for seed in range(150)]
    built = victims_module.Search.__init__

    def own(
        self: victims_module.Search, step: Disruption, waiting: set[str], carried: object = None
    ) -> None:
        built(self, step, waiting, None)

    monkeypatch.setattr(victims_module.Search, "__init__", own)
    assert [outcome(_elastic(seed)) for seed in range(150)] == plans
    assert sum(bool(p[1]) for p in plans) >= 30  # steps disturbed someone
