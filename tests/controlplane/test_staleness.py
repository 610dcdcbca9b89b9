"""Which changes since a saved plan was made matter to its actions (controlplane/staleness.py):
one cluster of two nodes, our jobs on it, a plan of a few actions, and the clusters observed
again with one thing changed."""

from __future__ import annotations

import pytest

from controlplane import staleness
from controlplane.errors import StalePlanError
from controlplane.plan import Plan, SolverReport
from specs.actions import Action, Op, Reason, ReasonCode
from specs.observation import Observation, observation_of
from specs.snapshot import ClusterState, Job, JobState, Node, PoolState, Replica, Snapshot
from tests.builders import NOW

SHORT = Job(id="7", workload="chem/short", replicas=[Replica(node="n-1", gpus=4)])
LONG = Job(id="8", workload="chem/long", replicas=[Replica(node="n-1", gpus=4)])
QUEUED = Job(id="9", workload="chem/queued", state=JobState.PENDING, replicas=[Replica(gpus=4)])


def seen(
    *jobs: Job,
    drained: bool = False,
    reachable: bool = True,
    pools: list[PoolState] | None = None,
) -> Observation:
    nodes = [
        Node(name="n-1", pool="a", gpus=8),
        Node(name="n-2", pool="a", gpus=8, state="drain" if drained else "idle"),
    ]
    c = ClusterState(name="c", nodes=nodes, jobs=list(jobs), pools=pools or [])
    if not reachable:
        c = ClusterState(name="c", reachable=False, error="no answer")
    return observation_of(Snapshot(now=NOW, clusters=[c]))


THEN = seen(SHORT, LONG, QUEUED)


def act(
    op: Op, workload: str, *, job: str | None = None, node: str | None = None, **kw: object
) -> Action:
    replicas = [Replica(node=node, gpus=4)] if op in (Op.SUBMIT, Op.MOVE, Op.RESIZE) else None
    code = {Op.CANCEL: ReasonCode.PRUNE, Op.PREEMPT: ReasonCode.RECLAIM}.get(
        op, ReasonCode.FAIRSHARE
    )
    return Action(
        op=op,
        workload=workload,
        cluster="c",
        job=job,
        replicas=replicas,
        reason=Reason(code=code, message="why"),
        **kw,  # type: ignore[arg-type]
    )


def plan(*actions: Action, then: Observation = THEN) -> Plan:
    return Plan(
        id="p1",
        created_at=NOW,
        spec_digest="s",
        observed_digest=then.digest,
        actions=list(actions),
        solver=SolverReport(engine="test", status="OK"),
    )


SUBMIT = act(Op.SUBMIT, "chem/new", node="n-2")


def test_a_job_that_ended_elsewhere_does_not_matter_to_a_submit() -> None:
    found = staleness.changes(plan(SUBMIT), THEN, seen(LONG, QUEUED))
    assert found.matter == [] and found.unaffected == ["job 7 (chem/short) ended"]
    assert staleness.check(plan(SUBMIT), THEN, seen(LONG, QUEUED), "again") == found.unaffected


def test_no_change_is_nothing_to_tell() -> None:
    assert staleness.check(plan(SUBMIT), None, THEN, "again") == []


@pytest.mark.parametrize(
    ("action", "said"),
    [
        (
            act(Op.CANCEL, "chem/short", job="7"),
            "job 7 (chem/short), which the plan cancels, ended",
        ),
        (act(Op.PREEMPT, "chem/short", job="7"), "which the plan preempts, ended"),
        (act(Op.MOVE, "chem/short", job="7", node="n-2"), "which the plan moves, ended"),
        # the workload named, not the job: a fan-out candidate, a segment submitted again
        (
            act(Op.SUBMIT, "chem/short", node="n-2"),
            "job 7 of chem/short, a workload the plan submits, ended",
        ),
        # named as its job is tagged (a renamed project)
        (
            act(Op.SUBMIT, "bio/short", node="n-2", tagged_as="chem/short"),
            "a workload the plan submits",
        ),
    ],
)
def test_a_job_an_action_names_that_ended_matters(action: Action, said: str) -> None:
    found = staleness.changes(plan(action), THEN, seen(LONG, QUEUED))
    assert len(found.matter) == 1 and said in found.matter[0]


def test_a_plan_that_evicts_depends_on_every_change() -> None:
    """A preemption was to make room that a job ending may have made already."""
    preempt = act(Op.PREEMPT, "chem/long", job="8")
    found = staleness.changes(plan(preempt, SUBMIT), THEN, seen(LONG, QUEUED))
    assert found.unaffected == []
    assert found.matter == [
        "job 7 (chem/short) ended",
        "the plan evicts running work (preempt chem/long), decided on the clusters as they were",
    ]


def test_a_job_of_ours_that_appeared_or_started_matters() -> None:
    other = Job(id="10", workload="chem/other", replicas=[Replica(node="n-1", gpus=2)])
    found = staleness.changes(plan(SUBMIT), THEN, seen(SHORT, LONG, QUEUED, other))
    assert found.matter == ["job 10 (chem/other) appeared, running on n-1 (2 GPUs)"]
    started = QUEUED.model_copy(
        update={"state": JobState.RUNNING, "replicas": [Replica(node="n-1", gpus=4)]}
    )
    found = staleness.changes(plan(SUBMIT), THEN, seen(SHORT, LONG, started))
    assert found.matter == ["job 9 (chem/queued) is running on n-1 (4 GPUs) now, not queued"]


def test_a_node_matters_where_an_action_places_work() -> None:
    found = staleness.changes(plan(SUBMIT), THEN, seen(SHORT, LONG, QUEUED, drained=True))
    assert found.matter == [
        "node n-2 takes no new work (drained or down), where the plan places chem/new"
    ]
    elsewhere = act(Op.SUBMIT, "chem/new", node="n-1")
    found = staleness.changes(plan(elsewhere), THEN, seen(SHORT, LONG, QUEUED, drained=True))
    assert found.matter == [] and found.unaffected == [
        "node n-2 takes no new work (drained or down)"
    ]


def test_pool_limits_matter_in_a_cluster_the_plan_acts_on() -> None:
    limited = seen(SHORT, LONG, QUEUED, pools=[PoolState(name="a", max_walltime=3600)])
    assert staleness.changes(plan(SUBMIT), THEN, limited).matter == [
        "the limits cluster c sets on its pools changed"
    ]
    found = staleness.changes(plan(), THEN, limited)
    assert found.matter == [] and found.unaffected


def test_a_cluster_that_stopped_answering_matters() -> None:
    found = staleness.changes(plan(), THEN, seen(reachable=False))
    assert found.matter == ["cluster c does not answer now"]


def test_a_refusal_names_what_changed_and_how_to_get_a_fresh_plan() -> None:
    cancel = act(Op.CANCEL, "chem/short", job="7")
    with pytest.raises(StalePlanError) as refused:
        staleness.check(plan(cancel), THEN, seen(LONG, QUEUED), "plan again")
    assert str(refused.value) == (
        "plan p1 was made against another state of the clusters, and what changed since "
        "matters to it: job 7 (chem/short), which the plan cancels, ended; plan again"
    )


def test_without_the_plans_observation_any_change_refuses() -> None:
    """Not kept (a plan made against another store), or not the plan's (its digest)."""
    for then in (None, seen(LONG)):
        with pytest.raises(StalePlanError, match="does not hold the observation"):
            staleness.check(plan(SUBMIT), then, seen(LONG, QUEUED), "plan again")


def test_a_long_list_of_changes_is_cut_short() -> None:
    many = [Job(id=str(i), workload=f"chem/w{i}") for i in range(20, 28)]
    found = staleness.changes(plan(SUBMIT), THEN, seen(SHORT, LONG, QUEUED, *many))
    assert len(found.matter) == 8
    assert found.told().endswith("; and 3 more") and found.told().count("appeared") == 5


def test_where_a_job_runs_counts_its_replicas_per_node() -> None:
    """A job of three 1-GPU replicas on one node read "v100-01 (1 GPUs), v100-01 (1 GPUs),
    v100-01 (1 GPUs)" (user trial)."""
    replicas = [Replica(node="v-1", gpus=1)] * 3 + [Replica(node="v-2", gpus=2)]
    other = Job(id="10", workload="chem/other", replicas=replicas)
    found = staleness.changes(plan(SUBMIT), THEN, seen(SHORT, LONG, QUEUED, other))
    assert found.matter == [
        "job 10 (chem/other) appeared, running on v-1 (3 x 1 GPU), v-2 (2 GPUs)"
    ]
