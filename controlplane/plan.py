"""The plan: an immutable, reviewable list of actions with reasons, plus what waits and why.

Its JSON form (``cp plan --json``) is a contract (DESIGN.md); it records digests of its
inputs so that ``cp apply`` can refuse a plan made against a world that has moved on.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from specs.actions import Action, Op, Pending, ReasonCode


class PlanModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class QueueStatus(PlanModel):
    deserved: float
    fair_share: float
    allocated: float  # after the plan
    limit: float | None = None
    pending: float = 0  # GPUs of workloads that still wait
    department: str | None = None


class SolverReport(PlanModel):
    engine: str
    status: str
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    wall_seconds: float = 0.0


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

    @property
    def empty(self) -> bool:
        return not self.actions

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
        """Evictions first, so the moves and submissions that need their GPUs find them free.

        A resize that takes replicas away (an elastic victim of reclaim or preemption) is an
        eviction too: it runs with the preemptions, before any move. Within one op the
        plan's own order holds (the reconciler lists moves in an order that fits)."""
        def rank(a: Action) -> tuple[bool, int]:
            if a.op == Op.RESIZE and a.reason.code in _DISTURBS:
                return (False, _EXEC_RANK[Op.PREEMPT])
            return (not a.op.evicts, _EXEC_RANK[a.op])

        return sorted(self.actions, key=rank)


# preempt/cancel free GPUs; move frees its old place before it lands; then growth, then starts
_EXEC_RANK = {Op.CANCEL: 0, Op.PREEMPT: 1, Op.MOVE: 2, Op.RESIZE: 3, Op.SUBMIT: 4}
# reasons that disturb running work: a resize with one of them shrinks the job
_DISTURBS = {ReasonCode.RECLAIM, ReasonCode.PRIORITY, ReasonCode.ELASTIC_SHRINK}
# reading order: least disruptive first (KAI tries allocate, consolidate, reclaim, preempt)
DISPLAY_RANK = {Op.SUBMIT: 0, Op.RESIZE: 1, Op.MOVE: 2, Op.PREEMPT: 3, Op.CANCEL: 4}


def plan_id(spec_digest: str, observed_digest: str, actions: list[Action], now: datetime) -> str:
    """Content-derived, so the same inputs always give the same plan id."""
    body = json.dumps(
        [spec_digest, observed_digest, now.isoformat(), [a.model_dump(mode="json") for a in actions]],
        sort_keys=True,
    )
    return hashlib.sha256(body.encode()).hexdigest()[:16]
