"""Plans are fixed points: cycles run on a virtual copy until nothing changes, shown net."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

import controlplane.converge as converge_module
import controlplane.reconcile as reconcile_module
from adapters.simulator import SimulatedCluster, nodes_from_spec
from benchmarks.busy import busy_org
from controlplane.converge import Round, net_actions
from controlplane.plan import Plan, SolverReport
from controlplane.reconcile import plan
from solvers.policy import Deadline
from specs.actions import Action, Op, Reason, ReasonCode
from specs.snapshot import ClusterState, Job, JobState, Node, QueueEntry, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload


def _plan(*actions: Action) -> list[Action]:
    """One round's actions."""
    return list(actions)


def _world(*jobs: Job) -> Snapshot:
    nodes = [Node(name=f"n{i}", pool="p", gpus=8) for i in (1, 2)]
    return Snapshot(now=NOW, clusters=[ClusterState(name="c", nodes=nodes, jobs=list(jobs))])


RECLAIM = Reason(code=ReasonCode.RECLAIM, message="q is below its fair share")
START = Reason(code=ReasonCode.OVER_QUOTA, message="idle GPUs")


def test_evicted_then_placed_again_is_one_move_with_the_eviction_reason() -> None:
    running = Job(id="7", workload="p/w", replicas=[Replica(node="n1", gpus=4)], pool="p")
    observed = _world(running)
    final = _world(
        Job(id="virtual-1", workload="p/w", replicas=[Replica(node="n2", gpus=4)], pool="p")
    )
    rounds = [
        _plan(Action(op=Op.PREEMPT, workload="p/w", cluster="c", job="7", reason=RECLAIM)),
        _plan(
            Action(
                op=Op.SUBMIT,
                workload="p/w",
                cluster="c",
                pool="p",
                reason=START,
                replicas=[Replica(node="n2", gpus=4)],
            )
        ),
    ]
    [move] = net_actions(observed, final, rounds)
    assert (move.op, move.job, move.reason) == (Op.MOVE, "7", RECLAIM)
    assert [r.node for r in move.replicas or []] == ["n2"]


def test_started_then_taken_back_never_appears() -> None:
    observed = _world()
    final = _world()
    rounds = [
        _plan(
            Action(
                op=Op.SUBMIT,
                workload="p/w",
                cluster="c",
                pool="p",
                reason=START,
                replicas=[Replica(node="n1", gpus=4)],
            )
        ),
        _plan(
            Action(op=Op.PREEMPT, workload="p/w", cluster="c", job="virtual-1000", reason=RECLAIM)
        ),
    ]
    assert net_actions(observed, final, rounds) == []


def test_a_running_job_left_alone_is_not_touched() -> None:
    same = Job(
        id="7", workload="p/w", state=JobState.RUNNING, replicas=[Replica(node="n1", gpus=4)]
    )
    assert net_actions(_world(same), _world(same), [_plan()]) == []


def test_next_cycle_consolidation_is_folded_into_the_first_plan() -> None:
    # found by the property test: after one cycle, the next one moved a 1-GPU job so an
    # elastic job could grow; the plan now says all of it at once
    pools = [
        {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 4},
        {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 3},
    ]
    d = desired(
        [
            cluster(pools=pools),
            project("p0", gpus=0, weight=0, rank=90),
            project("p1", gpus=0, weight=1, limit=12, rank=90),
            project("p2", gpus=0, weight=1, rank=100),
            project("p3", gpus=9, weight=0, rank=90),
            workload("w0", "p0", gpus=1),
            workload("w1", "p0", gpus=1),
            workload("w2", "p0", gpus=1),
            workload("w3", "p3", gpus=1),
            workload("w4", "p3", gpus=4, replicas=2, minReplicas=1),
            workload("w5", "p2", gpus=4, replicas=3, minReplicas=1),
            workload("w6", "p0", gpus=2),
            workload("w7", "p1", gpus=1, replicas=2, minReplicas=1),
            workload("w8", "p1", gpus=4, replicas=3, minReplicas=3),
            workload("w9", "p2", gpus=4, replicas=3, minReplicas=1),
        ]
    )
    state = ClusterState(name="sim", nodes=nodes_from_spec(d.clusters["sim"]))
    snap = Snapshot(now=NOW, clusters=[state])
    first = plan(d, snap, now=NOW)
    sim = SimulatedCluster(state)
    for a in first.execution_order():
        sim.execute(a, plan_id=first.id, now=NOW)
    assert plan(d, snap, now=NOW).actions == []


def test_the_virtual_world_is_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds after the first run on a copy of the observed state: planning leaves the
    snapshot it was given as it was."""
    d = desired(
        [
            cluster(),
            project("p", gpus=8),
            workload("a", "p", gpus=1),
            workload("b", "p", gpus=2, replicas=3, minReplicas=1),
        ]
    )
    snap = Snapshot(
        now=NOW, clusters=[ClusterState(name="sim", nodes=nodes_from_spec(d.clusters["sim"]))]
    )
    before = snap.model_dump_json()
    rounds = 0
    apply = converge_module._apply

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal rounds
        rounds += 1
        return apply(*args, **kwargs)

    monkeypatch.setattr(converge_module, "_apply", counted)
    assert plan(d, snap, now=NOW).actions
    assert rounds >= 1  # a virtual world was made and changed
    assert snap.model_dump_json() == before


def test_shrunk_in_one_round_and_evicted_in_the_next_is_a_preempt() -> None:
    # found by the property test: round 1 shrank an elastic job, round 2 evicted it; the
    # net plan showed only the shrink, and the submit that needed its GPUs did not fit
    observed = _world(
        Job(
            id="7",
            workload="p/w",
            replicas=[Replica(node="n1", gpus=4), Replica(node="n2", gpus=4)],
            pool="p",
        )
    )
    final = _world(
        Job(id="virtual-1", workload="p/x", replicas=[Replica(node="n1", gpus=8)], pool="p")
    )
    shrink = Action(
        op=Op.RESIZE,
        workload="p/w",
        cluster="c",
        job="7",
        reason=RECLAIM,
        replicas=[Replica(node="n1", gpus=4)],
    )
    evict = Action(
        op=Op.PREEMPT,
        workload="p/w",
        cluster="c",
        job="7",
        reason=Reason(code=ReasonCode.PRIORITY, message="x needs it"),
    )
    start = Action(
        op=Op.SUBMIT,
        workload="p/x",
        cluster="c",
        pool="p",
        reason=START,
        replicas=[Replica(node="n1", gpus=8)],
    )
    net = net_actions(observed, final, [_plan(shrink), _plan(evict, start)])
    assert [(a.op, a.workload, a.reason.code) for a in net] == [
        (Op.SUBMIT, "p/x", ReasonCode.OVER_QUOTA),
        (Op.PREEMPT, "p/w", ReasonCode.PRIORITY),
    ]


def test_no_round_works_out_its_whole_plan_until_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # what waits, the quota table and the plan id cost a busy org's rounds a good part of
    # their time; the plan shows one round's (the last, or the first when it is the only
    # one), and takes only the solver report and the GPUs held from the first
    ran: list[int] = []
    finished: list[int] = []

    def cycle(world: Snapshot) -> Round:
        n = len(ran) + 1
        ran.append(n)
        actions = (
            [] if n == 4 else [Action(op=Op.SUBMIT, workload=f"p/w{n}", cluster="c", reason=START)]
        )

        def finish() -> Plan:
            finished.append(n)
            return Plan(
                id=f"r{n}",
                created_at=NOW,
                spec_digest="",
                observed_digest="",
                actions=actions,
                solver=SolverReport(engine="t", status="t"),
            )

        return Round(actions, finish, SolverReport(engine="t", status=f"r{n}"), lambda: ({}, {}))

    monkeypatch.setattr(converge_module, "_apply", lambda *args: None)  # no virtual world here
    done = converge_module.converge(cycle, _world(), NOW)
    assert (ran, finished, done.rounds) == ([1, 2, 3, 4], [], 4)
    assert (done.first.report.status, done.last.finish().id, finished) == ("r1", "r4", [4])


def test_a_replica_regrown_in_a_later_round_goes_back_where_it_was() -> None:
    """p1 is one GPU over its new limit 3. Round 1 takes back w0's replica above its
    minimum; round 2 grows w0 again by preempting the lower-priority w1. The net plan
    should evict w1 and leave w0 where it runs (n0 has the room), not move a replica of
    w0 to n1."""
    d = desired(
        [
            cluster(
                "kai", pools=[{"name": "gpu", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 0}]
            ),
            project("p1", gpus=0, limit=3),
            workload("w0", "p1", gpus=1, replicas=3, minReplicas=1, priority=50),
            workload("w1", "p1", gpus=1, priority=40),
        ]
    )
    snap = Snapshot(
        now=NOW,
        clusters=[
            ClusterState(
                name="kai",
                nodes=[
                    Node(name="n0", pool="gpu", gpu_type="a100_80", gpus=8, state="idle"),
                    Node(name="n1", pool="gpu", gpu_type="a100_80", gpus=2, state="idle"),
                ],
                jobs=[
                    Job(
                        id="j0",
                        workload="p1/w0",
                        started_at=NOW,
                        pool="gpu",
                        replicas=[Replica(node="n0", gpus=1)] * 3,
                    ),
                    Job(
                        id="j1",
                        workload="p1/w1",
                        started_at=NOW,
                        pool="gpu",
                        replicas=[Replica(node="n0", gpus=1)],
                    ),
                ],
            )
        ],
    )
    made = plan(d, snap, now=NOW)
    assert {(a.op, a.workload) for a in made.actions} == {(Op.PREEMPT, "p1/w1")}


@pytest.mark.parametrize(
    ("home_state", "others_on_home", "home_pool", "placed"),
    [
        ("idle", 0, "p", ["n1", "n1"]),  # room at home: back there
        ("drain", 0, "p", ["n1", "n2"]),  # home drained: stays where it grew
        ("idle", 7, "p", ["n1", "n2"]),  # home full: stays where it grew
        ("idle", 0, "q", ["n1", "n2"]),  # home now in another pool than the job's
    ],
)
def test_a_regrown_replica_goes_home_only_where_home_can_take_it(
    home_state: str, others_on_home: int, home_pool: str, placed: list[str]
) -> None:
    def job(*nodes: str) -> Job:
        return Job(
            id="7", workload="p/w", pool="p", replicas=[Replica(node=n, gpus=1) for n in nodes]
        )

    observed = _world(job("n1", "n1"))
    world = _world(job("n1", "n2"))
    world.clusters[0].nodes[0].state = home_state
    world.clusters[0].nodes[0].pool = home_pool
    if others_on_home:
        other = Replica(node="n1", gpus=others_on_home)
        world.clusters[0].jobs.append(Job(id="8", workload="p/x", pool="p", replicas=[other]))
    grow = Action(
        op=Op.RESIZE,
        workload="p/w",
        cluster="c",
        job="7",
        replicas=world.clusters[0].jobs[0].replicas,
        reason=START,
    )
    converge_module._regrow_at_home(world, observed, [grow])
    assert [r.node for r in world.clusters[0].jobs[0].replicas] == placed


def test_a_step_the_virtual_world_refuses_is_said_in_the_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A round whose actions do not fit the clusters is a defect of the plan; it had been
    kept silently (the two-cluster property found such a plan): the plan now says so."""

    def cycle(world: Snapshot) -> Round:
        actions = [Action(op=Op.SUBMIT, workload="p/w", cluster="c", reason=START)]
        plan = Plan(
            id="r",
            created_at=NOW,
            spec_digest="",
            observed_digest="",
            actions=actions,
            solver=SolverReport(engine="t", status="t"),
        )
        return Round(actions, lambda: plan, plan.solver, lambda: ({}, {}))

    refused = "node n1 has 8 GPUs; this would use 10"
    monkeypatch.setattr(converge_module, "_apply", lambda *args: refused)
    deadline = Deadline()
    converge_module.converge(cycle, _world(), NOW, deadline)
    assert deadline.cut_short == [
        f"converge (round 1): a copy of the clusters refused a step: {refused}"
    ]


def test_a_running_fan_out_candidate_moved_by_a_round_is_a_move() -> None:
    # found by the lifetime property: a round moved the fan-out winner (a running
    # candidate) off a node so that another job fits there; the net plan dropped the move,
    # as for a waiting candidate, and the job moved there waited behind it for ever
    winner = Job(
        id="7",
        workload="p/w",
        replicas=[Replica(node="n1", gpus=4)],
        pool="p",
        candidate="c.p.1x4.direct",
    )
    moved = winner.model_copy(update={"replicas": [Replica(node="n2", gpus=4)]})
    consolidate = Reason(code=ReasonCode.CONSOLIDATE, message="moved so that p/x fits")
    move = Action(
        op=Op.MOVE,
        workload="p/w",
        cluster="c",
        pool="p",
        job="7",
        reason=consolidate,
        replicas=[Replica(node="n2", gpus=4)],
    )
    [net] = net_actions(_world(winner), _world(moved), [_plan(move)])
    assert (net.op, net.job, net.reason) == (Op.MOVE, "7", consolidate)
    assert [r.node for r in net.replicas or []] == ["n2"]


def _submit_each_round(ran: list[int]) -> Callable[[Snapshot], Round]:
    """A cycle that never reaches a fixed point: round n starts p/w<n> on n1."""

    def cycle(world: Snapshot) -> Round:
        ran.append(len(ran) + 1)
        start = Action(
            op=Op.SUBMIT,
            workload=f"p/w{len(ran)}",
            cluster="c",
            pool="p",
            reason=START,
            replicas=[Replica(node="n1", gpus=1)],
        )
        plan = Plan(
            id=f"r{len(ran)}",
            created_at=NOW,
            spec_digest="",
            observed_digest="",
            actions=[start],
            solver=SolverReport(engine="t", status="t"),
        )
        return Round([start], lambda: plan, plan.solver, lambda: ({}, {}))

    return cycle


def test_the_last_round_counts_when_the_round_limit_is_reached() -> None:
    """A plan cut by the round limit dropped its last round's actions from the net plan,
    while its waiting work and quotas were the last round's: applied, the plan left that
    round's work to the next plan (trial U: a busy first apply of 1,115 starts, then a
    plan preempting 6 of them). What a round decided is carried out like any other
    round's; the plan still says the fixed point was not reached."""
    ran: list[int] = []
    deadline = Deadline()
    done = converge_module.converge(_submit_each_round(ran), _world(), NOW, deadline)
    assert ran == list(range(1, converge_module.MAX_ROUNDS + 1))
    assert sorted(a.workload for a in done.actions) == [f"p/w{n}" for n in ran]
    assert deadline.cut_short == [
        f"converge (round {converge_module.MAX_ROUNDS}): no fixed point after "
        f"{converge_module.MAX_ROUNDS} rounds"
    ]


def test_the_last_round_counts_when_the_time_limit_ends_the_rounds() -> None:
    """The same when time runs out between rounds: the round that ran is in the plan."""
    ran: list[int] = []
    now = [0.0]
    deadline = Deadline(10, clock=lambda: now[0])
    cycle = _submit_each_round(ran)

    def slow(world: Snapshot) -> Round:
        done = cycle(world)
        now[0] += 6  # the second round ends past the limit
        return done

    done = converge_module.converge(slow, _world(), NOW, deadline)
    assert ran == [1, 2]
    assert sorted(a.workload for a in done.actions) == ["p/w1", "p/w2"]
    assert any("time limit ran out" in cut for cut in deadline.cut_short)


def test_a_plan_cut_by_the_round_limit_leaves_nothing_its_rounds_decided(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """End to end on a small busy org (benchmarks/busy.py) that needs three rounds of
    actions: with the limit at two, the plan applied to the simulator and planned again
    finds nothing more to do than the third round would have."""
    org = busy_org(20, 100, projects=12, seed=2)
    d = desired(org.docs)
    state = ClusterState(name="big", nodes=nodes_from_spec(d.clusters["big"]))
    snap = Snapshot(now=NOW, clusters=[state])
    rounds: list[int] = []
    converge = converge_module.converge

    def counted(cycle, observed, now, deadline=None):  # type: ignore[no-untyped-def]
        def one(world: Snapshot) -> Round:
            done = cycle(world)
            rounds.append(len(done.actions))
            return done

        return converge(one, observed, now, deadline)

    monkeypatch.setattr(reconcile_module, "converge", counted)
    unbounded = plan(d, snap, now=NOW)
    assert len(rounds) == 3 and rounds[1] and not rounds[2], rounds  # the premise
    monkeypatch.setattr(converge_module, "MAX_ROUNDS", 2)
    first = plan(d, snap, now=NOW)
    assert first.solver.cut_short == ["converge (round 2): no fixed point after 2 rounds"]
    assert _ops(first) == _ops(unbounded)
    sim = SimulatedCluster(state)
    for a in first.execution_order():
        sim.execute(a, plan_id=first.id, now=NOW)
    assert plan(d, snap, now=NOW).actions == []


def _ops(made: Plan) -> list[tuple[str, str, str | None]]:
    return sorted((a.op.value, a.workload, a.job) for a in made.actions)


def test_work_a_plan_starts_is_younger_than_what_waits_as_after_a_real_apply() -> None:
    """An apply starts a plan's jobs after the plan was made, so they are younger than
    the work still waiting since the plan's observation. The plan's later rounds started
    them at the plan's own moment instead, a tie with that waiting work, which the
    workload's name then broke: after a real apply (trial W, a busy org from an empty
    cluster, jobs started 5 s after the plan) the next plan reclaimed a job just started.
    A virtual round's jobs now start just after the plan's moment."""
    org = busy_org(100, 500, projects=12, seed=8)
    d = desired(org.docs)
    state = ClusterState(name="big", nodes=nodes_from_spec(d.clusters["big"]))
    queue = [QueueEntry(workload=k, since=NOW) for k in sorted(d.workloads)]  # first seen
    first = plan(d, Snapshot(now=NOW, clusters=[state], queue=queue), now=NOW)
    assert not first.solver.cut_short
    applied = NOW + timedelta(seconds=5)
    sim = SimulatedCluster(state)
    for a in first.execution_order():
        sim.execute(a, plan_id=first.id, now=applied)
    started = {j.workload for j in state.jobs if j.state.active}
    waiting = [q for q in queue if q.workload not in started]
    again = plan(d, Snapshot(now=applied, clusters=[state], queue=waiting), now=applied)
    assert again.actions == [], [(a.op.value, a.workload) for a in again.actions]


def test_a_virtual_start_is_after_the_plan_in_order_only() -> None:
    """A round's jobs are younger than what waits (their submit time just after the plan's
    moment: job order reads it first), but they start at the plan's moment: a start 1 us
    ahead made a job under `minRuntime: 0s` look protected (-1 us run < 0), so a later
    round would not grow it where a resize restarts it (review)."""
    world = _world()
    done = _submit_each_round([])(world)  # starts p/w1 on n1
    assert converge_module._apply(world, done, "virtual-round-1", NOW) is None
    [job] = world.clusters[0].jobs
    assert job.started_at == NOW
    assert job.submitted_at is not None and job.submitted_at > NOW
