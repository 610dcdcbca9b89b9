"""The history store (sqlmodel): plans, every action's outcome, queue entry times, placeholders,
completed workloads, runs of segmented workloads, failure streaks.

SQLite under the spec repo's ``.cp/`` by default (embedded, zero set-up); any SQLAlchemy
URL by option. It answers "who preempted my job, when and why": every applied action is
kept with its reason and result. Only this module talks to the database.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import Column, Text, delete, event, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Field, Session, SQLModel, create_engine, select

from controlplane.plan import Plan
from specs.snapshot import Failure, Progress, Snapshot, UsageRecord


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class PlanRow(SQLModel, table=True):
    __tablename__ = "plans"
    id: str = Field(primary_key=True)
    created_at: datetime
    spec_digest: str
    observed_digest: str
    git_commit: str | None = None
    actions: int = 0
    status: str = "planned"  # planned | applying | applied | failed
    applied_at: datetime | None = None
    body: str = Field(sa_column=Column(Text, nullable=False))


class ActionRow(SQLModel, table=True):
    __tablename__ = "actions"
    id: int | None = Field(default=None, primary_key=True)
    plan_id: str = Field(index=True, foreign_key="plans.id")
    seq: int  # position in execution order
    op: str
    workload: str = Field(index=True)
    cluster: str
    job: str | None = None  # the job acted on, or created
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
    job: str
    plan_id: str
    submitted_at: datetime


class CompletionRow(SQLModel, table=True):
    """A workload whose job ran to completion: clusters forget ended jobs, the store doesn't."""

    __tablename__ = "completions"
    workload: str = Field(primary_key=True)
    cluster: str = Field(primary_key=True)
    job: str
    seen_at: datetime


class UsageRow(SQLModel, table=True):
    """GPU time of our jobs, accrued at every observation (granularity: the observe interval)."""

    __tablename__ = "usage"
    cluster: str = Field(primary_key=True)
    job: str = Field(primary_key=True)
    workload: str
    project: str = Field(index=True)
    gpu_type: str | None = None
    gpus: int
    started_at: datetime
    last_seen: datetime


class RunRow(SQLModel, table=True):
    """One run of a job of a workload that runs in checkpoint segments (a requeued job runs
    again: another row). The runs that completed are its segments; their run time is its
    progress, kept after the cluster forgets the jobs."""

    __tablename__ = "runs"
    cluster: str = Field(primary_key=True)
    job: str = Field(primary_key=True)
    started_at: datetime = Field(primary_key=True)
    workload: str = Field(index=True)
    state: str
    ended_at: datetime | None = None
    time_limit: int | None = None  # seconds, as the cluster reports it
    last_seen: datetime


class FailureRow(SQLModel, table=True):
    """A workload's newest failed job and how many failed in a row (retry backoff)."""

    __tablename__ = "failures"
    workload: str = Field(primary_key=True)
    count: int
    job: str
    ended_at: datetime
    exit_code: str | None = None


class LeaseRow(SQLModel, table=True):
    """Who may apply right now: several reconcilers can share one database (PostgreSQL)."""

    __tablename__ = "leases"
    name: str = Field(primary_key=True)
    holder: str
    expires_at: datetime


def default_url(spec_dir: Path) -> str:
    return f"sqlite:///{(spec_dir / '.cp' / 'controlplane.db').resolve()}"


class Store:
    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.engine = create_engine(url)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_foreign_keys)
        SQLModel.metadata.create_all(self.engine)

    # ------------------------------------------------------------------ plans

    def save_plan(self, plan: Plan) -> None:
        with Session(self.engine) as db:
            if db.get(PlanRow, plan.id) is not None:
                return  # plans are immutable: the same id is the same plan
            db.add(PlanRow(
                id=plan.id, created_at=plan.created_at, spec_digest=plan.spec_digest,
                observed_digest=plan.observed_digest, git_commit=plan.git_commit,
                actions=len(plan.actions), body=plan.to_json(indent=None),
            ))
            db.flush()  # the plan row first: actions reference it (PostgreSQL enforces that)
            for seq, action in enumerate(plan.execution_order()):
                db.add(ActionRow(
                    plan_id=plan.id, seq=seq, op=action.op.value, workload=action.workload,
                    cluster=action.cluster, job=action.job, reason_code=action.reason.code.value,
                    reason=action.reason.message,
                ))
            db.commit()

    def get_plan(self, ref: str) -> Plan | None:
        """A plan by id or unique id prefix."""
        with Session(self.engine) as db:
            rows = db.exec(select(PlanRow).where(PlanRow.id.startswith(ref))).all()  # type: ignore[attr-defined]
            return Plan.from_json(rows[0].body) if len(rows) == 1 else None

    def plan_status(self, plan_id: str) -> str | None:
        with Session(self.engine) as db:
            row = db.get(PlanRow, plan_id)
            return row.status if row else None

    def set_plan_status(self, plan_id: str, status: str) -> None:
        with Session(self.engine) as db:
            row = db.get(PlanRow, plan_id)
            if row is not None:
                row.status = status
                if status == "applied":
                    row.applied_at = _utcnow()
                db.add(row)
                db.commit()

    def plans(self, limit: int = 20) -> list[PlanRow]:
        with Session(self.engine) as db:
            return list(db.exec(select(PlanRow).order_by(PlanRow.created_at.desc()).limit(limit)))  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ actions

    def actions(self, plan_id: str) -> list[ActionRow]:
        with Session(self.engine) as db:
            return list(db.exec(select(ActionRow).where(ActionRow.plan_id == plan_id).order_by(ActionRow.seq)))  # type: ignore[arg-type]

    def mark(self, plan_id: str, seq: int, status: str, *, job: str | None = None,
             message: str = "") -> None:
        """Record an action's progress; committed at once, so a crash loses nothing done."""
        with Session(self.engine) as db:
            row = db.exec(select(ActionRow).where(ActionRow.plan_id == plan_id,
                                                  ActionRow.seq == seq)).one()
            row.status = status
            row.message = message
            if job is not None:
                row.job = job
            if status == "started":
                row.started_at = _utcnow()
            else:
                row.finished_at = _utcnow()
            db.add(row)
            db.commit()

    def history(self, workload: str | None = None, limit: int = 50) -> list[tuple[ActionRow, PlanRow]]:
        """Applied or attempted actions, newest first."""
        with Session(self.engine) as db:
            q = select(ActionRow, PlanRow).where(ActionRow.plan_id == PlanRow.id,
                                                 ActionRow.status != "pending")
            if workload:
                q = q.where(ActionRow.workload == workload)
            q = q.order_by(ActionRow.started_at.desc(), ActionRow.seq.desc()).limit(limit)  # type: ignore[union-attr,attr-defined]
            return [(a, p) for a, p in db.exec(q)]

    # ------------------------------------------------------------------ queue, placeholders

    def queue_since(self, waiting: set[str], now: datetime) -> dict[str, datetime]:
        """First-seen times of the waiting workloads (recording new ones as ``now``);
        workloads no longer waiting leave the queue."""
        with Session(self.engine) as db:
            rows = {r.workload: r for r in db.exec(select(QueueRow))}
            for key, row in rows.items():
                if key not in waiting:
                    db.delete(row)
            for key in waiting - rows.keys():
                db.add(QueueRow(workload=key, since=now))
            db.commit()
            out = {k: r.since for k, r in rows.items() if k in waiting}
            out.update({k: now for k in waiting - rows.keys()})
            return {k: v if v.tzinfo else v.replace(tzinfo=timezone.utc) for k, v in out.items()}

    # ------------------------------------------------------------------ leader lease

    def acquire_lease(self, holder: str, *, ttl: float = 300.0, name: str = "apply",
                      now: datetime | None = None, takeover: str | None = None) -> str | None:
        """Take (or renew) the lease; return None on success, else who holds it until when.

        ``takeover`` names a holder known to be dead (its process is gone): its lease is
        taken even before it expires. One conditional UPDATE (or a guarded INSERT)
        decides, so two reconcilers racing for an expired lease cannot both win, on
        SQLite and PostgreSQL alike."""
        now = now or _utcnow()
        expires = now + timedelta(seconds=ttl)
        table = LeaseRow.__table__
        free = (table.c.holder == holder) | (table.c.expires_at < now)
        if takeover is not None:
            free = free | (table.c.holder == takeover)
        with self.engine.begin() as conn:
            taken = conn.execute(
                update(table)
                .where(table.c.name == name)
                .where(free)
                .values(holder=holder, expires_at=expires)
            ).rowcount
            if taken:
                return None
            try:
                with conn.begin_nested():
                    conn.execute(insert(table).values(name=name, holder=holder, expires_at=expires))
                return None
            except IntegrityError:
                row = conn.execute(select(table.c.holder, table.c.expires_at)
                                   .where(table.c.name == name)).one()
                return f"{row.holder} until {_aware(row.expires_at).isoformat()}"

    def lease_holder(self, name: str = "apply") -> str | None:
        """Who holds the lease (expired or not), or None."""
        with Session(self.engine) as db:
            row = db.get(LeaseRow, name)
            return row.holder if row else None

    def release_lease(self, holder: str, name: str = "apply") -> None:
        table = LeaseRow.__table__
        with self.engine.begin() as conn:
            conn.execute(delete(table).where(table.c.name == name, table.c.holder == holder))

    # ------------------------------------------------------------------ usage

    def accrue_usage(self, snapshot: Snapshot) -> None:
        """Extend the usage of every running job of ours up to ``snapshot.now``."""
        with Session(self.engine) as db:
            for c in snapshot.clusters:
                for j in c.jobs:
                    if not (j.workload and j.state.holds_gpus and j.started_at):
                        continue
                    row = db.get(UsageRow, (c.name, j.id))
                    if row is None:
                        row = UsageRow(cluster=c.name, job=j.id, workload=j.workload,
                                       project=j.workload.split("/", 1)[0], gpu_type=j.gpu_type,
                                       gpus=j.gpus, started_at=j.started_at, last_seen=snapshot.now)
                    row.last_seen = max(_aware(row.last_seen), snapshot.now)
                    row.gpus = j.gpus
                    db.add(row)
            db.commit()

    def usage_records(self) -> list[UsageRecord]:
        """Usage as snapshot records, one per job and calendar month (budgets are monthly)."""
        out = []
        with Session(self.engine) as db:
            for row in db.exec(select(UsageRow)):
                start, end = _aware(row.started_at), _aware(row.last_seen)
                while start < end:
                    nxt = _next_month(start)
                    stop = min(end, nxt)
                    hours = row.gpus * (stop - start).total_seconds() / 3600
                    out.append(UsageRecord(project=row.project, gpu_hours=round(hours, 6),
                                           ended_at=stop, gpu_type=row.gpu_type))
                    start = stop
        return out

    # ------------------------------------------------------------------ placeholders

    def add_placeholder(self, workload: str, cluster: str, job: str, plan_id: str) -> None:
        with Session(self.engine) as db:
            db.merge(PlaceholderRow(workload=workload, cluster=cluster, job=job, plan_id=plan_id,
                                    submitted_at=_utcnow()))
            db.commit()

    def placeholders(self) -> list[PlaceholderRow]:
        with Session(self.engine) as db:
            return list(db.exec(select(PlaceholderRow)))

    def drop_placeholder(self, workload: str, cluster: str, job: str | None = None) -> None:
        """Forget a placeholder; with ``job``, only if it still names that job (a newer
        submission of the workload may have replaced it since it was judged)."""
        with Session(self.engine) as db:
            row = db.get(PlaceholderRow, (workload, cluster))
            if row is not None and (job is None or row.job == job):
                db.delete(row)
                db.commit()


    # ------------------------------------------------------------------ completions

    def record_completions(self, done: dict[tuple[str, str], str], now: datetime) -> None:
        """Remember ``{(workload, cluster): job}`` as completed (a newer job replaces an older)."""
        with Session(self.engine) as db:
            for (workload, cluster), job in sorted(done.items()):
                row = db.get(CompletionRow, (workload, cluster))
                if row is None or row.job != job:
                    db.merge(CompletionRow(workload=workload, cluster=cluster, job=job, seen_at=now))
            db.commit()

    def completions(self, workloads: set[str]) -> list[CompletionRow]:
        """The completions of ``workloads``; those of workloads gone from the specs are
        forgotten, so a workload removed and added again runs again."""
        with Session(self.engine) as db:
            keep = []
            for row in db.exec(select(CompletionRow)).all():
                if row.workload in workloads:
                    db.expunge(row)  # handed out after the commit below
                    keep.append(row)
                else:
                    db.delete(row)
            db.commit()
            return keep


    # ------------------------------------------------------------------ segments, failures

    def record_runs(self, snapshot: Snapshot, workloads: set[str]) -> None:
        """Keep every run (job and start) of ``workloads`` the snapshot shows, with its state."""
        with Session(self.engine) as db:
            for c in snapshot.clusters:
                for j in c.jobs:
                    if j.workload not in workloads or j.started_at is None:
                        continue
                    row = db.get(RunRow, (c.name, j.id, j.started_at)) or RunRow(
                        cluster=c.name, job=j.id, started_at=j.started_at, workload=j.workload,
                        state=j.state.value, last_seen=snapshot.now)
                    row.state = j.state.value
                    row.ended_at = j.ended_at or row.ended_at
                    row.time_limit = j.walltime or row.time_limit
                    row.last_seen = snapshot.now
                    db.add(row)
            db.commit()

    def progress(self, workloads: set[str]) -> list[Progress]:
        """Run time of the completed runs of each of ``workloads``; runs of workloads gone
        from the specs are forgotten (added again, a workload starts from zero)."""
        done: dict[str, list[tuple[datetime, int, int | None]]] = {}
        with Session(self.engine) as db:
            for row in db.exec(select(RunRow)).all():
                if row.workload not in workloads:
                    db.delete(row)
                    continue
                if row.state != "COMPLETED":
                    continue
                end = _aware(row.ended_at or row.last_seen)
                seconds = max(0, int((end - _aware(row.started_at)).total_seconds()))
                done.setdefault(row.workload, []).append((end, seconds, row.time_limit))
            db.commit()
        out = []
        for workload, runs in sorted(done.items()):
            runs.sort()
            out.append(Progress(workload=workload, elapsed_seconds=sum(r[1] for r in runs),
                                segments=len(runs), last_seconds=runs[-1][1],
                                last_limit_seconds=runs[-1][2]))
        return out

    def record_endings(self, endings: list[tuple[str, str, datetime, str | None, bool, int]],
                       *, fresh_after: int) -> None:
        """Update failure streaks from ended jobs: ``(workload, job, ended_at, exit code,
        failed, seconds it ran)``. A failure newer than the streak's adds to it (or starts a
        new one if it ran ``fresh_after`` seconds or more); a newer success ends it."""
        with Session(self.engine) as db:
            for workload, job, ended, code, failed, ran in sorted(endings, key=lambda e: e[2]):
                row = db.get(FailureRow, workload)
                if row is not None and (row.job == job or _aware(row.ended_at) >= ended):
                    continue
                if not failed:
                    if row is not None:
                        db.delete(row)
                        db.flush()
                    continue
                count = 1 if row is None or ran >= fresh_after else row.count + 1
                db.merge(FailureRow(workload=workload, count=count, job=job, ended_at=ended,
                                    exit_code=code))
                db.flush()
            db.commit()

    def failures(self, workloads: set[str]) -> list[Failure]:
        with Session(self.engine) as db:
            rows = [r for r in db.exec(select(FailureRow)).all() if r.workload in workloads]
            return [Failure(workload=r.workload, count=r.count, job=r.job,
                            ended_at=_aware(r.ended_at), exit_code=r.exit_code)
                    for r in sorted(rows, key=lambda r: r.workload)]


def _sqlite_foreign_keys(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    """SQLite ignores foreign keys unless asked; ask, so it fails where PostgreSQL would."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)  # SQLite drops the zone


def _next_month(dt: datetime) -> datetime:
    first = dt.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return first.replace(year=first.year + 1, month=1) if first.month == 12 else first.replace(month=first.month + 1)
