"""The CP-SAT class model: optimal where the greedy is not, and never breaking a hard rule.

Problems are built directly (solver records, no specs), so each solve takes milliseconds.
Properties on random small problems: no node over-committed, no limit exceeded on any
level, non-preemptible work within deserved on every level, gangs whole inside one
eligible pool, the same answer twice, and the greedy never scoring better.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from solvers.cpsat import CpsatResult, score, solve
from solvers.cpsat.classes import base_state, chain, enumerate_patterns, floor_quota
from solvers.cpsat.score import new_replicas
from solvers.kai.allocate import allocate
from solvers.policy import Policy
from solvers.problem import JobRequest, NodeInfo, PoolInfo, Problem, Queue
from solvers.session import Grant, Session
from specs.actions import Reason, ReasonCode

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
Pool = tuple[str, str]
TEST_POLICY = Policy(cpsat_time_limit=20)


# ------------------------------------------------------------------ builders


def pool(name: str, gpus_per_node: int = 4, cost: float = 1.0) -> PoolInfo:
    return PoolInfo(("c", name), name, 80.0, gpus_per_node, None, None, cost, None)


def node(
    name: str, pool_name: str, capacity: int = 4, used: int = 0, schedulable: bool = True
) -> NodeInfo:
    return NodeInfo(name, "c", ("c", pool_name), capacity, used, schedulable)


def project(
    name: str,
    deserved: float = 0,
    limit: float | None = None,
    rank: int = 100,
    weight: float = 1,
    department: str | None = None,
) -> Queue:
    return Queue(
        f"project:{name}",
        name,
        "project",
        department and f"department:{department}",
        deserved,
        limit,
        weight,
        rank,
    )


def department(
    name: str, deserved: float = 0, limit: float | None = None, children: tuple[str, ...] = ()
) -> Queue:
    return Queue(
        f"department:{name}",
        name,
        "department",
        None,
        deserved,
        limit,
        deserved,
        100,
        [f"project:{c}" for c in children],
    )


def job(
    name: str,
    project_name: str,
    gpus: int = 1,
    pools: tuple[str, ...] = ("a",),
    replicas: int = 1,
    min_replicas: int | None = None,
    priority: int = 50,
    preemptible: bool = True,
    age: int = 0,
    placed: tuple[str, ...] = (),
) -> JobRequest:
    req = JobRequest(
        key=f"{project_name}/{name}",
        queue=f"project:{project_name}",
        priority=priority,
        preemptible=preemptible,
        gpus=gpus,
        replicas=replicas,
        min_replicas=replicas if min_replicas is None else min_replicas,
        created=NOW - timedelta(minutes=age),
        pools=sorted(("c", p) for p in pools),
        walltime=None,
    )
    if placed:
        req.job_id, req.cluster, req.placed = f"id-{name}", "c", [f"c/{n}" for n in placed]
        req.pool, req.started_at = req.pools[0], req.created
    return req


def problem(
    pools: list[PoolInfo], nodes: list[NodeInfo], queues: list[Queue], jobs: list[JobRequest]
) -> Problem:
    qs = {q.id: q for q in queues}
    for q in queues:
        if q.parent and q.id not in qs[q.parent].children:
            qs[q.parent].children.append(q.id)
    for q in queues:
        q.children.sort()
    node_map = {f"c/{n.name}": n for n in nodes}
    for j in jobs:  # running replicas hold GPUs on their nodes
        for key in j.placed:
            node_map[key].used += j.gpus
    return Problem(
        now=NOW,
        queues=qs,
        top=sorted(q.id for q in queues if q.parent is None),
        nodes=node_map,
        pools={p.key: p for p in pools},
        jobs={j.key: j for j in jobs},
        submitted={},
        completed=set(),
        orphans=[],
        duplicates=[],
        order={qid: i for i, qid in enumerate(sorted(qs))},
    )


def run_both(p: Problem, policy: Policy = TEST_POLICY) -> tuple[dict[str, Grant], CpsatResult]:
    greedy = allocate(Session.open(p)).grants
    return dict(greedy), solve(p, Session.open(p), policy, greedy=greedy)


# ------------------------------------------------------------------ checks


def violations(p: Problem, grants: dict[str, Grant]) -> list[str]:
    """Every hard rule an answer breaks (empty when it is valid)."""
    base = base_state(p)
    out: list[str] = []
    used: Counter[str] = Counter()
    new: Counter[str] = Counter()
    new_np: Counter[str] = Counter()
    for key, g in grants.items():
        j = p.jobs[key]
        added = new_replicas(p, key, g)
        if g.pool not in j.pools and not j.running:
            out.append(f"{key} in ineligible pool {g.pool}")
        if any(p.nodes[n].pool != g.pool for n in g.nodes):
            out.append(f"{key} spans pools")
        if not j.running and not j.min_replicas <= len(g.nodes) <= j.replicas:
            out.append(f"{key} has {len(g.nodes)} replicas, gang {j.min_replicas}..{j.replicas}")
        if j.running and len(g.nodes) > j.replicas:
            out.append(f"{key} grew past its replicas")
        for n in added:
            used[n] += j.gpus
        for qid in chain(p, j.queue):
            new[qid] += len(added) * j.gpus
            if not j.preemptible:
                new_np[qid] += len(added) * j.gpus
    for n, gpus in used.items():
        if gpus > base.free.get(n, 0):
            out.append(f"node {n} over-committed: {gpus} > {base.free.get(n, 0)} free")
    for qid, q in p.queues.items():
        limit = floor_quota(q.limit)
        if new[qid] and limit is not None and base.alloc.get(qid, 0) + new[qid] > limit:
            out.append(f"{qid} over its limit")
        deserved = floor_quota(q.deserved) or 0
        if new_np[qid] and base.alloc_np.get(qid, 0) + new_np[qid] > deserved:
            out.append(f"{qid} non-preemptible work over deserved")
    return out


def partly_used(p: Problem, grants: dict[str, Grant]) -> int:
    used: Counter[str] = Counter()
    for key, g in grants.items():
        for n in new_replicas(p, key, g):
            used[n] += p.jobs[key].gpus
    return sum(1 for k, n in p.nodes.items() if 0 < n.free - used[k] < n.capacity)


# ------------------------------------------------------------------ examples


def test_pool_choice_lets_both_in_quota_jobs_start() -> None:
    """The greedy puts the flexible job in the first pool and strands the picky one."""
    p = problem(
        [pool("a"), pool("b")],
        [node("a-0", "a"), node("b-0", "b")],
        [project("hi", deserved=4, rank=110), project("lo", deserved=4)],
        [job("flex", "hi", gpus=4, pools=("a", "b")), job("picky", "lo", gpus=4, pools=("a",))],
    )
    greedy, result = run_both(p)
    assert set(greedy) == {"hi/flex"}
    assert set(result.grants) == {"hi/flex", "lo/picky"}
    assert result.grants["hi/flex"].pool == ("c", "b")
    assert score(p, Session.open(p), greedy) < result.score
    assert result.report.status == "OPTIMAL"
    assert result.report.greedy_objective is not None
    assert result.report.greedy_objective < result.report.objective


def test_packing_fits_what_best_fit_fragments() -> None:
    """Best-fit puts the 1-GPU job on the 3-free node; then one 3-GPU job has no node left."""
    p = problem(
        [pool("a")],
        [node("a-0", "a", used=1), node("a-1", "a")],
        [project("p", deserved=8)],
        [
            job("one", "p", gpus=1, age=3),
            job("three", "p", gpus=3, age=2),
            job("three-b", "p", gpus=3, age=1),
        ],
    )
    greedy, result = run_both(p)
    assert set(greedy) == {"p/one", "p/three"}
    assert set(result.grants) == {"p/one", "p/three", "p/three-b"}
    assert sorted(g.nodes for g in result.grants.values()) == [("c/a-0",), ("c/a-1",), ("c/a-1",)]
    assert not violations(p, result.grants)
    assert partly_used(p, result.grants) == 0


def test_fewer_partly_used_nodes_than_spreading() -> None:
    p = problem(
        [pool("a", 8)],
        [node(f"a-{i}", "a", capacity=8) for i in range(3)],
        [project("p", deserved=8)],
        [job(f"j{i}", "p", gpus=2, age=i) for i in range(4)],
    )
    _, result = run_both(p)
    assert len(result.grants) == 4
    assert partly_used(p, result.grants) == 0
    assert {g.nodes for g in result.grants.values()} == {("c/a-0",)}


def test_cheaper_pool_when_everything_else_ties() -> None:
    p = problem(
        [pool("dear", cost=3.0), pool("cheap", cost=1.0)],
        [node("dear-0", "dear"), node("cheap-0", "cheap")],
        [project("p", deserved=4)],
        [job("j", "p", gpus=4, pools=("dear", "cheap"))],
    )
    _, result = run_both(p)
    assert result.grants["p/j"].pool == ("c", "cheap")


def test_nonpreemptible_work_stays_within_deserved_on_every_level() -> None:
    p = problem(
        [pool("a", 8)],
        [node("a-0", "a", capacity=8), node("a-1", "a", capacity=8)],
        [department("d", deserved=5, children=("x",)), project("x", deserved=8, department="d")],
        [
            job("np-two", "x", gpus=2, priority=100, preemptible=False, age=3),
            job("np-four", "x", gpus=4, priority=100, preemptible=False, age=2),
            job("train", "x", gpus=4, age=1),
        ],
    )
    _, result = run_both(p)
    assert not violations(p, result.grants)
    assert set(result.grants) == {"x/np-four", "x/train"}  # 4 of d's 5 deserved, then borrowed
    assert result.pending["x/np-two"].code == ReasonCode.NON_PREEMPTIBLE_OVER_DESERVED
    assert "department d" in result.pending["x/np-two"].message


def test_both_engines_say_non_preemptible_work_above_deserved_waits_for_that() -> None:
    """x deserves 8, may hold 12 and runs 8: a 12-GPU service is over the limit today, but
    it waits because 12 non-preemptible GPUs never fit in 8 (not because of the limit)."""
    p = problem(
        [pool("a", 8)],
        [node(f"a-{i}", "a", capacity=8) for i in range(3)],
        [project("x", deserved=8, limit=12)],
        [
            job("train", "x", gpus=8, placed=("a-0",)),
            job("serve", "x", gpus=4, replicas=3, priority=125, preemptible=False),
        ],
    )
    greedy = allocate(Session.open(p))
    result = solve(p, Session.open(p), TEST_POLICY, greedy=greedy.grants)
    for engine in (greedy.pending, result.pending):
        assert engine["x/serve"].code == ReasonCode.NON_PREEMPTIBLE_OVER_DESERVED


def test_both_engines_say_a_cpu_only_job_takes_no_gpu_quota() -> None:
    """x runs 16 GPUs on a deserved 4; a job asking for no GPUs starts beside them, and
    neither engine says it runs on idle GPUs above deserved and may be reclaimed."""
    p = problem(
        [pool("a", 8)],
        [node(f"a-{i}", "a", capacity=8) for i in range(3)],
        [project("x", deserved=4)],
        [job("train", "x", gpus=8, replicas=2, placed=("a-0", "a-1")), job("prep", "x", gpus=0)],
    )
    greedy, result = run_both(p)
    for grants in (greedy, result.grants):
        reason = grants["x/prep"].reason
        assert reason.code == ReasonCode.WITHIN_DESERVED
        assert reason.message.startswith("CPU only: asks for no GPUs")


def test_both_engines_name_the_queue_whose_deserved_the_ask_alone_exceeds() -> None:
    """d deserves 5, its project x 8 (limit 12); x runs 8 + 4 non-preemptible. A 6-GPU
    service waits on d, which it exceeds alone; x, which 6 would fit, is not named."""
    p = problem(
        [pool("a", 8)],
        [node(f"a-{i}", "a", capacity=8) for i in range(3)],
        [
            department("d", deserved=5, children=("x",)),
            project("x", deserved=8, limit=12, department="d"),
        ],
        [
            job("train", "x", gpus=8, placed=("a-0",)),
            job("shell", "x", gpus=4, priority=100, preemptible=False, placed=("a-1",)),
            job("serve", "x", gpus=6, priority=125, preemptible=False),
        ],
    )
    greedy = allocate(Session.open(p))
    result = solve(p, Session.open(p), TEST_POLICY, greedy=greedy.grants)
    for engine in (greedy.pending, result.pending):
        reason = engine["x/serve"]
        assert reason.code == ReasonCode.NON_PREEMPTIBLE_OVER_DESERVED
        assert "department d" in reason.message, reason.message


def test_limits_hold_on_every_level() -> None:
    p = problem(
        [pool("a", 8)],
        [node("a-0", "a", capacity=8), node("a-1", "a", capacity=8)],
        [
            department("d", deserved=4, limit=6, children=("x", "y")),
            project("x", deserved=4, department="d"),
            project("y", deserved=0, limit=4, department="d"),
        ],
        [
            job("x-four", "x", gpus=4, age=3),
            job("y-two", "y", gpus=2, age=2),
            job("y-four", "y", gpus=4, age=1),
        ],
    )
    _, result = run_both(p)
    assert not violations(p, result.grants)
    assert set(result.grants) == {"x/x-four", "y/y-two"}
    assert result.pending["y/y-four"].code == ReasonCode.OVER_LIMIT
    assert "project y" in result.pending["y/y-four"].message
    assert "limit[department:d]" in result.report.binding


def test_gang_stays_in_one_pool_or_waits() -> None:
    p = problem(
        [pool("a"), pool("b")],
        [node("a-0", "a"), node("b-0", "b")],
        [project("p", deserved=8)],
        [job("gang", "p", gpus=4, replicas=2, pools=("a", "b"))],
    )
    _, result = run_both(p)
    assert result.grants == {}
    assert result.pending["p/gang"].code == ReasonCode.GANG_UNPLACEABLE


def test_elastic_jobs_start_at_min_and_grow() -> None:
    p = problem(
        [pool("a")],
        [node("a-0", "a"), node("a-1", "a", used=1)],
        [project("p", deserved=8)],
        [
            job("elastic", "p", gpus=1, replicas=4, min_replicas=2),
            job("running", "p", gpus=1, replicas=3, placed=("a-1",)),
        ],
    )
    greedy, result = run_both(p)
    assert not violations(p, result.grants)
    assert len(result.grants["p/elastic"].nodes) == 4
    assert result.grants["p/running"].nodes[:1] == ("c/a-1",)
    assert len(result.grants["p/running"].nodes) == 3
    assert result.grants["p/running"].reason.code == ReasonCode.ELASTIC_EXPAND
    assert score(p, Session.open(p), greedy) <= result.score


def _mixed_problem() -> Problem:
    return problem(
        [pool("a", 8), pool("b", 4, cost=2.0)],
        [node(f"a-{i}", "a", capacity=8, used=i) for i in range(4)]
        + [node(f"b-{i}", "b", used=1) for i in range(3)],
        [project("p", deserved=10, rank=110), project("q", deserved=6, limit=12)],
        [
            job(
                f"j{i}",
                "pq"[i % 2],
                gpus=(1, 2, 4)[i % 3],
                pools=("a", "b"),
                age=i,
                priority=(50, 100)[i % 2],
                preemptible=i % 2 == 0,
            )
            for i in range(12)
        ],
    )


def test_report_objective_matches_score_and_bound_holds() -> None:
    _, result = run_both(_mixed_problem())
    report = result.report
    assert tuple(t.value for t in report.tiers) == result.score.key()
    assert all(t.bound >= t.value - 1e-6 for t in report.tiers)
    assert report.bound >= report.objective
    assert 0 <= report.gap <= 1
    assert report.wall_seconds > 0 and report.model_size["classes"] > 0


def test_the_lp_bound_is_skipped_only_where_every_stage_is_proven() -> None:
    # allocate_best reads the bound only when CP-SAT proved nothing: the LP is skipped
    # for a proven answer (the answer itself unchanged) and worked out for any other
    p = _mixed_problem()
    greedy, with_lp = run_both(p)
    quick = solve(p, Session.open(p), TEST_POLICY, greedy=greedy, bound_if_optimal=False)
    assert with_lp.report.status == quick.report.status == "OPTIMAL"
    assert quick.grants == with_lp.grants and quick.score == with_lp.score
    assert quick.report.objective == with_lp.report.objective
    skipped = [t.bound for t in quick.report.tiers]
    assert skipped != [t.bound for t in with_lp.report.tiers]  # the tiers' ceilings only
    assert all(s >= t.bound for s, t in zip(skipped, with_lp.report.tiers, strict=True))
    unproven = Policy(cpsat_time_limit=0)
    stopped = solve(p, Session.open(p), unproven, greedy=greedy, bound_if_optimal=False)
    assert stopped.report.status != "OPTIMAL"
    with_lp = solve(p, Session.open(p), unproven, greedy=greedy)
    assert [t.bound for t in stopped.report.tiers] == [t.bound for t in with_lp.report.tiers]


def test_patterns_are_every_multiset_that_fits() -> None:
    patterns = enumerate_patterns(4, (4, 2, 1))
    assert patterns[0] == ()
    assert set(patterns) == {
        (),
        (1,),
        (2,),
        (1, 1),
        (2, 1),
        (1, 1, 1),
        (4,),
        (2, 2),
        (2, 1, 1),
        (1, 1, 1, 1),
    }
    assert len(patterns) == len(set(patterns))


def test_zero_gpu_and_blocked_jobs() -> None:
    blocked = job("too-long", "p", gpus=1)
    blocked.blocked = Reason(code=ReasonCode.WALLTIME_EXCEEDS_LIMIT, message="walltime too long")
    p = problem(
        [pool("a")],
        [node("a-0", "a", used=1), node("a-1", "a")],
        [project("p", deserved=4)],
        [job("cpu-only", "p", gpus=0), blocked],
    )
    _, result = run_both(p)
    assert result.grants["p/cpu-only"].nodes == ("c/a-0",)  # the fullest node, as KAI would
    assert result.pending == {"p/too-long": blocked.blocked}


def test_an_over_committed_node_takes_nothing_not_even_a_cpu_only_job() -> None:
    """A node whose jobs hold more GPUs than it has (a GPU fell off the bus under them) has
    fewer than no GPUs free: the fullest node, and room on it for nothing."""
    p = problem(
        [pool("a")],
        [node("a-0", "a", used=6), node("a-1", "a", used=1), node("a-2", "a")],
        [project("p", deserved=4)],
        [job("cpu-only", "p", gpus=0), job("one", "p", gpus=1)],
    )
    greedy, result = run_both(p)
    for grants in (greedy, result.grants):
        assert (grants["p/cpu-only"].nodes, grants["p/one"].nodes) == (("c/a-1",), ("c/a-1",))
        assert violations(p, grants) == []


def test_no_time_places_nothing_and_says_so() -> None:
    p = problem(
        [pool("a")], [node("a-0", "a")], [project("p", deserved=4)], [job("j", "p", gpus=2)]
    )
    result = solve(p, Session.open(p), Policy(cpsat_time_limit=0))
    assert result.report.status == "UNKNOWN"
    assert result.grants == {}
    assert set(result.pending) == {"p/j"}


def test_two_runs_give_identical_grants() -> None:
    p = problem(
        [pool("a", 8), pool("b")],
        [node(f"a-{i}", "a", capacity=8, used=(i * 3) % 8) for i in range(6)]
        + [node(f"b-{i}", "b", used=i % 4) for i in range(6)],
        [project("p", deserved=12), project("q", deserved=8, limit=20)],
        [
            job(
                f"j{i}",
                "pq"[i % 2],
                gpus=(1, 1, 2, 4, 8)[i % 5],
                pools=("a",) if i % 5 == 4 else ("a", "b"),
                age=i % 7,
            )
            for i in range(30)
        ],
    )
    first = solve(p, Session.open(p))
    second = solve(p, Session.open(p))
    assert first.grants == second.grants
    assert first.pending == second.pending


# ------------------------------------------------------------------ properties


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    pools = [pool("a", draw(st.sampled_from([4, 8])), cost=3.0), pool("b", 4, cost=1.0)]
    nodes = []
    for pi in pools:
        for i in range(draw(st.integers(0 if pi.key[1] == "b" else 1, 4))):
            cap = pi.gpus_per_node
            nodes.append(
                node(
                    f"{pi.key[1]}-{i}",
                    pi.key[1],
                    capacity=cap,
                    used=draw(st.integers(0, cap)),
                    schedulable=draw(st.booleans()) or i == 0,
                )
            )
    queues: list[Queue] = []
    depts = [f"d{i}" for i in range(draw(st.integers(0, 2)))]
    names = [f"p{i}" for i in range(draw(st.integers(1, 3)))]
    members: dict[str | None, list[str]] = defaultdict(list)
    for n in names:
        members[draw(st.sampled_from([None, *depts]))].append(n)
    for d in depts:
        dg = draw(st.integers(0, 12))
        queues.append(
            department(
                d,
                deserved=dg,
                limit=draw(st.one_of(st.none(), st.integers(dg, 24))),
                children=tuple(members[d]),
            )
        )
    for parent, ps in members.items():
        for name in ps:
            g = draw(st.integers(0, 8))
            queues.append(
                project(
                    name,
                    deserved=g,
                    limit=draw(st.one_of(st.none(), st.integers(g, 16))),
                    rank=draw(st.sampled_from([90, 100, 110])),
                    department=parent,
                )
            )
    jobs = []
    for i in range(draw(st.integers(1, 10))):
        gpus = draw(st.sampled_from([1, 2, 4]))
        fits = [pi.key[1] for pi in pools if pi.gpus_per_node >= gpus]
        eligible = draw(st.lists(st.sampled_from(fits), min_size=1, max_size=2, unique=True))
        replicas = draw(st.integers(1, 3))
        np_ = draw(st.booleans())
        jobs.append(
            job(
                f"w{i}",
                draw(st.sampled_from(names)),
                gpus=gpus,
                pools=tuple(eligible),
                replicas=replicas,
                min_replicas=draw(st.integers(1, replicas)),
                priority=100 if np_ else draw(st.sampled_from([50, 75])),
                preemptible=not np_,
                age=draw(st.integers(0, 5)),
            )
        )
    # a running elastic job, placed where it fits
    spare = [n for n in nodes if n.schedulable and n.capacity - n.used >= 1]
    with_running: bool = draw(st.booleans())
    if spare and with_running:
        host = spare[0]
        assert host.pool is not None
        jobs.append(
            job(
                "run",
                draw(st.sampled_from(names)),
                gpus=1,
                pools=(host.pool[1],),
                replicas=3,
                min_replicas=1,
                placed=(host.name,),
            )
        )
    return problem(pools, nodes, queues, jobs)


# CP-SAT is the slow part of a property run: two thirds of the profile's examples
@settings(max_examples=max(10, settings.default.max_examples * 2 // 3))
@given(problems())
def test_cpsat_is_valid_deterministic_and_never_worse_than_greedy(p: Problem) -> None:
    greedy, result = run_both(p)
    assert violations(p, result.grants) == []
    assert violations(p, greedy) == []  # the greedy obeys the same rules, so it is a feasible point
    assert result.report.status == "OPTIMAL"
    assert score(p, Session.open(p), greedy) <= result.score
    assert tuple(t.value for t in result.report.tiers) == result.score.key()
    again = solve(p, Session.open(p))
    assert again.grants == result.grants
    waiting = {k for k, j in p.jobs.items() if not j.running and k not in result.grants}
    assert set(result.pending) == waiting
