"""Roll-ups: the usage of old runs, summed once, so that a plan's read of the history stops
growing with it.

Every plan decays the usage of every run its store ever recorded (fair share), and only
this month's counts against budgets. The usage of the runs that ended before the start of
the current month (``through``) is, for a project with half-life ``H``,
``2^-((now - through) / H)`` times its value decayed to ``through``: one number per price
group (cluster, GPU type, price), whatever ``now`` is. A roll-up keeps those numbers, and
a plan reads them, as records that decay from ``through``, in place of the runs.

A roll-up holds for its project, half-life and ``through`` while the runs it counts are as
they were: each is marked ``rolled``, whatever changes a run clears the mark, and the
roll-up keeps how many runs it counts (a run added, or moved to another project by a
rename, changes the count). One that no longer holds is not read (the runs are), and a
recorded observation makes it again (so does the first of each month, for the new
``through``); runs are never removed, so nothing is lost. A half-life changed in the specs
has no roll-up until then either.

Sums in another order than the runs': the usage may differ from the runs' own in the last
bits of a float (1e-16 of it).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import case, func, text
from sqlmodel import Session, col, delete, select, update

from controlplane.store import pieces, pricebook
from controlplane.store.database import chunks
from controlplane.store.tables import RollupRow, RunRow, aware
from solvers.sitepolicy.usage import decayed_gpu_hours
from specs.snapshot import JobRun, UsageRecord

if TYPE_CHECKING:
    from controlplane.store.runs import Run

Group = tuple[str, str | None, float | None]  # cluster, GPU type, price
_PG_ROLLUPS = 0x63705F726F6C  # "cp_rol": the advisory lock a rebuild of roll-ups takes


def through_for(now: datetime) -> datetime:
    """The start of ``now``'s month (UTC): the runs that ended before it count towards no
    budget any more (a budget is this month's)."""
    at = now.astimezone(UTC)
    return datetime(at.year, at.month, 1, tzinfo=UTC)


def holding(
    db: Session, half_lives: Mapping[str, int], through: datetime, book: str
) -> dict[str, int]:
    """The projects whose roll-up at ``through`` holds for their half-life and the price
    book of digest ``book``: project -> the number of runs it stands for."""
    rows = db.exec(
        select(RunRow.project, func.count(), func.sum(case((col(RunRow.rolled), 0), else_=1)))
        .where(col(RunRow.ended_at) < through)
        .group_by(col(RunRow.project))
    ).all()
    ended = {project: (count, unrolled) for project, count, unrolled in rows}
    counted = db.exec(
        select(RollupRow.project, RollupRow.half_life, func.max(RollupRow.runs))
        .where(RollupRow.through == through, RollupRow.book == book)
        .group_by(col(RollupRow.project), col(RollupRow.half_life))
    ).all()
    return {
        project: runs
        for project, half_life, runs in counted
        if half_lives.get(project) == half_life and ended.get(project) == (runs, 0)
    }


def counted(db: Session, seen: Mapping[str, Iterable[JobRun]], through: datetime) -> set[str]:
    """The projects of the runs ``seen`` reports that a roll-up counts (stored, rolled): a
    read-only plan reads those projects' runs, or it would count such a run twice."""
    early: dict[str, set[str]] = defaultdict(set)  # cluster -> jobs started before then
    for cluster, runs in seen.items():
        for run in runs:
            if aware(run.started_at) < through:
                early[cluster].add(run.job)
    projects: set[str] = set()
    for cluster, jobs in sorted(early.items()):
        for chunk in chunks(jobs):
            projects.update(
                db.exec(
                    select(RunRow.project).where(
                        col(RunRow.cluster) == cluster,
                        col(RunRow.job).in_(chunk),
                        col(RunRow.rolled),
                    )
                )
            )
    return projects


def records(
    db: Session, projects: Mapping[str, int], half_lives: Mapping[str, int], through: datetime
) -> list[UsageRecord]:
    """The roll-ups of ``projects`` as usage records: each decays from ``through``."""
    if not projects:
        return []
    rows = db.exec(
        select(RollupRow)
        .where(RollupRow.through == through, col(RollupRow.project).in_(sorted(projects)))
        .order_by(col(RollupRow.project), col(RollupRow.id))
    ).all()
    return [
        UsageRecord(
            project=r.project,
            gpu_hours=r.gpu_hours,
            ended_at=through,
            gpu_type=r.gpu_type,
            cluster=r.cluster,
            price=r.price,
        )
        for r in rows
        if r.half_life == half_lives.get(r.project) and r.gpu_hours > 0
    ]


def roll_up(
    db: Session,
    project: str,
    half_life: int,
    through: datetime,
    runs: int,
    pieces: Iterable[UsageRecord],
    book: str,
) -> None:
    """Make ``project``'s roll-up at ``through`` from the usage ``pieces`` of its ``runs``
    runs that ended before then, and mark those runs as counted in it (the caller holds
    the lease: nothing changes them meanwhile)."""
    groups: dict[Group, float] = defaultdict(float)
    for piece in pieces:
        group = (piece.cluster or "", piece.gpu_type, piece.price)
        groups[group] += decayed_gpu_hours([piece], through, half_life)
    db.exec(delete(RollupRow).where(col(RollupRow.project) == project))
    for (cluster, gpu_type, price), hours in sorted(groups.items(), key=_group_order) or [
        (("", None, None), 0.0)  # runs without GPUs: a roll-up of nothing, which holds
    ]:
        db.add(
            RollupRow(
                project=project,
                half_life=half_life,
                through=through,
                cluster=cluster,
                gpu_type=gpu_type,
                price=price,
                gpu_hours=hours,
                runs=runs,
                book=book,
            )
        )
    db.exec(
        update(RunRow)
        .where(col(RunRow.project) == project, col(RunRow.ended_at) < through)
        .values(rolled=True)
    )


def roll_up_all(
    db: Session,
    rows: Iterable[Run],
    book: pricebook.Book,
    half_lives: Mapping[str, int],
    through: datetime,
    held: set[str],
) -> None:
    """Make the roll-ups at ``through`` of the projects of ``half_lives`` whose runs
    ``rows`` holds in full (no roll-up of theirs ``held``) and of which some ended before
    then; committed."""
    old: dict[str, list[Run]] = {}
    for row in rows:
        if row.ended_at is not None and row.ended_at < through and row.project not in held:
            old.setdefault(row.project, []).append(row)
    todo = {p: runs for p, runs in old.items() if p in half_lives}
    if not todo:
        return
    if db.get_bind().dialect.name == "postgresql":  # two rebuilds at once: one after the other
        db.connection().execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_ROLLUPS})
    for project, runs in sorted(todo.items()):
        usage = (piece for run in runs if run.gpus > 0 for piece in pieces.monthly(run, book))
        roll_up(db, project, half_lives[project], through, len(runs), usage, digest(book))
    db.commit()


def digest(book: pricebook.Book) -> str:
    """A price book's digest: a roll-up holds for the book it was made with."""
    return hashlib.sha256(pricebook.dumps(book).encode()).hexdigest()


def _group_order(item: tuple[Group, float]) -> tuple[str, str, float]:
    (cluster, gpu_type, price), _ = item
    return cluster, gpu_type or "", price if price is not None else -1.0
