"""What the store remembers for scheduling, between observations: when each workload
entered the queue (older goes first), the jobs we submitted that the clusters may not
show yet (placeholders), workloads that completed after their job was forgotten, and
failure streaks (retry backoff). The runs of our jobs (usage, segment progress) are in
store/runs.py.

Written by observe, apply and watch from what they see; never by ``cp plan``, which
only reads (a plan is a what-if, at any ``--now``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from adapters.base import TEMPORARY
from controlplane.store.database import Database
from controlplane.store.tables import (
    ActionRow,
    CompletionRow,
    FailureRow,
    PlaceholderRow,
    QueueRow,
    RunRow,
)
from controlplane.store.tables import aware as _aware
from solvers.sitepolicy.backoff import FAILED_STATES
from specs.actions import ReasonCode
from specs.snapshot import Failure, Job, JobState, Refusal

_Row = TypeVar("_Row", ActionRow, RunRow)


class SchedulingState:
    """The store's scheduling memory (a part of :class:`~controlplane.store.Store`)."""

    db: Database
    clock: Callable[[], datetime]  # when things happen (Store: the wall clock, or --now)

    def queue_times(
        self,
        waiting: set[str],
        now: datetime,
        *,
        record: bool,
        entered: Mapping[str, datetime] | None = None,
    ) -> dict[str, datetime]:
        """First-seen times of the waiting workloads; one not seen before entered at ``now``
        (or, in ``entered``, when its lost job did; or when the job a preemption stopped
        did, :func:`_preempted_places`: it keeps its place).
        With ``record``, new ones are remembered and workloads no longer waiting leave the
        queue; without, nothing is written (a plan of a branch must not queue its
        unmerged workloads)."""
        with self.db.session() as db:
            rows = {r.workload: _aware(r.since) for r in db.exec(select(QueueRow))}
            entered = {**_preempted_places(db, waiting - rows.keys()), **(entered or {})}
            if record:
                for key in rows.keys() - waiting:
                    db.delete(db.get(QueueRow, key))
                for key in waiting - rows.keys():
                    db.add(QueueRow(workload=key, since=(entered or {}).get(key, now)))
                try:
                    db.commit()
                except IntegrityError:  # another reconciler queued one first: take its times
                    db.rollback()
                    rows = {r.workload: _aware(r.since) for r in db.exec(select(QueueRow))}
        return {k: rows.get(k, (entered or {}).get(k, now)) for k in waiting}

    def add_placeholder(self, workload: str, cluster: str, job: str, plan_id: str) -> None:
        with self.db.session() as db:
            db.merge(
                PlaceholderRow(
                    workload=workload,
                    cluster=cluster,
                    job=job,
                    plan_id=plan_id,
                    submitted_at=self.clock(),
                )
            )
            db.commit()

    def placeholders(self) -> list[PlaceholderRow]:
        with self.db.session() as db:
            return list(db.exec(select(PlaceholderRow)))

    def running_on(self, cluster: str) -> dict[str, int]:
        """Workloads whose job ran on ``cluster`` when last seen (a run without an end),
        with the GPUs it held."""
        with self.db.session() as db:
            running = db.exec(
                select(RunRow.workload, RunRow.gpus).where(
                    RunRow.cluster == cluster, col(RunRow.ended_at).is_(None)
                )
            )
            known: dict[str, int] = {}
            for workload, gpus in running:
                known[workload] = max(known.get(workload, 0), gpus)
            return known

    def carry_renames(self, renamed: Mapping[str, str]) -> None:
        """Projects renamed in the specs (spec.renamedFrom): what is recorded under their
        workloads' old names (``renamed``: old -> new) is the new names' from now on, so
        the specs may drop renamedFrom once no job started under an old name runs. Where
        both names have a record, the earlier queue time stands, the newer completion or
        failure. A completion's or failure's spec digest is dropped: it is the old name's
        spec's, which no spec of the new name can equal (so it would read as an edit, and
        completed work run again). History is not rewritten (it is chained): it keeps the
        names of its day."""
        if not renamed:
            return
        olds = list(renamed)
        with self.db.session() as db:
            for run in db.exec(select(RunRow).where(col(RunRow.workload).in_(olds))):
                run.workload = renamed[run.workload]
                run.project = run.workload.partition("/")[0]
                db.add(run)
            for row in db.exec(
                select(PlaceholderRow).where(col(PlaceholderRow.workload).in_(olds))
            ):
                db.add(PlaceholderRow(**{**row.model_dump(), "workload": renamed[row.workload]}))
                db.delete(row)
            for q in db.exec(select(QueueRow).where(col(QueueRow.workload).in_(olds))):
                queued = db.get(QueueRow, renamed[q.workload])
                if queued is None:
                    db.add(QueueRow(workload=renamed[q.workload], since=q.since))
                else:
                    queued.since = min(queued.since, q.since)
                db.delete(q)
            for done in db.exec(select(CompletionRow).where(col(CompletionRow.workload).in_(olds))):
                known = db.get(CompletionRow, (renamed[done.workload], done.cluster))
                if known is None or known.seen_at < done.seen_at:
                    moved = {"workload": renamed[done.workload], "spec_digest": None}
                    db.merge(CompletionRow(**{**done.model_dump(), **moved}))
                db.delete(done)
            for f in db.exec(select(FailureRow).where(col(FailureRow.workload).in_(olds))):
                streak = db.get(FailureRow, renamed[f.workload])
                if streak is None or streak.ended_at < f.ended_at:
                    moved = {"workload": renamed[f.workload], "spec_digest": None}
                    db.merge(FailureRow(**{**f.model_dump(), **moved}))
                db.delete(f)
            try:
                db.commit()
            except IntegrityError:  # another reconciler carried them over first
                db.rollback()

    def clusters_with_work(self) -> set[str]:
        """The clusters where the store knows work of ours that may still be there: a run
        not seen ending, or a job submitted and not seen starting."""
        with self.db.session() as db:
            runs = db.exec(select(RunRow.cluster).where(col(RunRow.ended_at).is_(None)))
            placed = db.exec(select(PlaceholderRow.cluster))
            return set(runs) | set(placed)

    def forget_cluster(self, cluster: str) -> tuple[int, int]:
        """The cluster is gone for good: its runs not seen ending end when last seen (their
        usage stands), and its placeholders go. How many of each."""
        with self.db.session() as db:
            runs = list(
                db.exec(
                    select(RunRow).where(RunRow.cluster == cluster, col(RunRow.ended_at).is_(None))
                )
            )
            for row in runs:
                row.ended_at, row.state = row.last_seen, "FORGOTTEN"
                db.add(row)
            placed = list(db.exec(select(PlaceholderRow).where(PlaceholderRow.cluster == cluster)))
            for ph in placed:
                db.delete(ph)
            db.commit()
            return len(runs), len(placed)

    def drop_placeholder(self, workload: str, cluster: str, job: str) -> None:
        """Forget the placeholder of ``job``."""
        with self.db.session() as db:
            row = db.get(PlaceholderRow, (workload, cluster, job))
            if row is not None:
                db.delete(row)
                db.commit()

    def record_completions(
        self,
        done: dict[tuple[str, str], tuple[str, str | None, datetime | None]],
        now: datetime,
    ) -> None:
        """Remember ``{(workload, cluster): (job, spec digest, end)}`` as completed (a newer
        job replaces an older), with the time it ended (``now`` if the cluster did not
        say)."""
        with self.db.session() as db:
            for (workload, cluster), (job, digest, ended) in sorted(done.items()):
                row = db.get(CompletionRow, (workload, cluster))
                if row is None or row.job != job or (digest and row.spec_digest != digest):
                    db.merge(
                        CompletionRow(
                            workload=workload,
                            cluster=cluster,
                            job=job,
                            seen_at=ended or now,
                            spec_digest=digest,
                        )
                    )
            db.commit()

    def completions(self, workloads: set[str], *, prune: bool) -> list[CompletionRow]:
        """The completions of ``workloads``; with ``prune``, those of workloads gone from
        the specs are forgotten, so a workload removed and added again runs again."""
        with self.db.session() as db:
            keep = []
            for row in db.exec(select(CompletionRow)).all():
                if row.workload in workloads:
                    db.expunge(row)  # handed out after the commit below
                    keep.append(row)
                elif prune:
                    db.delete(row)
            db.commit()
            return keep

    def record_endings(self, ended: list[Job], *, fresh_after: int) -> None:
        """Update failure streaks from ended jobs of ours (with an end time). A failure
        newer than the streak's adds to it (or starts a new one if it ran ``fresh_after``
        seconds or more, or ran another version of the spec); a newer success ends it."""
        with self.db.session() as db:
            timed = [(_aware(j.ended_at), j) for j in ended if j.ended_at is not None]
            for at, j in sorted(timed, key=lambda pair: pair[0]):
                assert j.workload is not None
                row = db.get(FailureRow, j.workload)
                if row is not None and (row.job == j.id or _aware(row.ended_at) >= at):
                    continue
                if j.state not in FAILED_STATES:
                    if row is not None:
                        db.delete(row)
                        db.flush()
                    continue
                ran = int((at - j.started_at).total_seconds()) if j.started_at else 0
                fresh = row is None or ran >= fresh_after or row.spec_digest != j.spec_digest
                db.merge(
                    FailureRow(
                        workload=j.workload,
                        count=1 if fresh or row is None else row.count + 1,
                        job=j.id,
                        ended_at=at,
                        exit_code=j.exit_code,
                        spec_digest=j.spec_digest,
                        state=j.state.value,
                    )
                )
                db.flush()
            db.commit()

    def failures(self, workloads: set[str]) -> list[Failure]:
        with self.db.session() as db:
            rows = [r for r in db.exec(select(FailureRow)).all() if r.workload in workloads]
            return [
                Failure(
                    workload=r.workload,
                    count=r.count,
                    job=r.job,
                    ended_at=_aware(r.ended_at),
                    exit_code=r.exit_code,
                    spec_digest=r.spec_digest,
                    state=_state(r.state),
                )
                for r in sorted(rows, key=lambda r: r.workload)
            ]

    def refusals(self, active: Mapping[tuple[str, str], datetime | None]) -> list[Refusal]:
        """Of the ``active`` jobs ((cluster, id) -> when it entered the cluster's queue, if
        known), those the latest applies failed to evict (preempt, cancel, move, a resize
        that takes replicas away), with how many failed in a row: an eviction that
        succeeded ends the streak. Failures a rerun may get past (the cluster did not
        answer) and those before the job entered (an id the cluster gave again) are none."""
        with self.db.session() as db:
            failed = db.exec(  # few: one scan for them all
                select(ActionRow).where(
                    ActionRow.status == "failed",
                    ActionRow.op != "submit",
                    col(ActionRow.finished_at).is_not(None),
                )
            ).all()
            failed = [r for r in failed if _evicts(r, active) and TEMPORARY not in r.message]
            done = _where_in(
                db,
                ActionRow,
                ActionRow.job,
                sorted({r.job or "" for r in failed}),
                ActionRow.status == "done",
                ActionRow.op != "submit",
                col(ActionRow.finished_at).is_not(None),
            )
            rows = [*failed, *(r for r in done if _evicts(r, active))]
        streaks: dict[tuple[str, str], Refusal] = {}
        for row in sorted(rows, key=lambda r: (_finished(r), r.id or 0)):
            key = (row.cluster, row.job or "")
            if row.status == "done":
                streaks.pop(key, None)
                continue
            count = streaks[key].count + 1 if key in streaks else 1
            streaks[key] = Refusal(
                cluster=row.cluster,
                job=key[1],
                op=row.op,
                count=count,
                at=_finished(row),
                message=row.message,
            )
        return [streaks[k] for k in sorted(streaks)]


# a resize for these takes replicas away (others grow the job)
_DISTURBING = frozenset(
    c.value
    for c in (
        ReasonCode.RECLAIM,
        ReasonCode.PRIORITY,
        ReasonCode.CONSOLIDATE,
        ReasonCode.ELASTIC_SHRINK,
        ReasonCode.PRUNE,
        ReasonCode.SPEC_CHANGED,
        ReasonCode.FAN_OUT_LOSER,
    )
)


def _evicts(row: ActionRow, active: Mapping[tuple[str, str], datetime | None]) -> bool:
    """An eviction of one of the ``active`` jobs, since it entered the cluster's queue."""
    key = (row.cluster, row.job or "")
    if key not in active or (row.op == "resize" and row.reason_code not in _DISTURBING):
        return False
    since = active[key]
    return since is None or _finished(row) >= since


def _finished(row: ActionRow) -> datetime:
    assert row.finished_at is not None  # asked for so
    return _aware(row.finished_at)


def _state(value: str | None) -> JobState | None:
    """A stored job state, if it still names one (rows before schema 8 have none)."""
    try:
        return JobState(value) if value is not None else None
    except ValueError:
        return None


def _preempted_places(db: Session, workloads: set[str]) -> dict[str, datetime]:
    """Of ``workloads`` (those entering the queue), those whose latest action done was a
    preemption, and when the job it stopped entered the cluster's queue (its submit's
    time, else its first run's start): losing its GPUs was not its doing, and it keeps its
    place (KAI's evicted pod keeps its pod group, and its age)."""
    latest: dict[str, ActionRow] = {}
    done = _where_in(
        db, ActionRow, ActionRow.workload, sorted(workloads), ActionRow.status == "done"
    )
    for row in done:
        if row.op == "preempt" and _after(row, latest.get(row.workload)):
            latest[row.workload] = row
    if not latest:
        return {}
    runs = _where_in(db, RunRow, RunRow.job, sorted({r.job for r in latest.values() if r.job}))
    places = {}
    for key, stop in latest.items():
        if any(_after(r, stop) for r in done if r.workload == key):
            continue  # acted on since: a new job, or a cancel
        made = [r.finished_at for r in done if r.job == stop.job and r.op != "preempt"]
        ran = [r.started_at for r in runs if (r.cluster, r.job) == (stop.cluster, stop.job)]
        times = [t for t in (made or ran) if t is not None]
        if times:
            places[key] = _aware(min(times))
    return places


_CHUNK = 500  # values per statement: databases limit a statement's parameters


def _where_in(
    db: Session, table: type[_Row], column: Any, values: list[str], *where: Any
) -> list[_Row]:
    """The rows of ``table`` whose ``column`` is one of ``values`` (and ``where``), asked
    for ``_CHUNK`` values at a time."""
    rows: list[_Row] = []
    for i in range(0, len(values), _CHUNK):
        rows += db.exec(select(table).where(col(column).in_(values[i : i + _CHUNK]), *where)).all()
    return rows


def _after(row: ActionRow, other: ActionRow | None) -> bool:
    """``row`` was done after ``other`` (None: after nothing)."""
    return other is None or _done_at(row) > _done_at(other)


def _done_at(row: ActionRow) -> tuple[datetime, int]:
    return (_aware(row.finished_at) if row.finished_at else _NEVER, row.id or 0)


_NEVER = datetime.min.replace(tzinfo=UTC)
