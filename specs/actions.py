"""Plan actions and their reasons: the closed vocabulary shared by the reconciler and adapters.

Every action names one workload and carries a :class:`Reason` whose ``code`` comes from a
closed, documented enum (``docs/reasons.md``) and whose ``message`` is built from sorted
fragments, so the same inputs always give the same words.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from specs.models import WorkloadSpec
from specs.snapshot import Replica

Never = Literal["never"]
NEVER: Never = "never"
# when a submission would start, as a cluster forecasts it: a time, never, or unknown (None)
Estimate = datetime | Never | None


class Op(StrEnum):
    """What an action does, in the order a reader meets them (least disruptive first)."""

    SUBMIT = "submit"
    RESIZE = "resize"
    MOVE = "move"
    PREEMPT = "preempt"
    CANCEL = "cancel"

    @property
    def evicts(self) -> bool:
        """Frees GPUs: runs before the submissions that need them."""
        return self in (Op.PREEMPT, Op.CANCEL, Op.MOVE)


class ReasonCode(StrEnum):
    # why a workload is started, kept or grown
    WITHIN_DESERVED = "within-deserved"
    OVER_QUOTA = "over-quota"
    ELASTIC_EXPAND = "elastic-expand"
    FAN_OUT = "fan-out"
    CHECKPOINT_RESUME = "checkpoint-resume"
    # why something running is disturbed
    RECLAIM = "reclaim"
    PRIORITY = "priority"
    CONSOLIDATE = "consolidate"
    ELASTIC_SHRINK = "elastic-shrink"
    PRUNE = "prune"
    SPEC_CHANGED = "spec-changed"
    FAN_OUT_LOSER = "fan-out-loser"
    # why a workload waits
    OVER_LIMIT = "over-limit"
    NON_PREEMPTIBLE_OVER_DESERVED = "non-preemptible-over-deserved"
    NO_CAPACITY = "no-capacity"
    GANG_UNPLACEABLE = "gang-unplaceable"
    NO_ELIGIBLE_POOL = "no-eligible-pool"
    WALLTIME_EXCEEDS_LIMIT = "walltime-exceeds-limit"
    OVER_BUDGET = "over-budget"
    FAIRSHARE = "fairshare"
    MIN_RUNTIME = "min-runtime"
    SUBMITTED = "submitted"
    COMPLETED = "completed"
    FAILED = "failed"
    CLUSTER_UNREACHABLE = "cluster-unreachable"
    ENDING = "ending"


class ActionModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True
    )


class Reason(ActionModel):
    code: ReasonCode
    message: str


class SubmitDetails(ActionModel):
    """What an adapter needs to start the workload, so a plan file is self-contained."""

    gpu_type: str | None = None
    gpus_per_replica: int = 0
    partition: str | None = None
    walltime: int | None = Field(default=None, description="seconds")
    command: list[str] | None = None
    priority: int = 0
    preemptible: bool = True
    checkpoint_signal: str | None = None
    checkpoint_grace: int | None = None
    account: str | None = None
    # fan-out and checkpoint segments (docs/strategies.md)
    time_min: int | None = Field(
        default=None,
        description="seconds; sbatch --time-min: the "
        "cluster may start the job earlier with a limit this short",
    )
    nodes: int | None = Field(
        default=None,
        description="node count when the cluster places and "
        "replicas share nodes (fewer nodes than replicas)",
    )
    segment: int | None = Field(
        default=None,
        description="checkpoint segment number: the job "
        "stops itself at a checkpoint before its time limit",
    )
    spec_digest: str | None = Field(
        default=None,
        description="the workload spec's digest: a job of the same workload and digest that "
        "is already active is this submission (idempotent across plans)",
    )
    candidate: str | None = Field(
        default=None,
        description="fan-out candidate name: one workload may have several submissions in one plan",
    )
    # Fields added after plans were first stored are left out of the JSON while unset, so a
    # plan without them (and its content-derived id) reads exactly as it did before.
    image: str | None = Field(
        default=None,
        description="container image (Kubernetes)",
        exclude_if=lambda v: v is None,
    )
    elastic: bool = Field(
        default=False,
        description="replicas beyond minReplicas may be taken away while it runs (Slurm: "
        "its tasks run on without them, and a shrink keeps the job)",
        exclude_if=lambda v: not v,
    )

    @classmethod
    def for_workload(
        cls,
        spec: WorkloadSpec,
        *,
        gpu_type: str,
        partition: str | None,
        walltime: int | None,
        account: str | None,
        **extra: object,
    ) -> SubmitDetails:
        """The workload's own part (command, GPUs, priority, checkpoint) plus where it goes."""
        ck = spec.checkpoint
        return cls.model_validate(
            {
                "gpu_type": gpu_type,
                "gpus_per_replica": spec.gpus,
                "partition": partition,
                "walltime": walltime,
                "command": spec.command,
                "priority": spec.effective_priority,
                "preemptible": spec.is_preemptible,
                "checkpoint_signal": ck.signal if ck else None,
                "spec_digest": spec.digest,
                "checkpoint_grace": ck.grace if ck else None,
                "account": account,
                "image": spec.image,
                "elastic": spec.effective_min_replicas < spec.replicas,
                **extra,
            }
        )


class Action(ActionModel):
    op: Op
    workload: str
    cluster: str
    pool: str | None = None
    job: str | None = None
    tagged_as: str | None = Field(
        default=None,
        description="the workload identity ``job`` carries, where the specs renamed its "
        "project since (spec.renamedFrom): adapters accept a job tagged with it",
        exclude_if=lambda v: v is None,
    )
    replicas: list[Replica] | None = None
    reason: Reason
    submit: SubmitDetails | None = None
    shrink: bool = Field(
        default=False,
        description="a resize that takes replicas away from running work",
        exclude_if=lambda v: not v,
    )

    @property
    def gpus(self) -> int:
        return sum(r.gpus for r in self.replicas or [])


class Pending(ActionModel):
    workload: str
    reason: Reason
