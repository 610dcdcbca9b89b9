"""The disruptive steps (consolidation, reclaim, preempt): one test per KAI rule, the
conformance scenarios against the pure core, and property tests.

Scenes are small clusters built from spec documents and a snapshot: ``world`` takes node
sizes, spec documents, the running jobs (oldest first) and the waiting ones (oldest
first), and returns what ``plan`` needs. Times only order jobs (KAI: older goes first,
and the newest victim goes first), except where minRuntime is under test.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.simulator import SimulatedCluster
from controlplane.plan import Plan
from controlplane.reconcile import plan
from solvers.kai import exhaustive
from solvers.kai.allocate import allocate
from solvers.kai.disruption import Ledger
from solvers.kai.reclaim import Reclaim
from solvers.kai.victims import Search
from solvers.policy import Policy
from solvers.problem import build_problem
from solvers.session import Chunk, Session
from specs.actions import Op, ReasonCode
from specs.desired import DesiredState
from specs.models import total_quota
from specs.snapshot import Snapshot
from tests.builders import cluster, department, desired, project, workload
from tests.conformance.scenarios import final_placement, load_scenarios, snapshot, spec_documents

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
CLUSTER, POOL = "kai", "gpu"


# ----------------------------------------------------------------------------- builders


def proj(name: str, gpus: int = 0, weight: float = 1, **spec: Any) -> dict[str, Any]:
    return project(name, gpus=gpus, weight=weight, **spec)


def job(
    name: str, project: str, gpus: int = 1, replicas: int = 1, priority: int = 50, **spec: Any
) -> dict[str, Any]:
    """A training workload (preemptible below priority 100 unless told otherwise)."""
    spec.setdefault("preemptible", priority < 100)
    return workload(name, project, gpus=gpus, replicas=replicas, priority=priority, **spec)


def world(
    nodes: dict[str, int],
    docs: list[dict[str, Any]],
    running: list[tuple[str, list[str]]] = (),  # type: ignore[assignment]
    waiting: list[str] = (),  # type: ignore[assignment]
    started: dict[str, int] | None = None,
) -> tuple[DesiredState, Snapshot]:
    """Specs and a snapshot. ``running`` lists (workload, node of each replica), oldest
    first; ``waiting`` lists queued workloads, oldest first; ``started`` overrides how many
    minutes ago a running job started."""
    pool = {"name": POOL, "gpuType": "a100_80", "gpusPerNode": max(nodes.values()), "nodes": 0}
    state = desired([cluster(CLUSTER, pools=[pool]), *docs])
    jobs = []
    for i, (key, on) in enumerate(running):
        at = NOW - timedelta(minutes=(started or {}).get(key, 500 - i))
        jobs.append(
            {
                "id": f"job-{key.split('/')[1]}",
                "workload": key,
                "state": "RUNNING",
                "submittedAt": at.isoformat(),
                "startedAt": at.isoformat(),
                "pool": POOL,
                "replicas": [{"node": n, "gpus": state.workloads[key].spec.gpus} for n in on],
            }
        )
    queue = [
        {"workload": k, "since": (NOW - timedelta(minutes=100 - i)).isoformat()}
        for i, k in enumerate(waiting)
    ]
    hosts = [{"name": n, "pool": POOL, "gpuType": "a100_80", "gpus": g} for n, g in nodes.items()]
    snap = Snapshot.model_validate(
        {
            "now": NOW.isoformat(),
            "queue": queue,
            "clusters": [{"name": CLUSTER, "jobs": jobs, "nodes": hosts}],
        }
    )
    return state, snap


def ops(p: Plan) -> dict[str, tuple[Op, list[str]]]:
    return {a.workload: (a.op, sorted(r.node or "" for r in a.replicas or [])) for a in p.actions}


def apply(snap: Snapshot, p: Plan) -> Snapshot:
    """The snapshot after the simulator carried out ``p`` (``snap`` itself is left alone)."""
    snap = snap.model_copy(deep=True)
    sims = {c.name: SimulatedCluster(c) for c in snap.clusters}
    for a in p.execution_order():
        sims[a.cluster].execute(a, plan_id=p.id, now=snap.now)
    return Snapshot.model_validate(snap.model_dump())


def settle(state: DesiredState, snap: Snapshot, rounds: int = 6) -> tuple[Snapshot, list[Plan]]:
    plans = []
    for _ in range(rounds):
        p = plan(state, snap, now=snap.now)
        plans.append(p)
        if p.empty:
            return snap, plans
        snap = apply(snap, p)
    raise AssertionError(f"no fixed point: {plans[-1].actions}")


def running_on(snap: Snapshot) -> dict[str, list[str]]:
    return {k.split("/", 1)[1]: v for k, v in _placement(snap).items()}


def _placement(snap: Snapshot) -> dict[str, list[str]]:
    return {
        j.workload: sorted(r.node or "" for r in j.replicas)
        for c in snap.clusters
        for j in c.jobs
        if j.workload and j.state.holds_gpus
    }


# ------------------------------------------------------------------------------ reclaim


def two_projects(pending_gpus: int = 1) -> tuple[DesiredState, Snapshot]:
    docs = [
        proj("a", gpus=2),
        proj("b", gpus=2),
        *[job(f"j{i}", "a") for i in range(1, 5)],
        job("x", "b", gpus=pending_gpus),
    ]
    return world(
        {"n1": 4}, docs, running=[(f"a/j{i}", ["n1"]) for i in range(1, 5)], waiting=["b/x"]
    )


def test_reclaim_takes_back_the_fair_share_from_the_newest_job() -> None:
    state, snap = two_projects()
    p = plan(state, snap, now=NOW)
    assert ops(p) == {"a/j4": (Op.PREEMPT, []), "b/x": (Op.SUBMIT, ["n1"])}
    reason = next(a.reason for a in p.actions if a.op == Op.PREEMPT)
    assert reason.code == ReasonCode.RECLAIM
    assert reason.message.startswith(
        "project b is below its deserved 2 (holds 0); project a holds 4, 1 over its fair share 3"
    )
    assert [w.workload for w in p.pending] == ["a/j4"]  # the victim waits, and says why
    assert p.pending[0].reason.code == ReasonCode.RECLAIM


def test_reclaim_gate_job_beyond_fair_share_reclaims_nothing() -> None:
    # b's fair share is 2; with a 3-GPU job it would hold 3 > 2: it may not reclaim
    state, snap = two_projects(pending_gpus=3)
    assert plan(state, snap, now=NOW).empty


def test_victim_order_lowest_priority_then_newest_first() -> None:
    docs = [
        proj("a", gpus=1),
        proj("b", gpus=1),
        job("low", "a", priority=40),
        job("old", "a"),
        job("new", "a"),
        job("x", "b"),
    ]
    state, snap = world(
        {"n1": 3},
        docs,
        waiting=["b/x"],
        running=[("a/low", ["n1"]), ("a/old", ["n1"]), ("a/new", ["n1"])],
    )
    assert ops(plan(state, snap, now=NOW))["a/low"][0] == Op.PREEMPT
    docs[2] = job("low", "a", priority=50)  # same priority: the newest goes
    state, snap = world(
        {"n1": 3},
        docs,
        waiting=["b/x"],
        running=[("a/low", ["n1"]), ("a/old", ["n1"]), ("a/new", ["n1"])],
    )
    assert ops(plan(state, snap, now=NOW))["a/new"][0] == Op.PREEMPT


def test_gang_victim_loses_all_its_replicas() -> None:
    docs = [proj("a", gpus=1), proj("b", gpus=2), job("gang", "a", replicas=2), job("x", "b")]
    state, snap = world({"n1": 2}, docs, running=[("a/gang", ["n1", "n1"])], waiting=["b/x"])
    assert ops(plan(state, snap, now=NOW)) == {
        "a/gang": (Op.PREEMPT, []),
        "b/x": (Op.SUBMIT, ["n1"]),
    }


def test_elastic_victim_loses_one_replica_above_its_minimum() -> None:
    docs = [
        proj("a", gpus=1),
        proj("b", gpus=2),
        job("el", "a", replicas=2, minReplicas=1),
        job("x", "b"),
    ]
    state, snap = world({"n1": 2}, docs, running=[("a/el", ["n1", "n1"])], waiting=["b/x"])
    assert ops(plan(state, snap, now=NOW)) == {
        "a/el": (Op.RESIZE, ["n1"]),
        "b/x": (Op.SUBMIT, ["n1"]),
    }


def test_non_preemptible_work_is_never_a_victim() -> None:  # kai-25
    docs = [
        proj("a", gpus=0, weight=0),
        proj("b", gpus=1),
        job("build", "a", priority=100, type="interactive"),
        job("x", "b"),
        job("y", "b", priority=100, type="interactive"),
    ]
    state, snap = world({"n1": 1}, docs, running=[("a/build", ["n1"])], waiting=["b/x", "b/y"])
    p = plan(state, snap, now=NOW)
    assert p.empty
    assert {w.workload for w in p.pending} == {"b/x", "b/y"}


def test_moved_not_evicted_when_the_simulation_places_the_victim_again() -> None:
    # b's interactive job (no consolidation for it) needs a whole 2-GPU node; a/j2 is the
    # newest victim, and after b/x lands on n2 it fits again on n1: a move, not a preemption
    docs = [
        proj("a", gpus=1),
        proj("b", gpus=2),
        job("j1", "a"),
        job("j2", "a"),
        job("x", "b", gpus=2, priority=100, type="interactive"),
    ]
    state, snap = world(
        {"n1": 2, "n2": 2, "n3": 1},
        docs,
        waiting=["b/x"],
        running=[("a/j1", ["n1"]), ("a/j2", ["n2"])],
    )
    p = plan(state, snap, now=NOW)
    assert ops(p) == {"a/j2": (Op.MOVE, ["n1"]), "b/x": (Op.SUBMIT, ["n2"])}
    move = next(a for a in p.actions if a.op == Op.MOVE)
    assert move.reason.code == ReasonCode.CONSOLIDATE and "(reclaim)" in move.reason.message
    assert move.job == "job-j2" and move.pool == POOL


def test_victim_kept_in_place_when_its_spot_is_still_free_better_than_kai() -> None:
    # STRICTLY BETTER THAN KAI. Victims in order: a/small (newest, n1), then a/big (n1).
    # The simulation evicts both, places b/x on n1, cannot place a/big again, and puts
    # a/small on m2 (as free as n1, and first by name). KAI would restart a/small on m2;
    # its old GPU on n1 is still free after the plan, so it stays where it runs.
    # Same policy outcome (b/x runs, a/big is reclaimed), one job fewer disturbed.
    docs = [
        proj("a", gpus=1),
        proj("b", gpus=2),
        job("j0", "a"),
        job("j1", "a"),
        job("big", "a", gpus=2),
        job("small", "a"),
        job("x", "b", gpus=2, priority=100, type="interactive"),
    ]
    state, snap = world(
        {"n1": 4, "m2": 2},
        docs,
        waiting=["b/x"],
        running=[("a/j0", ["m2"]), ("a/j1", ["n1"]), ("a/big", ["n1"]), ("a/small", ["n1"])],
    )
    assert ops(plan(state, snap, now=NOW)) == {
        "a/big": (Op.PREEMPT, []),
        "b/x": (Op.SUBMIT, ["n1"]),
    }


def ratio_world(flat: bool) -> tuple[DesiredState, Snapshot]:
    """qa asks for 2 more GPUs while its department holds 3 of a fair share of 4."""
    depts = [] if flat else [department("da", gpus=4), department("db", gpus=4)]
    docs = [
        *depts,
        proj("qa", gpus=5 if not flat else 4, department=None if flat else "da"),
        proj("qb", gpus=4, department=None if flat else "db"),
        job("a1", "qa"),
        job("a2", "qa"),
        job("a3", "qa"),
        job("b1", "qb"),
        job("b2", "qb"),
        job("b3", "qb"),
        job("big", "qb", gpus=2),
        job("x", "qa", gpus=2),
    ]
    running = (
        [(f"qa/a{i}", ["n1"]) for i in (1, 2, 3)]
        + [(f"qb/b{i}", ["n1"]) for i in (1, 2, 3)]
        + [("qb/big", ["n1"])]
    )
    return world({"n1": 8}, docs, running=running, waiting=["qa/x"])


def _simulate(session: Session, job: Any, count: int, victims: list[Chunk]) -> Any:
    """Both simulations (the indexed one and the exhaustive one) agree; the indexed one's
    trial is returned, applied."""
    slow = exhaustive.simulate(session, job, count, victims, exhaustive.Context(session, set()))
    outcome = None if slow is None else (dict(slow.removed), dict(slow.readded), slow.placed)
    if slow is not None:
        slow.rollback()
    trial = Search(Reclaim(session, Ledger()), set()).simulate(job, count, victims)
    assert outcome == (
        None if trial is None else (dict(trial.removed), dict(trial.readded), trial.placed)
    )
    return trial


def test_ratio_rule_reclaimer_must_stay_below_the_sibling_it_takes_from() -> None:
    # Departments da and db: fair share 4 each; qa's own fair share is 5 (over its
    # parent), so qa passes the gate (3 + 2 <= 5). Taking qb/big (2 GPUs) keeps db above
    # its fair share before the removal, but afterwards da would hold 5/4 = 1.25 of its
    # fair share against db's 3/4 = 0.75: not strictly below, so nothing may happen.
    state, snap = ratio_world(flat=False)
    problem = build_problem(state, snap, NOW)
    session = Session.open(problem)
    allocate(session)
    step = Reclaim(session, Ledger())
    step.base_alloc, step.base_np = session.alloc, session.alloc_np
    x, big = problem.jobs["qa/x"], problem.jobs["qb/big"]
    assert step.admits(x, 1) and step.may_evict(x, big)
    trial = _simulate(session, x, 1, [Chunk("qb/big", ("kai/n1",))])
    assert trial is not None and trial.evicted_count("qb/big") == 1
    assert not step.accept(x, 1, trial)
    trial.rollback()
    assert plan(state, snap, now=NOW).empty


def test_ratio_rule_does_not_apply_between_top_level_projects() -> None:
    state, snap = ratio_world(flat=True)  # qa's fair share is 4: 3 + 2 > 4 fails the gate
    assert plan(state, snap, now=NOW).empty


# ------------------------------------------------------------------------------ preempt


def test_preempt_needs_strictly_lower_priority_in_the_same_project() -> None:
    docs = [proj("a", gpus=1), job("low", "a")]
    state, snap = world(
        {"n1": 1}, [*docs, job("peer", "a")], running=[("a/low", ["n1"])], waiting=["a/peer"]
    )
    assert plan(state, snap, now=NOW).empty  # equal priority: no preemption
    state, snap = world(
        {"n1": 1},
        [*docs, job("hi", "a", priority=100, type="interactive")],
        running=[("a/low", ["n1"])],
        waiting=["a/hi"],
    )
    p = plan(state, snap, now=NOW)
    assert ops(p) == {"a/low": (Op.PREEMPT, []), "a/hi": (Op.SUBMIT, ["n1"])}
    assert p.actions[1].reason.code == ReasonCode.PRIORITY
    assert "outranks it" in p.actions[1].reason.message


def test_non_preemptible_preemptor_must_stay_within_deserved() -> None:
    docs = [proj("a", gpus=0), job("low", "a"), job("hi", "a", priority=100, type="interactive")]
    state, snap = world({"n1": 1}, docs, running=[("a/low", ["n1"])], waiting=["a/hi"])
    assert plan(state, snap, now=NOW).empty


def test_nothing_is_evicted_when_the_preemptor_cannot_fit() -> None:  # kai-34
    docs = [
        proj("a", gpus=4),
        job("r1", "a"),
        job("r2", "a", gpus=2),
        job("r3", "a"),
        job("big", "a", gpus=4, priority=125, type="inference"),
    ]
    state, snap = world(
        {"n1": 2, "n2": 2},
        docs,
        waiting=["a/big"],
        running=[("a/r1", ["n1"]), ("a/r2", ["n2"]), ("a/r3", ["n1"])],
    )
    p = plan(state, snap, now=NOW)
    assert p.empty and [w.workload for w in p.pending] == ["a/big"]


def test_running_gang_below_its_minimum_completes_by_preemption() -> None:  # kai-17
    docs = [
        proj("a", gpus=2),
        job("r0", "a"),
        job("r1", "a"),
        job("gang", "a", replicas=2, priority=100, type="interactive"),
    ]
    state, snap = world(
        {"n1": 3}, docs, running=[("a/gang", ["n1"]), ("a/r0", ["n1"]), ("a/r1", ["n1"])]
    )
    p = plan(state, snap, now=NOW)
    assert ops(p) == {"a/r1": (Op.PREEMPT, []), "a/gang": (Op.RESIZE, ["n1", "n1"])}


# ---------------------------------------------------------------------------- minRuntime


def test_min_runtime_protects_a_young_victim() -> None:
    docs = [
        proj("a", gpus=1, minRuntime="30m"),
        proj("b", gpus=1),
        job("old", "a"),
        job("young", "a"),
        job("x", "b"),
    ]
    running = [("a/old", ["n1"]), ("a/young", ["n1"])]
    state, snap = world({"n1": 2}, docs, running=running, waiting=["b/x"], started={"a/young": 10})
    assert ops(plan(state, snap, now=NOW)) == {
        "a/old": (Op.PREEMPT, []),
        "b/x": (Op.SUBMIT, ["n1"]),
    }
    state, snap = world(
        {"n1": 2}, docs, running=running, waiting=["b/x"], started={"a/young": 10, "a/old": 20}
    )
    assert plan(state, snap, now=NOW).empty  # both protected: nobody may be reclaimed


def test_min_runtime_lets_a_young_elastic_job_shrink_to_its_minimum_only() -> None:
    docs = [
        proj("a", gpus=1, minRuntime="1h"),
        proj("b", gpus=3),
        job("el", "a", replicas=3, minReplicas=1),
    ]
    running = [("a/el", ["n1", "n1", "n1"])]
    state, snap = world(
        {"n1": 3},
        [*docs, job("x", "b", gpus=2)],
        running=running,
        waiting=["b/x"],
        started={"a/el": 5},
    )
    assert ops(plan(state, snap, now=NOW)) == {
        "a/el": (Op.RESIZE, ["n1"]),
        "b/x": (Op.SUBMIT, ["n1"]),
    }
    state, snap = world(
        {"n1": 3},
        [*docs, job("y", "b", gpus=3)],
        running=running,
        waiting=["b/y"],
        started={"a/el": 5},
    )
    assert plan(state, snap, now=NOW).empty  # would take it below its minimum


def test_a_lowered_limit_may_shrink_a_young_elastic_job_to_its_minimum() -> None:
    # found by test_every_eviction_in_a_plan_is_needed: the limit left the young elastic
    # job alone and cut an older, higher-priority one, which the next round grew back on
    # another node by preempting the young one after all (a move nobody needed). A young
    # elastic job loses replicas above its minimum to a limit as it does to reclaim and
    # preempt; its core gang stays shielded.
    docs = [
        proj("p0"),
        proj("p2", limit=7, minRuntime="30m"),
        job("w0", "p2", gpus=2, replicas=3, minReplicas=1),
        job("w1", "p0", priority=40),
        job("w2", "p2", replicas=2, minReplicas=1, priority=40),
    ]
    running = [("p2/w0", ["n0", "n1", "n2"]), ("p0/w1", ["n2"]), ("p2/w2", ["n2", "n2"])]
    state, snap = world(
        {"n0": 2, "n1": 2, "n2": 8, "n3": 2},
        docs,
        running=running,
        started={"p2/w0": 300, "p0/w1": 5, "p2/w2": 5},
    )
    assert ops(plan(state, snap, now=NOW)) == {"p2/w2": (Op.RESIZE, ["n2"])}
    young_gang = [proj("p2", limit=1, minRuntime="30m"), job("w2", "p2", replicas=2, minReplicas=2)]
    state, snap = world(
        {"n2": 8}, young_gang, running=[("p2/w2", ["n2", "n2"])], started={"p2/w2": 5}
    )
    assert plan(state, snap, now=NOW).empty  # a young gang's core stays until minRuntime


# ------------------------------------------------------------------------ consolidation


def test_consolidation_moves_a_job_so_a_whole_node_frees_up() -> None:  # kai-37
    docs = [proj("a", gpus=1, weight=0), job("j0", "a"), job("j1", "a"), job("x", "a", gpus=2)]
    state, snap = world(
        {"n1": 2, "n2": 2}, docs, waiting=["a/x"], running=[("a/j0", ["n1"]), ("a/j1", ["n2"])]
    )
    p = plan(state, snap, now=NOW)
    assert ops(p) == {"a/j1": (Op.MOVE, ["n1"]), "a/x": (Op.SUBMIT, ["n2"])}
    assert p.actions[1].reason.code == ReasonCode.CONSOLIDATE


def test_consolidation_only_when_every_moved_job_lands_again() -> None:
    # 1 + 1 GPUs are free, but moving either 2-GPU job would leave it nowhere to go
    docs = [
        proj("a", gpus=1, weight=0),
        job("j0", "a", gpus=2),
        job("j1", "a", gpus=2),
        job("x", "a", gpus=2),
    ]
    state, snap = world(
        {"n1": 3, "n2": 3}, docs, waiting=["a/x"], running=[("a/j0", ["n1"]), ("a/j1", ["n2"])]
    )
    assert plan(state, snap, now=NOW).empty


def test_consolidation_never_moves_non_preemptible_work() -> None:
    docs = [
        proj("a", gpus=2, weight=0),
        job("j0", "a"),
        job("j1", "a", priority=100, type="interactive"),
        job("x", "a", gpus=2),
    ]
    state, snap = world(
        {"n1": 2, "n2": 2}, docs, waiting=["a/x"], running=[("a/j0", ["n1"]), ("a/j1", ["n2"])]
    )
    p = plan(state, snap, now=NOW)
    assert ops(p) == {"a/j0": (Op.MOVE, ["n2"]), "a/x": (Op.SUBMIT, ["n1"])}


# ------------------------------------------------------------------------- simulation


def test_a_victim_whose_queue_comes_first_takes_its_gpus_back() -> None:
    # a ranks above b, so after the eviction a's job is allocated again before b's:
    # the simulation fails, and the trial leaves the session exactly as it found it
    docs = [proj("a", gpus=1, rank=110), proj("b", gpus=1), job("j", "a"), job("x", "b")]
    state, snap = world({"n1": 1}, docs, running=[("a/j", ["n1"])], waiting=["b/x"])
    session = Session.open(build_problem(state, snap, NOW))

    def state_of(s: Session) -> tuple[object, ...]:
        return (
            {q: g for q, g in s.alloc.items() if g},
            {k: v for k, v in s.tasks.items() if v},
            dict(s.index.free),
            dict(s.pool),
        )

    before = state_of(session)
    x = session.problem.jobs["b/x"]
    assert _simulate(session, x, 1, [Chunk("a/j", ("kai/n1",))]) is None
    assert state_of(session) == before


# ------------------------------------------------------- KAI scenarios, pure core only

SCENARIOS = {sc["id"]: sc for sc in load_scenarios()}


@pytest.mark.parametrize("scenario_id", sorted(SCENARIOS))
def test_kai_scenario_core(scenario_id: str) -> None:
    """Plan, apply to the simulated snapshot, repeat to a fixed point, then five more rounds
    change nothing. No scenario here is one where this project differs from KAI."""
    sc = SCENARIOS[scenario_id]
    state = desired(spec_documents(sc))
    snap = Snapshot.model_validate(snapshot(sc))
    snap, plans = settle(state, snap)
    settled = _placement(snap)
    for _ in range(5):
        p = plan(state, snap, now=snap.now)
        assert p.empty, f"a later cycle changed a settled state: {p.actions}"
    got = final_placement(snap.model_dump(mode="json"))
    expected = sc["expected"]
    assert set(got) == set(expected["running"]), plans
    for name, nodes in expected["running"].items():
        assert len(got[name]) == len(nodes)
        if None not in nodes:
            assert got[name] == sorted(nodes), f"{name} on {got[name]}, KAI: {nodes}"
    for name in expected["evicted"] + expected["pending"]:
        assert name not in got
    waiting = {w.workload.split("/", 1)[1] for w in plans[-1].pending}
    assert set(expected["pending"]) | set(expected["evicted"]) <= waiting
    assert _placement(snap) == settled
    if "nothing-happens" in sc["tags"]:
        assert not [a for p in plans for a in p.actions if a.op.evicts]


# --------------------------------------------------------------------- property tests


@st.composite
def scenes(draw: st.DrawFn) -> tuple[DesiredState, Snapshot]:
    """Random departments, projects, running work (placed within node capacity) and
    waiting work of every kind."""
    nodes = {f"n{i}": draw(st.sampled_from([2, 4, 8])) for i in range(draw(st.integers(1, 4)))}
    docs: list[dict[str, Any]] = []
    depts = [f"d{i}" for i in range(draw(st.integers(0, 2)))]
    for d in depts:
        g = draw(st.integers(0, 8))
        docs.append(
            department(
                d,
                gpus=g,
                weight=draw(st.integers(0, 2)),
                limit=draw(st.one_of(st.none(), st.integers(g, g + 8))),
            )
        )
    projects = [f"p{i}" for i in range(draw(st.integers(1, 3)))]
    for p in projects:
        extra = {"minRuntime": "30m"} if draw(st.booleans()) else {}
        g = draw(st.integers(0, 6))
        docs.append(
            proj(
                p,
                gpus=g,
                weight=draw(st.integers(0, 2)),
                limit=draw(st.one_of(st.none(), st.integers(g, g + 8))),
                department=draw(st.sampled_from([None, *depts])),
                rank=draw(st.sampled_from([100, 100, 110])),
                **extra,
            )
        )
    free = dict(nodes)
    running: list[tuple[str, list[str]]] = []
    waiting: list[str] = []
    started: dict[str, int] = {}
    for i in range(draw(st.integers(1, 12))):
        gpus = draw(st.sampled_from([1, 1, 2, 4]))
        replicas = draw(st.integers(1, 3))
        kind = draw(st.sampled_from(["training", "training", "interactive", "inference"]))
        p = draw(st.sampled_from(projects))
        docs.append(
            job(
                f"w{i}",
                p,
                gpus=gpus,
                replicas=replicas,
                type=kind,
                minReplicas=draw(st.integers(1, replicas)),
                priority=draw(st.sampled_from([40, 50, 50, 100, 125])),
                preemptible=draw(st.sampled_from([None, True, False])),
            )
        )
        if kind != "training" or docs[-1]["spec"]["preemptible"] is None:
            docs[-1]["spec"].pop("preemptible")
        on = []
        if draw(st.sampled_from([True, True, False])):  # crowded clusters: disruptions happen
            for _ in range(replicas):
                fits = sorted(n for n, f in free.items() if f >= gpus)
                if not fits:
                    break
                n = draw(st.sampled_from(fits))
                free[n] -= gpus
                on.append(n)
        if on:
            running.append((f"{p}/w{i}", on))
            started[f"{p}/w{i}"] = draw(st.sampled_from([5, 300]))
        else:
            waiting.append(f"{p}/w{i}")
    return world(nodes, docs, running=running, waiting=waiting, started=started)


# the profile's examples (tests/conftest.py); CP_HYPOTHESIS_PROFILE=thorough for a longer hunt
SETTINGS = settings()


@SETTINGS
@given(scenes())
def test_no_non_preemptible_work_is_ever_disturbed(scene: tuple[DesiredState, Snapshot]) -> None:
    state, snap = scene
    p = plan(state, snap, now=NOW)
    before = _placement(snap)
    for a in p.actions:
        if a.op in (Op.PREEMPT, Op.MOVE) or (
            a.op == Op.RESIZE and len(a.replicas or []) < len(before[a.workload])
        ):
            assert state.workloads[a.workload].spec.is_preemptible, a


class _Recording(Reclaim):
    """Reclaim that notes, per victim project side, what it held and what it lost."""

    seen: ClassVar[list[tuple[float, float, float, float]]] = []

    def _commit(self, job, count, trial):  # type: ignore[no-untyped-def]
        taken: dict[str, list[float]] = {}
        for key in trial.removed:
            lost = trial.evicted_count(key)
            if lost > 0:
                victim = self.s.problem.jobs[key]
                side = self.sides(job.queue, victim.queue)[1]
                taken.setdefault(side.id, []).append(lost * victim.gpus)
        for side_id, gpus in taken.items():
            side = self.s.problem.queues[side_id]
            self.seen.append((self.base_alloc[side_id], sum(gpus), max(gpus), side.deserved))
        super()._commit(job, count, trial)


@SETTINGS
@given(scenes())
def test_nobody_is_reclaimed_below_deserved(scene: tuple[DesiredState, Snapshot]) -> None:
    """A victim side gives GPUs only while it holds more than its deserved quota: before
    its last victim goes it still held more than deserved, so a reclaim can take it below
    deserved by at most that one victim (a job is not split)."""
    state, snap = scene
    session = Session.open(build_problem(state, snap, NOW))
    allocate(session)
    _Recording.seen = []
    _Recording(session, Ledger()).run()
    for held, taken, last, deserved in _Recording.seen:
        assert held - taken + last > deserved


def over_a_limit(state: DesiredState, placement: dict[str, list[str]]) -> bool:
    held: Counter[str] = Counter()
    for w, nodes in placement.items():
        spec = state.workloads[w].spec
        held[f"project:{spec.project}"] += spec.gpus * len(nodes)
        dept = state.projects[spec.project].spec.department
        while dept:
            held[f"department:{dept}"] += spec.gpus * len(nodes)
            dept = state.departments[dept].spec.parent
    limits = {f"project:{n}": total_quota(p.spec.quota).limit for n, p in state.projects.items()}
    limits |= {
        f"department:{n}": total_quota(d.spec.quota).limit for n, d in state.departments.items()
    }
    return any(g > limit for q, g in held.items() if (limit := limits[q]) is not None)


def test_two_elastic_jobs_moved_onto_each_other_s_nodes_can_be_carried_out() -> None:
    """Found by the property test below: to fit a higher-priority gang, consolidation
    moved two elastic jobs, each down to one replica, each onto a node the other left.
    Neither move could go first (each needs the other's node free), so the simulator
    refused the plan. Each is kept on a node it ran on instead: two shrinks, same room."""
    state, snap = world(
        {"n0": 4, "n1": 2, "n2": 2},
        [
            proj("p0", min_runtime="30m"),
            job("w0", "p0", replicas=2, minReplicas=1, priority=40),
            job("w3", "p0", priority=40),
            job("w4", "p0", gpus=2, priority=40),
            job("w5", "p0", priority=40),
            job("w6", "p0", replicas=2, minReplicas=1, priority=40),
            job("w8", "p0", gpus=2, priority=50),
        ],
        running=[
            ("p0/w0", ["n0", "n2"]),
            ("p0/w6", ["n0", "n1"]),
            ("p0/w3", ["n2"]),
            ("p0/w4", ["n0"]),
            ("p0/w5", ["n1"]),
        ],
        waiting=["p0/w8"],
        started={"p0/w0": 300, "p0/w6": 300, "p0/w3": 5, "p0/w4": 5, "p0/w5": 5},
    )
    p = plan(state, snap, now=NOW)
    assert ops(p)["p0/w8"] == (Op.SUBMIT, ["n0"])
    after = apply(snap, p)  # the simulator refused it: a node over capacity
    assert _placement(after)["p0/w8"] == ["n0"]
    assert all(a.op != Op.MOVE for a in p.actions), [(a.op, a.workload) for a in p.actions]


@SETTINGS
@given(scenes())
def test_every_eviction_in_a_plan_is_needed(scene: tuple[DesiredState, Snapshot]) -> None:
    """Undo any one preempt, move or shrink of a plan, keeping the rest: some node the
    plan fills would then be over capacity (or a project or department over its limit)."""
    state, snap = scene
    p = plan(state, snap, now=NOW)
    after = apply(snap, p)
    final = _placement(after)
    before = _placement(snap)
    capacity = {n.name: n.gpus for c in snap.clusters for n in c.nodes}
    for a in p.actions:
        if a.op not in (Op.PREEMPT, Op.MOVE, Op.RESIZE) or Counter(
            final.get(a.workload, [])
        ) >= Counter(before[a.workload]):
            continue
        undone = dict(final)
        undone[a.workload] = before[a.workload]
        gpus = {w: state.workloads[w].spec.gpus for w in undone}
        used: Counter[str] = Counter()
        for w, ns in undone.items():
            for n in ns:
                used[n] += gpus[w]
        assert any(used[n] > capacity[n] for n in used) or over_a_limit(state, undone), (
            f"{a.op} {a.workload} was not needed"
        )


@SETTINGS
@given(scenes())
def test_plans_are_identical_across_runs(scene: tuple[DesiredState, Snapshot]) -> None:
    state, snap = scene
    first, second = plan(state, snap, now=NOW), plan(state, snap, now=NOW)
    assert first.actions == second.actions and first.id == second.id
    assert first.pending == second.pending


@SETTINGS
@given(scenes())
def test_the_indexed_search_plans_as_the_exhaustive_one(
    scene: tuple[DesiredState, Snapshot],
) -> None:
    """The indexes, the turn order from runs and the skipped hopeless searches change how
    much work a plan takes, not what it says."""
    state, snap = scene
    fast = plan(state, snap, now=NOW)
    slow = plan(state, snap, now=NOW, policy=Policy(search="exhaustive"))
    assert fast.actions == slow.actions
    assert fast.pending == slow.pending


def test_work_on_a_drained_node_is_no_victim() -> None:
    docs = [proj("a", gpus=0), proj("b", gpus=1), job("j", "a"), job("x", "b")]
    state, snap = world({"n1": 1, "n2": 1}, docs, running=[("a/j", ["n1"])], waiting=["b/x"])
    snap.clusters[0].nodes[0].state = "drain"
    snap.clusters[0].nodes[1].state = "down"
    assert plan(state, snap, now=NOW).empty


# ------------------------------------------------------------------ found by the properties


def _p0(**spec: Any) -> list[dict[str, Any]]:
    """Project p0 (no deserved quota, no over-quota weight) and its workloads w0..wN."""
    docs: list[dict[str, Any]] = [project("p0", gpus=0, weight=0, **spec)]
    return docs


def test_an_elastic_job_that_grows_takes_its_turn_again_in_the_same_step() -> None:
    """w3 (2 replicas, at least 1) outranks the others. Preemption gives it a replica,
    and it asks again in the same step, as KAI's next cycle would (the plan took a round
    per replica before, with moves that had to wait for each other: that rule is now
    tested on its own in tests/controlplane/test_sequence.py). The plan runs step by
    step: the shrinks, then the move that needs their room."""
    docs = [
        *_p0(),
        workload("w0", "p0", gpus=2, priority=40),
        workload("w1", "p0", gpus=2, priority=40, replicas=3, minReplicas=1),
        workload("w2", "p0", gpus=4, priority=40, replicas=2, minReplicas=1),
        workload("w3", "p0", gpus=4, priority=50, replicas=2, minReplicas=1),
        workload("w4", "p0", gpus=1, priority=40),
        workload("w5", "p0", gpus=1, priority=40),
    ]
    recent = {k: 5 for k in ("p0/w1", "p0/w2", "p0/w4", "p0/w5")}
    state, snap = world(
        {"n0": 4, "n1": 8, "n2": 8},
        docs,
        running=[
            ("p0/w1", ["n1", "n2", "n0"]),
            ("p0/w2", ["n1", "n2"]),
            ("p0/w4", ["n0"]),
            ("p0/w5", ["n1"]),
        ],
        waiting=["p0/w0", "p0/w3"],
        started=recent,
    )
    p = plan(state, snap, now=NOW)
    assert ops(p)["p0/w3"] == (Op.SUBMIT, ["n0", "n2"])
    order = [(a.op, a.workload) for a in p.execution_order()]
    assert order.index((Op.RESIZE, "p0/w1")) < order.index((Op.MOVE, "p0/w4"))
    assert p.solver.cut_short == []
    apply(snap, p)  # every step fits when it runs


def test_a_job_moved_for_a_gang_goes_home_when_a_later_step_frees_its_place() -> None:
    """Consolidation moves w1 so that w3 fits beside w2; preemption then evicts w2 for w0,
    which frees w1's old place: w1 stays where it was, and w3's reason no longer names it."""
    docs = [
        department("d0", gpus=0, weight=0),
        *_p0(minRuntime="30m"),
        workload("w0", "p0", gpus=2, priority=50, replicas=2, minReplicas=2),
        workload("w1", "p0", gpus=2, priority=50, replicas=3, minReplicas=1),
        workload("w2", "p0", gpus=4, priority=40, replicas=2, minReplicas=2),
        workload("w3", "p0", gpus=4, priority=100),
        workload("w4", "p0", gpus=1, priority=40),
        workload("w5", "p0", gpus=1, priority=40),
        workload("w6", "p0", gpus=2, priority=40),
    ]
    state, snap = world(
        {"n0": 2, "n1": 4, "n2": 8, "n3": 8},
        docs,
        running=[
            ("p0/w1", ["n1", "n3", "n2"]),
            ("p0/w2", ["n2", "n3"]),
            ("p0/w4", ["n2"]),
            ("p0/w5", ["n0"]),
            ("p0/w6", ["n1"]),
        ],
        waiting=["p0/w0", "p0/w3"],
        started={"p0/w1": 5, "p0/w2": 300, "p0/w4": 5, "p0/w5": 5, "p0/w6": 5},
    )
    p = plan(state, snap, now=NOW)
    assert ops(p) == {
        "p0/w2": (Op.PREEMPT, []),
        "p0/w0": (Op.SUBMIT, ["n2", "n2"]),
        "p0/w3": (Op.SUBMIT, ["n3"]),
    }
    w3 = next(a for a in p.actions if a.workload == "p0/w3")
    assert "p0/w1" not in w3.reason.message and "p0/w4" not in w3.reason.message
    apply(snap, p)


def test_a_job_shrunk_in_a_later_round_gives_its_replicas_back_before_the_moves() -> None:
    """Round 1 moves w1 and w2 (consolidation), round 2 shrinks w1 (preemption): the net
    resize of w1 is a shrink, says why (priority), and runs before the move that needs
    its GPUs on n2."""
    docs = [
        department("d0", gpus=0, weight=0),
        *_p0(minRuntime="30m"),
        workload("w0", "p0", gpus=2, priority=40, replicas=2, minReplicas=2),
        workload("w1", "p0", gpus=2, priority=50, replicas=3, minReplicas=1),
        workload("w2", "p0", gpus=4, priority=40, replicas=2, minReplicas=2),
        workload("w3", "p0", gpus=4, priority=100, replicas=2, minReplicas=1),
        workload("w4", "p0", gpus=1, priority=40),
        workload("w5", "p0", gpus=1, priority=40),
        workload("w6", "p0", gpus=2, priority=40),
    ]
    state, snap = world(
        {"n0": 2, "n1": 4, "n2": 8, "n3": 8},
        docs,
        running=[
            ("p0/w1", ["n1", "n3", "n2"]),
            ("p0/w2", ["n2", "n3"]),
            ("p0/w4", ["n2"]),
            ("p0/w5", ["n0"]),
            ("p0/w6", ["n1"]),
        ],
        waiting=["p0/w0", "p0/w3"],
        started={k: 5 for k in ("p0/w1", "p0/w2", "p0/w4", "p0/w5", "p0/w6")},
    )
    p = plan(state, snap, now=NOW)
    order = [(a.op, a.workload) for a in p.execution_order()]
    assert order.index((Op.RESIZE, "p0/w1")) < order.index((Op.MOVE, "p0/w2"))
    w1 = next(a for a in p.actions if a.workload == "p0/w1")
    assert w1.reason.code == ReasonCode.PRIORITY
    apply(snap, p)
