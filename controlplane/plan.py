"""The plan: an immutable, reviewable list of actions with reasons, plus what waits and why.

Its JSON form (``cp plan --json``) is a contract (DESIGN.md); it records digests of its
inputs so that ``cp apply`` can refuse a plan made against a world that has moved on.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from solvers.leaving import must_leave
from solvers.policy import CPSAT_OWN_LIMIT
from solvers.sitepolicy.refusals import holding, retry_at
from specs.actions import Action, Op, Pending, Reason, ReasonCode
from specs.snapshot import Snapshot


class PlanModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class QueueStatus(PlanModel):
    deserved: float
    fair_share: float
    allocated: float  # after the plan
    limit: float | None = None
    pending: float = 0  # GPUs of workloads that still wait
    department: str | None = None
    held: float = 0  # GPUs its running work holds now, before the plan
    weight: float | None = None  # over-quota weight (None: a plan made before it was kept)
    rank: int | None = None  # queue priority (projects and departments)
    unreachable: float = Field(
        default=0,
        description="of `allocated`: GPUs of work held for clusters that did not answer (it "
        "may be running there)",
        exclude_if=lambda v: not v,  # left out when 0: plans sealed before it still verify
    )
    above_limit: str | None = Field(
        default=None,
        description="why the queue still holds more than its `quota.limit` after the plan "
        "(work inside minRuntime, until when; non-preemptible work; jobs the cluster refused "
        "to evict lately, until when; work held for clusters that did not answer, which takes "
        "no running work back)",
        exclude_if=lambda v: v is None,  # left out when within: sealed plans still verify
    )
    policy: dict[str, Any] = Field(
        default_factory=dict,
        description="the spec's other policy figures, as written (defaults filled in): "
        "`budget.gpuHoursPerMonth`, `fairshare.halfLife`, `maxWalltime` ...",
        exclude_if=lambda v: not v,  # none recorded (an older plan): sealed plans still verify
    )


class Refused(PlanModel):
    """A job the latest applies failed to act on (its ``op``, ``count`` times in a row, the
    last at ``at`` with ``message``): this plan leaves it as it is (no victim, not
    cancelled), until ``retryAt``."""

    cluster: str
    job: str
    workload: str | None
    op: str
    count: int
    at: datetime
    retry_at: datetime
    message: str


def refused(observed: Snapshot, now: datetime) -> list[Refused]:
    """The jobs ``observed`` says applies failed to act on, while their backoff lasts."""
    workloads = {(c.name, j.id): j.workload for c in observed.clusters for j in c.jobs}
    return [
        Refused(
            cluster=r.cluster,
            job=r.job,
            workload=workloads.get((r.cluster, r.job)),
            op=r.op,
            count=r.count,
            at=r.at,
            retry_at=retry_at(r),
            message=r.message,
        )
        for r in holding(observed, now)
    ]


class NodeRemoved(PlanModel):
    """A node the cluster's spec removes, or shrinks below what its work holds (a simulated
    cluster's nodes are its spec): the workloads whose job the plan moves off it (or that
    wait for room to). The node takes no new work meanwhile; a removed one leaves once
    empty, a shrunk one has its new size (``shrinksTo``) already."""

    cluster: str
    node: str
    workloads: list[str]
    shrinks_to: int | None = Field(default=None, exclude_if=lambda v: v is None)


def nodes_removed(observed: Snapshot) -> list[NodeRemoved]:
    """The nodes ``observed`` reports removed from their spec or shrunk under their work,
    with the workloads whose active job must leave them."""
    out = []
    for c in observed.clusters:
        leaving = must_leave(c)
        for node in [*c.removed_nodes, *sorted(c.shrinking_nodes)]:
            there = {
                j.workload
                for j in c.jobs
                if j.workload is not None and any(n == node for n, _ in leaving.get(j.id, []))
            }
            out.append(
                NodeRemoved(
                    cluster=c.name,
                    node=node,
                    workloads=sorted(there),
                    shrinks_to=c.shrinking_nodes.get(node),
                )
            )
    return out


class PolicyChange(PlanModel):
    """One policy figure of a cluster, project or department, before -> after (``field``
    empty: the cluster or queue itself was added or removed)."""

    kind: str  # cluster | department | project
    name: str
    # as written in the specs: quota.gpus, quota.limit, rank, budget.costPerMonth,
    # gpuTypes.a100_80.costPerGpuHour
    field: str
    before: bool | float | str | None = None
    after: bool | float | str | None = None

    @property
    def price_of(self) -> str | None:
        """The GPU type whose price per GPU-hour this is, if it is one (a cluster's
        ``gpuTypes.<type>.costPerGpuHour``)."""
        head, _, rest = self.field.partition(".")
        gpu_type, _, leaf = rest.rpartition(".")
        if self.kind == "cluster" and head == "gpuTypes" and leaf == PRICE and gpu_type:
            return gpu_type
        return None


PRICE = "costPerGpuHour"  # a GPU type's price field, as the specs spell it


def price_field(gpu_type: str) -> str:
    """``gpuTypes.a100_80.costPerGpuHour``: where a cluster's spec prices ``gpu_type``."""
    return f"gpuTypes.{gpu_type}.{PRICE}"


class ShareChange(PlanModel):
    """A queue's fair share and allocated GPUs under the old policy and the new."""

    kind: str
    name: str
    fair_share_before: float | None = None
    fair_share_after: float | None = None
    allocated_before: float | None = None
    allocated_after: float | None = None


class WorkloadChange(PlanModel):
    """A workload whose fate the change alters (``cp plan --base``): starts, waits,
    reclaimed, preempted, moved, replaced, grows, shrinks, cancelled or unchanged."""

    workload: str
    base: str
    head: str
    reason: Reason | None = None


class PolicyDiff(PlanModel):
    against: str  # what "before" is: the base ref and its plan, or the plan last applied
    base: str | None = Field(
        default=None,
        description="the git ref or folder of `--base`: a plan made for review (what "
        "`cp apply --reviewed` looks for); unset against the plan last applied",
        exclude_if=lambda v: v is None,
    )
    changes: list[PolicyChange] = Field(default_factory=list)
    shares: list[ShareChange] = Field(default_factory=list)
    workloads: list[WorkloadChange] = Field(default_factory=list)


class SolverReport(PlanModel):
    engine: str
    status: str
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    wall_seconds: float = 0.0
    # steps that stopped before they were done (time limit, simulation budget, rounds),
    # each "step (round N): why"; empty for a plan that finished
    cut_short: list[str] = Field(default_factory=list)

    @property
    def cut_steps(self) -> list[str]:
        """The steps cut short, each once, in the order they were cut."""
        return list(dict.fromkeys(entry.partition(" (round")[0] for entry in self.cut_short))

    @property
    def work_left(self) -> bool:
        """Some step was cut short that the next plan may finish: not only CP-SAT stopped
        by its own limit (its answer not proven best; the better of it and the greedy's
        is the plan either way)."""
        return any(CPSAT_OWN_LIMIT not in entry for entry in self.cut_short)


class Plan(PlanModel):
    id: str
    created_at: datetime
    spec_digest: str
    git_commit: str | None = None
    observed_digest: str
    actions: list[Action] = Field(default_factory=list)
    pending: list[Pending] = Field(default_factory=list)
    projects: dict[str, QueueStatus] = Field(default_factory=dict)
    departments: dict[str, QueueStatus] = Field(default_factory=dict)
    solver: SolverReport
    unreachable: dict[str, str] = Field(
        default_factory=dict,
        description="clusters that did not answer when the plan was made, with the error",
        exclude_if=lambda v: not v,
    )
    finished: list[Pending] = Field(
        default_factory=list,
        description="completed workloads edited since their job completed: they do not run "
        "again (a new name runs the new version)",
        exclude_if=lambda v: not v,  # left out when empty: plans sealed before it still verify
    )
    policy: PolicyDiff | None = Field(
        default=None,
        description="policy figures changed (since the plan last applied, or against "
        "`--base`), fair shares before -> after, and the workloads the change affects",
        exclude_if=lambda v: v is None,
    )
    prices: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="each cluster's price per GPU-hour of its GPU types, as its spec has "
        "them (`gpuTypes.<type>.costPerGpuHour`): the next plan says which changed since "
        "this one was applied",
        exclude_if=lambda v: not v,  # none recorded (an older plan): sealed plans still verify
    )
    nodes_removed: list[NodeRemoved] = Field(
        default_factory=list,
        description="nodes the clusters' specs remove (simulated clusters) that still run "
        "work, with its workloads: the plan moves their jobs off (or they wait for room)",
        exclude_if=lambda v: not v,
    )
    refused: list[Refused] = Field(
        default_factory=list,
        description="running jobs the latest applies failed to act on: no victims of this "
        "plan until their backoff has passed (`retryAt`)",
        exclude_if=lambda v: not v,
    )
    # sha256 of everything above (sealed): an edited plan file is refused by `cp apply`
    digest: str | None = None

    @property
    def empty(self) -> bool:
        return not self.actions

    def repeats(self, last: Plan) -> bool:
        """An empty plan with the outcome of ``last``, an empty one: the same specs, nothing
        to do, the same work waiting for the same kind of reason, the same clusters silent.
        The figures a reason gives (GPU-hours used, a backoff's time left) may move on."""
        return self.empty and last.empty and self._same_outcome(last)

    def decides_as(self, other: Plan) -> bool:
        """The same actions as ``other`` (reasons and all), against the same clusters, with
        the same policy and outcome: ``other`` made again, at another time."""
        return (
            self.observed_digest == other.observed_digest
            and self.actions == other.actions
            and self.policy == other.policy
            and self._same_outcome(other)
        )

    def _same_outcome(self, other: Plan) -> bool:
        def waits(plan: Plan) -> list[tuple[str, str]]:
            return [(p.workload, p.reason.code) for p in plan.pending]

        return (
            self.spec_digest == other.spec_digest
            and waits(self) == waits(other)
            and self.unreachable == other.unreachable
        )

    def told_now(self, now: Plan) -> Plan:
        """This stored plan, told with the figures of ``now``, a plan that :meth:`repeats`
        it or :meth:`decides_as` it: what waits and why, the quota table (usage bends
        fair shares as it decays), the policy changed since the plan last applied (none,
        once this one was: not what this one changed in its time), and the steps cut
        short in making it."""
        told = {
            "pending": now.pending,
            "projects": now.projects,
            "departments": now.departments,
            "policy": now.policy,
            # what was cut short is the plan made now's (a preview cut by --time-limit is
            # no reason for every later cycle to say so, nor a whole plan for a cut one not to)
            "solver": self.solver.model_copy(update={"cut_short": now.solver.cut_short}),
        }
        return self.model_copy(update=told)

    @property
    def above_limits(self) -> list[tuple[str, str, QueueStatus]]:
        """The queues the plan leaves above their limit (work minRuntime keeps for now,
        non-preemptible work), departments first, as (kind, name, status)."""
        return [
            (kind, name, q)
            for kind, table in (("department", self.departments), ("project", self.projects))
            for name, q in sorted(table.items())
            if q.above_limit is not None
        ]

    @property
    def edits_waiting(self) -> int:
        """Edited running workloads that still run their old version (minRuntime, room):
        the clusters do not match the specs yet, whatever the actions."""
        return sum(p.reason.code == ReasonCode.SPEC_CHANGED for p in self.pending)

    def content_digest(self) -> str:
        """The digest of the plan's content: every field but ``digest`` itself."""
        body = self.model_dump(mode="json", by_alias=True, exclude={"digest"})
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def same_plan(self, other: Plan) -> bool:
        """The same content but for how long its solver took: a plan made again from the
        same specs, snapshot and time (its id says so) is this one."""

        def body(p: Plan) -> dict[str, object]:
            dumped = p.model_dump(mode="json", by_alias=True, exclude={"digest"})
            dumped["solver"].pop("wallSeconds", None)
            return dumped

        return body(self) == body(other)

    def sealed(self) -> Plan:
        """The plan with its content digest set: what is stored and written to files."""
        return self.model_copy(update={"digest": self.content_digest()})

    @property
    def intact(self) -> bool:
        """Sealed, and its content still matches the seal."""
        return self.digest is not None and self.digest == self.content_digest()

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(by_alias=True, indent=indent, exclude_none=False)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls.model_validate_json(text)

    def quota_chain(self, project: str) -> list[tuple[str, str, QueueStatus]]:
        """The project and its departments up to the top, as (kind, name, status)."""
        chain: list[tuple[str, str, QueueStatus]] = []
        status = self.projects.get(project)
        kind, name = "project", project
        while status is not None and len(chain) <= len(self.departments):
            chain.append((kind, name, status))
            if status.department is None:
                break
            kind, name = "department", status.department
            status = self.departments.get(name)
        return chain

    def execution_order(self) -> list[Action]:
        """The plan's actions in the order they run (:func:`execution_order`)."""
        return execution_order(self.actions)


def execution_order(actions: list[Action]) -> list[Action]:
    """Evictions first, so the moves and submissions that need their GPUs find them free.

    A resize that takes replicas away (an elastic victim of reclaim or preemption) is an
    eviction too: it runs with the preemptions, before any move. Within one op the
    plan's own order holds (the reconciler lists moves in an order that fits).

    Submits the cluster places (fan-out candidates) come last: a cluster puts such a
    job wherever it fits when it arrives, which must not be GPUs the plan gave to
    other work that is not there yet. For the same reason a waiting candidate the plan
    withdraws goes first, before any eviction frees GPUs it would start on."""

    def rank(a: Action) -> tuple[bool, int, bool]:
        if a.op == Op.CANCEL and a.reason.code == ReasonCode.FAN_OUT:
            return (False, -1, False)  # a waiting candidate withdrawn (controlplane/outrun.py)
        if shrinks(a):
            return (False, _EXEC_RANK[Op.PREEMPT], False)
        return (not a.op.evicts, _EXEC_RANK[a.op], placed_by_cluster(a))

    return sorted(actions, key=rank)


# preempt/cancel free GPUs; move frees its old place before it lands; then growth, then starts
_EXEC_RANK = {Op.CANCEL: 0, Op.PREEMPT: 1, Op.MOVE: 2, Op.RESIZE: 3, Op.SUBMIT: 4}
# reasons that disturb running work: a resize with one of them shrinks the job
_DISTURBS = {ReasonCode.RECLAIM, ReasonCode.PRIORITY, ReasonCode.ELASTIC_SHRINK}
# reading order: least disruptive first (KAI tries allocate, consolidate, reclaim, preempt)
DISPLAY_RANK = {Op.SUBMIT: 0, Op.RESIZE: 1, Op.MOVE: 2, Op.PREEMPT: 3, Op.CANCEL: 4}


def placed_by_cluster(action: Action) -> bool:
    """A submit whose nodes the cluster chooses (no replica names a node)."""
    replicas = action.replicas or []
    return action.op == Op.SUBMIT and bool(replicas) and all(r.node is None for r in replicas)


def shrinks(action: Action) -> bool:
    """A resize that takes replicas away: an elastic victim of reclaim or preemption, a
    lowered limit, fewer replicas in the spec (a plan stored before ``shrink`` was
    recorded is told by its reason)."""
    return action.op == Op.RESIZE and (action.shrink or action.reason.code in _DISTURBS)


def plan_id(spec_digest: str, observed_digest: str, actions: list[Action], now: datetime) -> str:
    """Content-derived, so the same inputs always give the same plan id."""
    body = json.dumps(
        [
            spec_digest,
            observed_digest,
            now.isoformat(),
            [a.model_dump(mode="json") for a in actions],
        ],
        sort_keys=True,
    )
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def review_id(plan_id: str, base: str) -> str:
    """The id of a plan made for review against ``base``: not the id of the plain plan of
    the same inputs, which another command may have stored first (the review would then
    not be stored, and ``cp apply --reviewed`` not find it)."""
    return hashlib.sha256(f"{plan_id} reviewed against {base}".encode()).hexdigest()[:16]
