"""The observed state of the clusters: what adapters report and what ``--observed`` files hold.

A snapshot is the whole truth for one reconcile: nodes with their GPUs, every job on them
(ours carry a ``workload`` identity, foreign ones have ``workload: null`` and are never
touched), when each pending workload entered the queue, and finished usage for
time-based fairshare. ``now`` travels with it, so planning needs no clock.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from specs.models import WorkloadSpec


class SnapshotModel(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


NodeState = Literal["idle", "mixed", "allocated", "down", "drain"]


class JobState(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    SUSPENDED = "SUSPENDED"
    REQUEUED = "REQUEUED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"
    NODE_FAIL = "NODE_FAIL"

    @property
    def active(self) -> bool:
        """Still on the cluster: queued, running, or winding down."""
        return self in _ACTIVE

    @property
    def holds_gpus(self) -> bool:
        return self in _HOLDING


_ACTIVE = {
    JobState.PENDING,
    JobState.RUNNING,
    JobState.COMPLETING,
    JobState.SUSPENDED,
    JobState.REQUEUED,
}
_HOLDING = {JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED}


class Reservation(SnapshotModel):
    """A window in which a node starts none of our jobs (Slurm: a reservation they do not
    ask for, such as an announced maintenance). A job whose time limit would run into it
    is not placed there, nor kept waiting there."""

    name: str
    start: AwareDatetime
    end: AwareDatetime | None = Field(default=None, description="null: no end known")
    maintenance: bool = Field(
        default=False,
        description="the site's maintenance (Slurm: Flags=MAINT)",
        exclude_if=lambda v: not v,
    )

    def over(self, now: datetime) -> bool:
        """Whether the window has ended by ``now`` (one with no known end never has)."""
        return self.end is not None and self.end <= now


class Node(SnapshotModel):
    name: str
    pool: str | None = None
    gpu_type: str | None = None
    gpus: int = Field(ge=0)
    state: NodeState = "idle"
    partition: str | None = None
    full: bool = Field(
        default=False,
        description="no new job can start here now, whatever GPUs are free (Slurm: every CPU "
        "of it is allocated); its work runs on, and a job queued for it is placed again",
        exclude_if=lambda v: not v,
    )
    reservations: list[Reservation] = Field(
        default_factory=list,
        description="windows, earliest first, in which no new job of ours starts here (one "
        "under way makes the node take none now); its running work is left alone",
        exclude_if=lambda v: not v,
    )

    @property
    def schedulable(self) -> bool:
        return self.state not in ("down", "drain")


class Replica(SnapshotModel):
    node: str | None = Field(
        default=None,  # `cp observe` leaves nulls out: a queued job's replica has no node
        description="null (or absent) where the cluster's own scheduler places",
    )
    gpus: int = Field(ge=0)


class Job(SnapshotModel):
    id: str
    workload: str | None = Field(default=None, description="project/name; null = not ours")
    tagged_as: str | None = Field(
        default=None,
        description="the identity the job carries, where its project has since been renamed "
        "(specs/renames.py): ``workload`` is then the new one",
        exclude_if=lambda v: v is None,
    )
    state: JobState = JobState.RUNNING
    submitted_at: AwareDatetime | None = None
    started_at: AwareDatetime | None = None
    replicas: list[Replica] = Field(default_factory=list)
    plan_id: str | None = None
    pool: str | None = None
    partition: str | None = None
    gpu_type: str | None = None
    walltime: int | None = Field(default=None, description="seconds")
    reason: str | None = Field(default=None, description="why the cluster keeps it pending")
    ended_at: AwareDatetime | None = Field(
        default=None, description="when it ended (ended jobs only)"
    )
    exit_code: str | None = Field(
        default=None, description="e.g. Slurm's 1:0 (code:signal), if known"
    )
    spec_digest: str | None = Field(
        default=None, description="the digest of the workload spec it was submitted for"
    )
    candidate: str | None = Field(
        default=None, description="the fan-out candidate it was submitted as"
    )
    owner: str | None = Field(
        default=None,
        description="who made it, for jobs not ours (e.g. Kubernetes ReplicaSet/web-7d9f)",
        exclude_if=lambda v: v is None,
    )
    namespace: str | None = Field(
        default=None,
        description="Kubernetes: the namespace it runs in",
        exclude_if=lambda v: v is None,
    )
    image: str | None = Field(
        default=None,
        description="Kubernetes: the container image it runs",
        exclude_if=lambda v: v is None,
    )
    failed_replicas: int | None = Field(
        default=None,
        description="Kubernetes: replicas of a gang that failed while the others still run",
        exclude_if=lambda v: v is None,
    )

    @property
    def gpus(self) -> int:
        return sum(r.gpus for r in self.replicas)


class JobRun(SnapshotModel):
    """One run of one of our jobs, as the cluster's accounting tells it: when it held its
    GPUs, how many, of which type. Usage (fairshare, budgets) is computed from runs, so
    it is exact whatever the observation frequency; a requeued job has one run per start."""

    job: str
    workload: str = Field(description="project/name (only our jobs are accounted)")
    started_at: AwareDatetime
    ended_at: AwareDatetime | None = Field(default=None, description="null while it runs")
    gpus: int = Field(ge=0, description="GPUs it held, over all its nodes")
    gpu_type: str | None = None
    state: JobState = JobState.RUNNING
    time_limit: int | None = Field(default=None, description="seconds, as the cluster knew it")
    spec_digest: str | None = Field(
        default=None,
        description="the digest of the workload spec the job ran (from its tag)",
        exclude_if=lambda v: v is None,
    )
    plan_id: str | None = Field(
        default=None,
        description="the plan that submitted the job (from its tag)",
        exclude_if=lambda v: v is None,
    )


class LastKnown(SnapshotModel):
    """A workload the store knows may have a job on a cluster that did not answer."""

    workload: str
    gpus: int = Field(
        default=0,
        ge=0,
        description="GPUs its job held when last seen running, or that its submission asked "
        "for (0: not known)",
    )
    running: bool = Field(
        default=False,
        description="its job was running there when last seen (not only submitted)",
        exclude_if=lambda v: not v,
    )


class PoolState(SnapshotModel):
    """What the cluster itself sets on a node pool, beyond the specs."""

    name: str
    max_walltime: int | None = Field(
        default=None,
        description="seconds: the longest time limit the cluster lets a job of the pool have "
        "(Slurm: its partition's MaxTime); null: no limit",
    )


class ClusterState(SnapshotModel):
    """One cluster as observed. An unreachable cluster (its adapter failed) is reported
    with ``reachable: false`` and the error, and no nodes or jobs: nothing is known of it,
    so the reconciler leaves it and the workloads that may run there alone (those the store
    last knew there, when it knows). A cluster gone from the specs (``gone``) holds only the
    completed jobs of ours the store remembers there."""

    name: str
    nodes: list[Node] = Field(default_factory=list)
    jobs: list[Job] = Field(default_factory=list)
    pools: list[PoolState] = Field(
        default_factory=list,
        description="limits the cluster sets on node pools (only pools that have some)",
        exclude_if=lambda v: not v,
    )
    partitions: list[str] = Field(
        default_factory=list,
        description="the partitions the cluster has (Slurm: those sinfo lists), so a pool "
        "naming one it lacks (a typo) is known as such; empty: not reported",
        exclude_if=lambda v: not v,
    )
    runs: list[JobRun] = Field(
        default_factory=list,
        description="runs of our jobs since the last observation, from the cluster's "
        "accounting (jobs that started and ended in between included)",
    )
    removed_nodes: list[str] = Field(
        default_factory=list,
        description="nodes the cluster's spec no longer has (a simulated cluster's nodes are "
        "its spec) that still run work: they drain (take no new work), and leave once the "
        "plan has moved their work off them",
        exclude_if=lambda v: not v,
    )
    shrinking_nodes: dict[str, int] = Field(
        default_factory=dict,
        description="nodes the cluster's spec gives fewer GPUs than their work holds (a "
        "simulated cluster's nodes are its spec), with the GPUs it gives them (their size "
        "already): the work runs on over it, and no new work fits, until the plan has moved "
        "off what does not fit",
        exclude_if=lambda v: not v,
    )
    gone: bool = Field(
        default=False,
        description="a cluster no longer in the specs, so not observed: it holds only the "
        "completed jobs of ours the store remembers there (a completed workload does not run "
        "again), no nodes, and nothing is planned there",
        exclude_if=lambda v: not v,
    )
    reachable: bool = Field(default=True, exclude_if=lambda v: v is True)
    error: str | None = Field(
        default=None, description="why it could not be observed", exclude_if=lambda v: v is None
    )
    last_known: list[LastKnown] | None = Field(
        default=None,
        description="of a cluster that did not answer: the workloads the store knows may be "
        "there (submitted and not seen starting, or running when last seen); absent: "
        "not known, so any workload that may use the cluster is held for it",
        exclude_if=lambda v: v is None,
    )


class QueueEntry(SnapshotModel):
    workload: str
    since: AwareDatetime


class UsageRecord(SnapshotModel):
    project: str
    gpu_hours: float = Field(ge=0)
    ended_at: AwareDatetime
    gpu_type: str | None = None
    cluster: str | None = Field(
        default=None,
        description="where it ran: a GPU type's price is its cluster's (absent: the type's "
        "highest price)",
        exclude_if=lambda v: v is None,
    )
    price: float | None = Field(
        default=None,
        description="the cost per GPU-hour it ran at, as recorded (the price in force then: a "
        "later change of the price does not re-price it); absent: its cluster's price in the specs",
        exclude_if=lambda v: v is None,
    )
    started_at: AwareDatetime | None = Field(
        default=None,
        description="when the GPU-hours began (they were used evenly up to ended_at): "
        "fairshare decays each moment of use by its own age",
        exclude_if=lambda v: v is None,
    )


class Progress(SnapshotModel):
    """Run time of a workload that runs in checkpoint segments (normally from the store, which
    remembers segments after the cluster forgets their jobs)."""

    workload: str
    elapsed_seconds: int = Field(ge=0, description="run time of its finished segments")
    segments: int = Field(default=0, ge=0, description="finished segments")
    last_seconds: int | None = Field(default=None, description="run time of the newest segment")
    last_limit_seconds: int | None = Field(default=None, description="that job's time limit")


class Failure(SnapshotModel):
    """A workload's newest failed job and how many failed in a row (for retry backoff)."""

    workload: str
    count: int = Field(ge=1, description="consecutive failures")
    job: str
    ended_at: AwareDatetime
    exit_code: str | None = None
    spec_digest: str | None = Field(
        default=None,
        description="the digest of the spec the failed job ran: an edit since ends the backoff",
        exclude_if=lambda v: v is None,
    )
    state: JobState | None = Field(
        default=None,
        description="how it ended (FAILED, TIMEOUT: out of its walltime, NODE_FAIL)",
        exclude_if=lambda v: v is None,
    )


class Refusal(SnapshotModel):
    """A job the control plane failed to act on (cancel, preempt, move or resize) in as
    many applies in a row: it is left as it is until a backoff has passed."""

    cluster: str
    job: str
    op: str = Field(description="what failed: cancel, preempt, move or resize")
    count: int = Field(ge=1, description="failed attempts in a row")
    at: AwareDatetime = Field(description="when the last one failed")
    message: str = ""


class Snapshot(SnapshotModel):
    now: AwareDatetime
    clusters: list[ClusterState] = Field(default_factory=list)
    queue: list[QueueEntry] = Field(default_factory=list)
    usage: list[UsageRecord] = Field(default_factory=list)
    progress: list[Progress] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)
    refusals: list[Refusal] = Field(
        default_factory=list,
        description="running jobs an apply failed to act on, in a row (normally from the "
        "store): not evicted again until a backoff has passed",
        exclude_if=lambda v: not v,
    )
    versions: dict[str, WorkloadSpec] = Field(
        default_factory=dict,
        description="the spec each running job of ours was made of, by the digest it "
        "carries, where it differs from the specs (normally from the store): what an edit "
        "changed",
        exclude_if=lambda v: not v,
    )
    spec_since: dict[str, AwareDatetime] = Field(
        default_factory=dict,
        description="when the store first saw a workload's current spec, for each workload "
        "whose last completed job ran another version (normally from the store): an edit "
        "made while that job ran is run once it completed; one made after is not",
        exclude_if=lambda v: not v,
    )

    def cluster(self, name: str) -> ClusterState | None:
        return next((c for c in self.clusters if c.name == name), None)

    def jobs_of(self, workload: str) -> list[tuple[str, Job]]:
        """Every (cluster, job) carrying this workload identity."""
        return [(c.name, j) for c in self.clusters for j in c.jobs if j.workload == workload]
