"""The runs of our jobs: the facts usage, budgets and checkpoint progress come from.

A run is one stretch of a job holding its GPUs: its start, its end (or the last time it
was seen running), how many GPUs, of which type. Usage is GPUs x that stretch, so it is
exact to the second however rarely anyone observes: a job that started and ended between
two observations is reported by the cluster's accounting (Slurm's ``sacct``, the
simulator's records) and counted whole, and a job seen running at 01:00 and found ended
at 06:00 counts until its real end, not until 01:00.

Written by observations that record; a read-only plan merges what it sees in memory, as
if recorded, and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, bindparam, text
from sqlmodel import Session, col, or_, select

from controlplane.store import pieces, pricebook, rollups
from controlplane.store.database import Database, chunks, in_chunks
from controlplane.store.tables import MetaRow, RunRow
from controlplane.store.tables import aware as _aware
from solvers.segments import SegmentRun, progress_of
from specs.snapshot import JobRun, Progress, UsageRecord

Seen = Mapping[str, Iterable[JobRun]]  # cluster -> runs an observation reports
STOPPED = "STOPPED"  # a run our apply cancelled, until an observation says how it ended
# an ended job as a listing asks for its run: cluster, job id, workload, when it ended
Ended = tuple[str, str, str | None, datetime | None]


class Runs:
    """The runs table (a part of :class:`~controlplane.store.Store`)."""

    db: Database
    clock: Callable[[], datetime]  # when things happen (Store: the wall clock, or --now)

    def accounting_since(self, cluster: str) -> datetime | None:
        """Until when the runs of ``cluster`` have been recorded (None: never)."""
        with self.db.session() as db:
            row = db.get(MetaRow, f"accounting:{cluster}")
            return datetime.fromisoformat(row.value) if row is not None else None

    def record_runs(
        self,
        seen: Seen,
        now: datetime,
        *,
        complete: Iterable[str] | None = None,
        prices: Mapping[tuple[str, str], float] | None = None,
    ) -> None:
        """Merge the runs observations report; the accounting of each cluster in
        ``complete`` (default: all of ``seen``) is then recorded up to ``now``. ``prices``:
        (cluster, GPU type) -> cost per GPU-hour, kept with each run of those."""
        complete = set(seen if complete is None else complete)
        reported = {(c, r.job, _aware(r.started_at)) for c, runs in seen.items() for r in runs}
        # what this may change: the runs still open, and those reported (none started
        # before the earliest of them; a day earlier, for a time stored with another
        # zone's wall clock); the rest of the history stays as recorded, unread
        changing: ColumnElement[bool] = col(RunRow.ended_at).is_(None)
        if reported:
            since = min(start for _, _, start in reported).astimezone(UTC) - timedelta(days=1)
            changing = or_(changing, col(RunRow.started_at) >= since)
        with self.db.session() as db:
            for row in _merged(list(db.exec(select(RunRow).where(changing))), seen, now):
                key = (row.cluster, row.job, _aware(row.started_at))
                if row.ended_at is None or key in reported:  # a past run keeps its price
                    row.price = (prices or {}).get((row.cluster, row.gpu_type or ""), row.price)
                    row.rolled = False  # a roll-up that counted it no longer holds
                if row.ended_at is None and row.cluster in complete and key not in reported:
                    # its job is gone unreported (a deleted Kubernetes job, a Slurm job
                    # forgotten without accounting): it ended after it was last seen
                    row.ended_at = row.last_seen
                db.merge(row)
            for cluster in complete:
                db.merge(MetaRow(key=f"accounting:{cluster}", value=now.isoformat()))
            if prices:
                known = db.get(MetaRow, pricebook.KEY)
                book = pricebook.loads(known.value if known is not None else None)
                if (changed := pricebook.noted(book, prices, now)) is not book:
                    db.merge(MetaRow(key=pricebook.KEY, value=pricebook.dumps(changed)))
            db.commit()

    def stopped(self, cluster: str, job: str) -> None:
        """Our apply cancelled (or preempted) ``job``: its open run ends now, unless an
        observation still sees it run (then the cluster's word stands). So a cluster
        removed from the specs right after does not keep it running for ever (no
        observation would see it end)."""
        with self.db.session() as db:
            q = select(RunRow).where(
                RunRow.cluster == cluster, RunRow.job == job, col(RunRow.ended_at).is_(None)
            )
            for row in db.exec(q):
                row.ended_at, row.state = self.clock(), STOPPED
                db.add(row)
            db.commit()

    def usage_records(
        self,
        now: datetime,
        seen: Seen | None = None,
        half_lives: Mapping[str, int] | None = None,
    ) -> list[UsageRecord]:
        """Usage as snapshot records, one per run and calendar month (budgets are monthly).
        With ``seen``, the runs it holds count as if recorded (a read-only plan). Given each
        project's fair-share ``half_lives`` (seconds), the runs that ended before ``now``'s
        month are read as their roll-ups where those hold, and a recorded read
        (no ``seen``) makes the ones that do not (store/rollups.py)."""
        half_lives = half_lives or {}
        through = rollups.through_for(now)
        with self.db.session() as db:  # one read: the roll-ups held and the runs beside them
            if db.get_bind().dialect.name == "postgresql":  # one snapshot for all statements
                db.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            known = db.get(MetaRow, pricebook.KEY)
            book = pricebook.loads(known.value if known is not None else None)
            held: dict[str, int] = {}
            if half_lives:
                held = rollups.holding(db, half_lives, through, rollups.digest(book))
            if held and seen:  # a run seen again that a roll-up counts: its project's read
                for project in rollups.counted(db, seen, through):
                    held.pop(project, None)
            rolled = rollups.records(db, held, half_lives, through)
            rows = _all_runs(db, (through, set(held)) if held else None)
        if seen is not None:
            rows = _merged_runs(rows, seen, now)
        made = [record for row in rows if row.gpus > 0 for record in pieces.monthly(row, book)]
        if seen is None and half_lives:  # recorded: the roll-ups that do not hold, made
            with self.db.session() as db:
                rollups.roll_up_all(db, rows, book, half_lives, through, set(held))
        return rolled + made

    def retire_runs(self, workloads: set[str]) -> None:
        """The runs of workloads no longer in the specs stop counting as their progress
        (added again, a workload starts its segments from zero); they stay usage."""
        with self.db.session() as db:
            for row in db.exec(select(RunRow).where(RunRow.retired == False)):  # noqa: E712
                if row.workload not in workloads:
                    row.retired = True
                    db.add(row)
            db.commit()

    def progress(
        self,
        workloads: set[str],
        *,
        now: datetime,
        seen: Seen | None = None,
        prices: Mapping[tuple[str, str], float] | None = None,
    ) -> list[Progress]:
        """Run time of the completed runs of each of ``workloads`` (checkpoint segments),
        added up as a plan reads a snapshot's ended jobs (:func:`solvers.segments.progress_of`:
        of a fan-out round, only the winner's). A job resized in place has a run per
        stretch at one size (all but the last ended RUNNING: the job went on): its
        stretches count together, as one segment, when its last one completed. ``prices``:
        (cluster, GPU type) -> cost per GPU-hour, for runs ``seen`` holds that were never
        recorded with theirs."""
        if not workloads:
            return []
        pieces: dict[tuple[str, str], list[Run]] = {}
        for row in self._rows(now, seen, workloads):
            if not row.retired:
                pieces.setdefault((row.cluster, row.job), []).append(row)
        done: dict[str, list[SegmentRun]] = {}
        for (cluster, job), stretches in pieces.items():
            stretches.sort(key=lambda r: _aware(r.started_at))
            last = stretches[-1]
            if last.state != "COMPLETED":
                continue
            went_on = [last]  # and the stretches it went on from (a requeue started afresh)
            for r in reversed(stretches[:-1]):
                if r.state != "RUNNING":
                    break
                went_on.append(r)
            price = (prices or {}).get((cluster, last.gpu_type or ""), last.price)
            run = SegmentRun(
                cluster=cluster,
                job=job,
                started_at=_aware(went_on[-1].started_at),
                ended_at=_aware(last.ended_at or last.last_seen),
                seconds=sum(_seconds(r) for r in went_on),
                limit=last.time_limit,
                plan_id=last.plan_id,
                cost=last.gpus * (price or 0.0),
            )
            done.setdefault(last.workload, []).append(run)
        return [p for workload, runs in sorted(done.items()) if (p := progress_of(workload, runs))]

    def first_runs(
        self, jobs: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], tuple[str | None, datetime]]:
        """(cluster, job) -> the plan that submitted it and when it first started, for the
        jobs of ``jobs`` that ran (what a completion the clusters forgot needs to judge its
        fan-out round again)."""
        return {
            key: (runs[0].plan_id, _aware(runs[0].started_at))
            for key, runs in self._runs_of(jobs).items()
        }

    def last_runs(self, jobs: Iterable[Ended]) -> dict[Ended, tuple[int, datetime, str | None]]:
        """The GPUs, start and submitting plan of each ended job's latest run (what a
        listing shows of a job the cluster forgot): of its runs of its workload that began
        by its end, since the cluster may have given its id to other jobs since."""
        asked = list(jobs)
        runs = self._runs_of((cluster, job) for cluster, job, _, _ in asked)
        out: dict[Ended, tuple[int, datetime, str | None]] = {}
        for key in asked:
            cluster, job, workload, ended = key
            mine = [
                r
                for r in runs.get((cluster, job), [])
                if r.workload == workload and (ended is None or _aware(r.started_at) <= ended)
            ]
            if mine:
                out[key] = (mine[-1].gpus, _aware(mine[-1].started_at), mine[-1].plan_id)
        return out

    def _runs_of(self, jobs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[RunRow]]:
        """(cluster, job) -> its runs, earliest first."""
        wanted = set(jobs)
        out: dict[tuple[str, str], list[RunRow]] = {}
        if not wanted:
            return out
        with self.db.session() as db:
            for where in in_chunks(RunRow.job, {job for _, job in wanted}):
                for row in db.exec(select(RunRow).where(where)):
                    if (row.cluster, row.job) in wanted:
                        out.setdefault((row.cluster, row.job), []).append(row)
        for runs in out.values():
            runs.sort(key=lambda r: _aware(r.started_at))
        return out

    def _rows(
        self, now: datetime, seen: Seen | None, workloads: set[str] | None = None
    ) -> list[Run]:
        """Every run (of ``workloads``, if given) as plain values, with those ``seen``
        reports merged in as if recorded. Read as the database's own values, not as ORM
        rows or typed columns: a plan reads the whole history, and a row object costs ~30x
        the values in it, a typed time ~3x its parse."""
        with self.db.session() as db:
            if workloads is None:
                runs = _all_runs(db, None)
            else:
                runs = [
                    Run.read(values)
                    for chunk in chunks(workloads)
                    for values in db.connection()
                    .execute(_RUNS_OF_WORKLOADS, {"names": chunk})
                    .all()
                ]
                # a run seen under one of these names may be stored under another (a
                # renamed project's job keeps its old tag): it is merged into that one, as
                # a recorded observation would merge it
                have = {(r.cluster, r.job, r.started_at) for r in runs}
                elsewhere = {
                    r.job
                    for cluster, reported in (seen or {}).items()
                    for r in reported
                    if r.workload in workloads
                    and (cluster, r.job, _aware(r.started_at)) not in have
                }
                runs += [
                    run
                    for chunk in chunks(elsewhere)
                    for values in db.connection().execute(_RUNS_OF_JOBS, {"names": chunk}).all()
                    if (run := Run.read(values)).workload not in workloads
                ]
        if seen is not None:
            runs = _merged_runs(runs, seen, now)
        return runs if workloads is None else [r for r in runs if r.workload in workloads]


def _all_runs(db: Session, skip: tuple[datetime, set[str]] | None) -> list[Run]:
    """Every run, less (``skip``) those that ended before a moment of projects whose
    roll-ups hold."""
    if skip is None:
        return [Run.read(values) for values in db.connection().execute(_ALL_RUNS).all()]
    through, projects = skip
    read = db.connection().execute(
        _RUNS_BUT_ROLLED, {"through": through, "names": sorted(projects)}
    )
    return [Run.read(values) for values in read.all()]


@dataclass(slots=True)
class Run:
    """One run, as the reads of the history use it: the row's values, its times aware."""

    cluster: str
    job: str
    started_at: datetime
    workload: str
    project: str
    state: str
    ended_at: datetime | None
    time_limit: int | None
    gpus: int
    gpu_type: str | None
    price: float | None
    plan_id: str | None
    last_seen: datetime
    retired: bool = False

    @classmethod
    def read(cls, values: Iterable[Any]) -> Run:
        """A run from the database's values of the columns of ``_RUN_FIELDS``, in order:
        times as SQLite keeps them (ISO text, UTC) or as a driver gives them."""
        run = cls(*values)
        run.started_at, run.last_seen = _time(run.started_at), _time(run.last_seen)
        run.ended_at = _time(run.ended_at) if run.ended_at is not None else None
        run.retired = bool(run.retired)  # SQLite's 0 or 1
        return run

    @classmethod
    def new(cls, cluster: str, seen: JobRun, now: datetime) -> Run:
        """A run an observation reports that was never recorded."""
        return cls(
            cluster=cluster,
            job=seen.job,
            started_at=_aware(seen.started_at),
            workload=seen.workload,
            project=seen.workload.split("/", 1)[0],
            state=seen.state.value,
            ended_at=None,
            time_limit=None,
            gpus=0,
            gpu_type=None,
            price=None,
            plan_id=None,
            last_seen=now,
        )


_RUN_FIELDS = [f.name for f in fields(Run)]
_SELECT = f"SELECT {', '.join(_RUN_FIELDS)} FROM runs"  # no value of anyone's in it
_ALL_RUNS = text(_SELECT)
_RUNS_OF_WORKLOADS = text(f"{_SELECT} WHERE workload IN :names").bindparams(
    bindparam("names", expanding=True)
)
_RUNS_OF_JOBS = text(f"{_SELECT} WHERE job IN :names").bindparams(
    bindparam("names", expanding=True)
)
_RUNS_BUT_ROLLED = text(
    f"{_SELECT} WHERE ended_at IS NULL OR ended_at >= :through OR project NOT IN :names"
).bindparams(
    bindparam("through", type_=RunRow.__table__.c.ended_at.type),  # type: ignore[attr-defined]
    bindparam("names", expanding=True),
)


def _time(value: datetime | str) -> datetime:
    """A stored time, aware: SQLite gives back the text it keeps (UTC, no zone)."""
    if isinstance(value, str):
        try:  # the zone read with the rest: a third faster than setting it after
            return datetime.fromisoformat(value + "+00:00")
        except ValueError:  # text with a zone of its own
            return _aware(datetime.fromisoformat(value))
    return _aware(value)


def _seconds(row: Run) -> int:
    end = _aware(row.ended_at or row.last_seen)
    return max(0, int((end - _aware(row.started_at)).total_seconds()))


def _merged(rows: list[RunRow], seen: Seen, now: datetime) -> list[RunRow]:
    """``rows`` updated with the runs ``seen`` reports (copies: stored rows untouched). A
    run reported without an end is running now: seen until ``now``."""
    by_run = {
        (r.cluster, r.job, _aware(r.started_at)): RunRow.model_validate(r.model_dump())
        for r in rows
    }
    for cluster, runs in seen.items():
        for run in runs:
            key = (cluster, run.job, _aware(run.started_at))
            row = by_run.get(key) or RunRow(
                cluster=cluster,
                job=run.job,
                started_at=run.started_at,
                workload=run.workload,
                project=run.workload.split("/", 1)[0],
                state=run.state.value,
                last_seen=now,
            )
            _absorb(row, run, now)
            by_run[key] = row
    return list(by_run.values())


def _merged_runs(runs: list[Run], seen: Seen, now: datetime) -> list[Run]:
    """:func:`_merged` of the plain runs a read made (its own: changed in place)."""
    by_run = {(r.cluster, r.job, r.started_at): r for r in runs}
    for cluster, reported in seen.items():
        for run in reported:
            key = (cluster, run.job, _aware(run.started_at))
            row = by_run.get(key) or Run.new(cluster, run, now)
            _absorb(row, run, now)
            by_run[key] = row
    return list(by_run.values())


def _absorb(row: RunRow | Run, run: JobRun, now: datetime) -> None:
    """What an observation reports of a run, over what was recorded of it."""
    stopping = row.state == STOPPED and run.ended_at is None  # it runs on after all
    row.state = run.state.value
    row.ended_at = run.ended_at or (None if stopping else row.ended_at)
    row.time_limit = run.time_limit or row.time_limit
    row.gpus = run.gpus or row.gpus
    row.gpu_type = run.gpu_type or row.gpu_type
    row.plan_id = run.plan_id or row.plan_id
    row.last_seen = max(_aware(row.last_seen), run.ended_at or now)
