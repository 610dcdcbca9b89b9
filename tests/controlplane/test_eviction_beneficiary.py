"""An eviction names whom its GPUs go to, and that must stay true of the whole plan. A user
trial found a pull request's plan saying a job was "reclaimed for ads/ctr-train" while the
same plan kept ctr-train waiting: a higher-priority job of its project took the place the
reclaim had made. The reason now says who took it."""

from __future__ import annotations

from controlplane.converge import Round, converge
from controlplane.plan import Plan, SolverReport
from controlplane.reconcile import plan
from specs.actions import Action, Op, Reason, ReasonCode
from specs.snapshot import Replica, Snapshot
from tests.builders import NOW, cluster, desired, pool, project, workload
from tests.builders.snapshots import job, sim_nodes


def _two_nodes(*jobs: dict[str, object]) -> Snapshot:
    nodes = [n for n in sim_nodes() if n["pool"] == "a100"][:2]
    world = {"name": "sim", "nodes": nodes, "jobs": list(jobs)}
    return Snapshot.model_validate({"now": NOW.isoformat(), "clusters": [world]})


def test_a_reclaim_whose_beneficiary_is_then_outranked_names_who_took_its_place() -> None:
    # p is below its deserved 16: reclaim takes q/x for p/b (p/c, 16 GPUs, cannot reclaim
    # them all from q); then preempt gives p/c, which outranks p/b, both nodes
    state = desired(
        [
            cluster(pools=[pool("a100", nodes=2)]),
            project("p", gpus=16, weight=1),
            project("q", gpus=0, weight=1),
            workload("x", "q", gpus=8),
            workload("r", "p", gpus=8, priority=50),
            workload("b", "p", gpus=8, priority=50),
            workload("c", "p", gpus=8, replicas=2, priority=125),
        ]
    )
    world = _two_nodes(job("1", "q/x", ("a100-01", 8)), job("2", "p/r", ("a100-02", 8)))
    made = plan(state, world, now=NOW)

    starts = {a.workload for a in made.actions if a.op is Op.SUBMIT}
    waits = {p.workload: p.reason.message for p in made.pending}
    assert starts == {"p/c"} and "p/b" in waits  # the case this test is about
    [taken] = [a for a in made.actions if a.workload == "q/x"]
    assert taken.op is Op.PREEMPT
    assert taken.reason.message.endswith(
        "reclaimed for p/b; p/c then took p/b's place, and p/b waits"
    ), taken.reason.message
    assert waits["q/x"] == taken.reason.message  # its waiting reason says the same


def _round(n: int, actions: list[Action], gave_to: dict[str, str]) -> Round:
    def finish() -> Plan:
        solver = SolverReport(engine="t", status="t")
        return Plan(
            id=f"r{n}", created_at=NOW, spec_digest="", observed_digest="", actions=actions,
            solver=solver,
        )  # fmt: skip

    report = SolverReport(engine="t", status="t")
    return Round(actions, finish, report, lambda: ({}, {}), gave_to=gave_to)


def test_a_beneficiary_outranked_in_a_later_round_is_said_in_the_net_plan() -> None:
    # round 1 reclaims q/x for p/b and starts p/b; round 2 preempts p/b (a job only the
    # virtual world has) for p/c. Net: q/x is preempted, p/c starts, p/b waits, and the
    # reason kept from round 1 must not leave it at "reclaimed for p/b"
    world = _two_nodes(job("1", "q/x", ("a100-01", 8)))
    on_01 = [Replica(node="a100-01", gpus=8)]
    reclaim = Reason(code=ReasonCode.RECLAIM, message="p is below its deserved; reclaimed for p/b")
    outranked = Reason(code=ReasonCode.PRIORITY, message="p/c (priority 125) outranks it")
    start = Reason(code=ReasonCode.WITHIN_DESERVED, message="p holds 8 of its deserved 16")
    rounds = [
        _round(
            1,
            [
                Action(op=Op.PREEMPT, workload="q/x", cluster="sim", job="1", reason=reclaim),
                Action(op=Op.SUBMIT, workload="p/b", cluster="sim", pool="a100", replicas=on_01, reason=start),
            ],
            {"q/x": "p/b"},
        ),
        _round(
            2,
            [
                Action(op=Op.PREEMPT, workload="p/b", cluster="sim", job="virtual-1000", reason=outranked),
                Action(op=Op.SUBMIT, workload="p/c", cluster="sim", pool="a100", replicas=on_01, reason=start),
            ],
            {"p/b": "p/c"},
        ),
        _round(3, [], {}),
    ]  # fmt: skip
    done = converge(lambda _: rounds.pop(0), world, NOW)

    assert [(a.op, a.workload) for a in done.actions] == [(Op.SUBMIT, "p/c"), (Op.PREEMPT, "q/x")]
    assert done.actions[1].reason.message == (
        "p is below its deserved; reclaimed for p/b; p/c then took p/b's place, and p/b waits"
    )
