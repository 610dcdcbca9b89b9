"""The store's tables (sqlmodel): plans, actions and their events, queue entry times,
placeholders, completions, the runs of our jobs (usage and segment progress), failure
streaks, the observations plans were made against, the apply lease, and the schema's own
metadata.

History is tamper-evident: plans and action events are immutable records in one hash
chain (``chain_seq`` orders them; each carries the hash of its predecessor and its own,
see store/chain.py). The ``actions`` table is the current state of each action, derived
from its events; ``cp history --verify`` checks the two agree.

Only the store package talks to the database; these rows never leave it except as the
read-only records ``cp history`` and ``cp show`` print.
"""

from __future__ import annotations

import zlib
from datetime import UTC, datetime

from sqlalchemy import Column, LargeBinary, Text
from sqlmodel import Field, SQLModel

from controlplane.errors import StoreError


def utcnow() -> datetime:
    return datetime.now(UTC)


def aware(dt: datetime) -> datetime:
    """SQLite drops the zone of a datetime: every stored time is UTC."""
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


SCHEMA_VERSION = 15


class MetaRow(SQLModel, table=True):
    """The schema version, and the head of the history chain."""

    __tablename__ = "meta"
    key: str = Field(primary_key=True)
    value: str


class PlanRow(SQLModel, table=True):
    __tablename__ = "plans"
    id: str = Field(primary_key=True)
    created_at: datetime
    spec_digest: str
    observed_digest: str
    git_commit: str | None = None
    actions: int = 0
    status: str = "planned"  # planned | applying | applied | failed | interrupted
    applied_at: datetime | None = None
    # the plan's JSON: empty since 14, which keeps it compressed in ``packed`` (a busy
    # org's plan is megabytes of it); :attr:`text` reads either
    body: str = Field(sa_column=Column(Text, nullable=False))
    # the history chain (store/chain.py)
    chain_seq: int | None = Field(default=None, index=True)
    prev_hash: str | None = None
    hash: str | None = None
    packed: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))

    @property
    def text(self) -> str:
        """The plan's JSON, as the chain hashes it (a body that no longer unpacks: a
        StoreError naming the plan, which ``cp history --verify`` reports as edited)."""
        if self.packed is None:
            return self.body
        try:
            return zlib.decompress(self.packed).decode()
        except (zlib.error, UnicodeDecodeError) as exc:
            raise StoreError(f"plan {self.id}: its stored body is damaged ({exc})") from None

    @staticmethod
    def pack(text: str) -> bytes:
        return zlib.compress(text.encode())


class PrunedPlanRow(SQLModel, table=True):
    """A plan ``cp store prune`` removed (14): its id still says the jobs tagged with it are
    ours, its specs were applied, and it is not to be applied again."""

    __tablename__ = "pruned_plans"
    id: str = Field(primary_key=True)
    created_at: datetime
    spec_digest: str
    status: str


class EventRow(SQLModel, table=True):
    """Something that happened to a stored plan or one of its actions, immutable once
    written: an action started, finished, failed or was linked to its job; a plan was
    applied, failed or found interrupted."""

    __tablename__ = "events"
    id: int | None = Field(default=None, primary_key=True)
    plan_id: str = Field(index=True, foreign_key="plans.id")
    seq: int | None = None  # the action's position; None for the plan's own status
    status: str
    job: str | None = None
    message: str = ""
    at: datetime
    actor: str | None = None  # who started an apply: a CI's user and run, or user@host
    chain_seq: int = Field(index=True)
    prev_hash: str
    hash: str


class ActionRow(SQLModel, table=True):
    __tablename__ = "actions"
    id: int | None = Field(default=None, primary_key=True)
    plan_id: str = Field(index=True, foreign_key="plans.id")
    seq: int  # position in execution order
    op: str
    workload: str = Field(index=True)
    cluster: str
    job: str | None = None  # the job acted on, or created (a move's new job, on Slurm)
    acted_on: str | None = None  # 13: the job the plan acted on (None: recorded before 13)
    reason_code: str
    reason: str
    status: str = "pending"  # pending | started | done | failed
    message: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None


class QueueRow(SQLModel, table=True):
    """When a workload was first seen waiting: KAI orders jobs oldest first."""

    __tablename__ = "queue"
    workload: str = Field(primary_key=True)
    since: datetime


class PlaceholderRow(SQLModel, table=True):
    """A job submitted but not yet seen running, so the next reconcile doesn't submit it again."""

    __tablename__ = "placeholders"
    workload: str = Field(primary_key=True)
    cluster: str = Field(primary_key=True)
    job: str = Field(primary_key=True)  # 9: two fan-out candidates on one cluster, two rows
    plan_id: str
    submitted_at: datetime


class CompletionRow(SQLModel, table=True):
    """A workload whose job ran to completion: clusters forget ended jobs, the store doesn't."""

    __tablename__ = "completions"
    workload: str = Field(primary_key=True)
    cluster: str = Field(primary_key=True)
    job: str
    seen_at: datetime  # when it ended (when first seen ended, if its cluster did not say)
    spec_digest: str | None = None  # of the spec it ran (6): an edit after it is told


class RunRow(SQLModel, table=True):
    """One run of one of our jobs (a requeued or resized job runs again: another row): the
    fact usage is computed from (GPUs x the time between its start and its end, or the
    last time it was seen running), and, for a workload in checkpoint segments, its
    progress (the completed runs are its segments). Kept after the cluster forgets the
    job."""

    __tablename__ = "runs"
    cluster: str = Field(primary_key=True)
    job: str = Field(primary_key=True)
    started_at: datetime = Field(primary_key=True)
    workload: str = Field(index=True)
    project: str = Field(default="", index=True)
    state: str
    ended_at: datetime | None = None
    time_limit: int | None = None  # seconds, as the cluster reports it
    gpus: int = 0
    gpu_type: str | None = None
    # 10: its GPU type's costPerGpuHour on its cluster when recorded: the price a run on a
    # cluster since removed from the specs counts at (one in the specs: its price there)
    price: float | None = None
    # 11: the plan that submitted its job: the fan-out candidates of one round share it,
    # and of those that completed only the winner's run counts as progress
    plan_id: str | None = None
    last_seen: datetime
    # its workload left the specs: the run still counts as usage, no longer as progress
    # (a workload added again starts its segments from zero)
    retired: bool = False
    # 15: counted in its project's roll-up (RollupRow); whatever changes the run clears it
    rolled: bool = False


class RollupRow(SQLModel, table=True):
    """The usage of a project's runs that ended before ``through`` (the start of the current
    month), decayed to then by its half-life, per price group (15): a plan reads these in
    place of those runs (store/rollups.py)."""

    __tablename__ = "rollups"
    id: int | None = Field(default=None, primary_key=True)
    project: str = Field(index=True)
    half_life: int  # seconds
    through: datetime
    cluster: str
    gpu_type: str | None = None
    price: float | None = None
    gpu_hours: float  # decayed to ``through``
    runs: int  # the runs it holds, all groups together: a count that differs says it is stale
    book: str  # the digest of the price book it was made with (a run's pieces follow it)


class ObservationRow(SQLModel, table=True):
    """What a plan was made against (12): the facts of an observation of the clusters
    (specs/observation.py), compressed, by their digest, so that an apply finding the
    clusters changed can tell what changed (controlplane/staleness.py). Not chained: it is
    sealed by its digest, which the plan (chained) records."""

    __tablename__ = "observations"
    digest: str = Field(primary_key=True)
    body: bytes = Field(sa_column=Column(LargeBinary, nullable=False))  # zlib, of the JSON
    kept_at: datetime = Field(index=True)


class VersionRow(SQLModel, table=True):
    """A version of a workload's spec, by the digest its jobs carry (4): what a running job
    was made of, so an edit is shown field by field and classed as in place or replace."""

    __tablename__ = "versions"
    digest: str = Field(primary_key=True)
    workload: str = Field(index=True)
    body: str = Field(sa_column=Column(Text, nullable=False))  # the spec, JSON by alias
    first_seen: datetime


class FailureRow(SQLModel, table=True):
    """A workload's newest failed job and how many failed in a row (retry backoff)."""

    __tablename__ = "failures"
    workload: str = Field(primary_key=True)
    count: int
    job: str
    ended_at: datetime
    exit_code: str | None = None
    spec_digest: str | None = None  # of the spec the failed job ran (7)
    state: str | None = None  # how it ended: FAILED, TIMEOUT, NODE_FAIL (8)


class LeaseRow(SQLModel, table=True):
    """Who may apply right now: several reconcilers can share one database (PostgreSQL)."""

    __tablename__ = "leases"
    name: str = Field(primary_key=True)
    holder: str
    expires_at: datetime
