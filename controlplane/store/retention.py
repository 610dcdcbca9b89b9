"""Retention: the oldest part of the history removed on purpose, what is left verifiable.

A store keeps every plan, action and event, so a loop left running grows it for ever.
``cp store prune`` removes a *prefix* of the history chain: its records older than a
cutoff, up to the first record that must stay, which is one
- newer than the cutoff;
- of a plan an apply may still resume (applying, failed, interrupted);
- of the plan applied last (an idle cycle names it; a late apply is checked against it).
A record is as old as the oldest record stored after it: a what-if dated ahead of the
clock goes with the records around it.
A plan goes whole, with its actions and every event of them: the cut stops before a plan
with a record beyond it. A removed plan's id, time, specs and status are kept (the
``pruned_plans`` table): the jobs tagged with it are still known as ours, its specs as
applied (a checkout behind them is still refused), and its plan file is not applied again.
Observations kept since before the cutoff go too, but for those a remaining plan was made
against.

What is left starts after a checkpoint (meta ``chain_base``: the number and hash of the
last record removed), which ``cp history --verify`` walks from: an edit, or a record
deleted, after it still shows. A checkpoint moved forward, to hide records removed from
the front, shows only against one kept elsewhere, as the head hash does at the end, so
``cp history --verify`` prints both. Runs, completions and failure streaks stay: they are
usage, budgets and what plans remember of finished work, not history.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, delete, select

from controlplane.store.chain import stamp
from controlplane.store.database import Database, in_chunks
from controlplane.store.tables import (
    ActionRow,
    EventRow,
    MetaRow,
    ObservationRow,
    PlanRow,
    PrunedPlanRow,
    aware,
)

BASE = "chain_base"  # meta key: "<number>:<hash>" of the last record removed
SEAL = "pruned_digest"  # meta key: the digest of what is kept of the plans removed
RESUMABLE = ("applying", "failed", "interrupted")
ACTED = ("applied", *RESUMABLE)


@dataclass(frozen=True)
class Pruned:
    """What a prune removed (or would, for a dry run)."""

    since: int  # the first record removed (through + 1 when none was)
    through: int  # the checkpoint: the last record removed, ever (0: none)
    plans: int
    events: int
    actions: int
    observations: int
    stopped: str | None  # why records older than the cutoff stay, if some do


@dataclass(frozen=True)
class Entry:
    """A record of the chain as the cut reads it: its number, its plan, its time."""

    seq: int
    plan: str
    at: datetime


def cut(
    records: Iterable[Entry], before: datetime, keep: Mapping[str, str]
) -> tuple[int, str | None]:
    """The last record of the longest prefix of ``records`` that may go (0: none): each
    older than ``before``, none of a plan in ``keep`` (plan -> why it stays), every plan
    in it whole. And why the prefix ends there, if a record older than ``before`` stays.

    A record is as old as the oldest after it in the chain: it was stored before them. A
    what-if dated ahead of the clock (``cp plan --now`` in a later year) goes with the
    records stored around it, instead of holding back all history after it until then."""
    ordered = sorted(records, key=lambda r: r.seq)
    last = {r.plan: r.seq for r in ordered}
    at: dict[int, datetime] = {}
    oldest: datetime | None = None  # of the records after this one
    for r in reversed(ordered):
        oldest = r.at if oldest is None else min(r.at, oldest)
        at[r.seq] = oldest
    through, reach, stop = 0, 0, None
    for r in ordered:
        if at[r.seq] >= before or r.plan in keep:
            stop = r
            break
        reach = max(reach, last[r.plan])
        if reach == r.seq:
            through = r.seq
    held = next((r for r in ordered if through < r.seq and at[r.seq] < before), None)
    if held is None:
        return through, None
    if stop is not None and stop.plan in keep:
        return through, f"record {stop.seq}: plan {stop.plan} {keep[stop.plan]}"
    newer = at[last[held.plan]] >= before
    why = (
        "has records newer than the cutoff" if newer else "shares the chain with records that stay"
    )
    return through, f"record {held.seq}: plan {held.plan} {why}"


def parse(value: str) -> tuple[int, str]:
    """A chain position as meta keeps it: ``<number>:<hash>``."""
    seq, _, digest = value.partition(":")
    return int(seq), digest


class Retention:
    """Pruning the history (a part of :class:`~controlplane.store.Store`)."""

    db: Database

    def pruned_through(self) -> int:
        """The last record a prune removed (0: none ever was)."""
        with self.db.session() as db:
            base = db.get(MetaRow, BASE)
        return parse(base.value)[0] if base is not None else 0

    def pruned_plan(self, ref: str) -> PrunedPlanRow | None:
        """What is kept of a pruned plan whose id is or begins with ``ref``, if one is."""
        with self.db.session() as db:
            begins = col(PrunedPlanRow.id).startswith(ref, autoescape=True)
            found = db.exec(select(PrunedPlanRow).where(begins).limit(2)).all()
        return found[0] if len(found) == 1 else None

    def pruned_for(self, spec_digest: str) -> bool:
        """Whether a prune removed plans of the specs of ``spec_digest``."""
        with self.db.session() as db:
            found = select(PrunedPlanRow.id).where(PrunedPlanRow.spec_digest == spec_digest)
            return db.exec(found.limit(1)).first() is not None

    def vacuum(self) -> bool:
        """SQLite: the file rewritten without the pages a prune freed, so it shrinks (it
        reuses them otherwise). False for another database (PostgreSQL's autovacuum makes
        the space reusable by itself)."""
        if self.db.engine.dialect.name != "sqlite":
            return False
        raw = self.db.engine.raw_connection()  # outside any transaction: VACUUM needs that
        try:
            raw.driver_connection.execute("VACUUM")  # type: ignore[union-attr]
        finally:
            raw.close()
        return True

    def prune(self, before: datetime, *, dry_run: bool = False) -> Pruned:
        """Remove the history older than ``before`` (see the module), in one transaction:
        an interrupted prune removes nothing. The caller holds the apply lease."""
        with self.db.session() as db:
            # the head locked (PostgreSQL; SQLite's write lock is the transaction's): the
            # chain grows by nothing meanwhile
            db.exec(select(MetaRow).where(MetaRow.key == "chain_head").with_for_update()).first()
            plans = db.exec(
                select(PlanRow.id, PlanRow.chain_seq, PlanRow.created_at, PlanRow.status).where(
                    col(PlanRow.chain_seq).is_not(None)
                )
            ).all()
            made_against = db.exec(select(PlanRow.id, PlanRow.observed_digest)).all()
            events = db.exec(select(EventRow.plan_id, EventRow.chain_seq, EventRow.at)).all()
            entries = [Entry(seq or 0, pid, aware(at)) for pid, seq, at, _ in plans]
            entries += [Entry(seq, pid, aware(at)) for pid, seq, at in events]
            through, stopped = cut(entries, before, _kept(db, plans))
            base = db.get(MetaRow, BASE)
            known = parse(base.value)[0] if base is not None else 0
            gone = {e.plan for e in entries if e.seq <= through}
            # an observation a remaining plan was made against stays: a later plan that saw
            # the same digest points to the row kept when it was first seen
            needed = {digest for pid, digest in made_against if pid not in gone}
            old = select(ObservationRow.digest).where(col(ObservationRow.kept_at) < before)
            unused = set(db.exec(old)) - needed
            pruned = Pruned(
                since=known + 1,
                through=max(through, known),
                plans=len(gone),
                events=sum(1 for _, seq, _ in events if seq <= through),
                actions=_count(db, ActionRow, gone),
                observations=len(unused),
                stopped=stopped,
            )
            if dry_run:
                return pruned
            if gone:
                self._remove(db, gone, through)
            for where in in_chunks(ObservationRow.digest, unused):
                db.exec(delete(ObservationRow).where(where))
            db.commit()
            return pruned

    def _remove(self, db: Session, gone: set[str], through: int) -> None:
        """Records 1..``through``, the plans ``gone``, removed; what is kept of them kept."""
        last = _hash_of(db, through)
        for where in in_chunks(PlanRow.id, gone):
            for pid, created_at, spec_digest, status in db.exec(
                select(PlanRow.id, PlanRow.created_at, PlanRow.spec_digest, PlanRow.status).where(
                    where
                )
            ):
                db.add(
                    PrunedPlanRow(
                        id=pid, created_at=created_at, spec_digest=spec_digest, status=status
                    )
                )
        for table in (EventRow, ActionRow):  # before their plans: they refer to them
            for where in in_chunks(table.plan_id, gone):
                db.exec(delete(table).where(where))
        for where in in_chunks(PlanRow.id, gone):
            db.exec(delete(PlanRow).where(where))
        db.merge(MetaRow(key=BASE, value=f"{through}:{last}"))
        db.flush()
        db.merge(MetaRow(key=SEAL, value=_sealed(db)))


def pruned_problem(db: Session) -> str | None:
    """What is kept of the plans prunes removed, if it is not as the last prune left it
    (it says which jobs are ours, which specs were applied): the first problem, or None."""
    seal = db.get(MetaRow, SEAL)
    have = _sealed(db)
    if seal is None:
        empty = have == _digest([])
        return None if empty else "pruned plans are recorded, but no prune sealed them"
    if seal.value != have:
        return (
            "the plans prunes removed (pruned_plans) are not as the last prune left them: "
            "a row was edited, added or removed"
        )
    return None


def _sealed(db: Session) -> str:
    rows = db.exec(
        select(
            PrunedPlanRow.id,
            PrunedPlanRow.created_at,
            PrunedPlanRow.spec_digest,
            PrunedPlanRow.status,
        )
    ).all()
    return _digest(rows)


def _digest(rows: Iterable[tuple[str, datetime, str, str]]) -> str:
    lines = sorted(f"{pid}|{stamp(at)}|{spec}|{status}" for pid, at, spec, status in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _kept(db: Session, plans: Iterable[tuple[str, Any, Any, str]]) -> dict[str, str]:
    """Plans that stay whatever their age, and why."""
    keep: dict[str, str] = {}
    for pid, _, _, status in plans:
        if status in RESUMABLE:
            keep[pid] = f"is {status}: its apply may be resumed"
    latest = db.exec(
        select(EventRow.plan_id)
        .where(col(EventRow.seq).is_(None), col(EventRow.status).in_(ACTED))
        .order_by(col(EventRow.chain_seq).desc())
        .limit(1)
    ).first()
    if latest is None:  # a store from before status events: by when plans were made
        latest = db.exec(
            select(PlanRow.id)
            .where(col(PlanRow.status).in_(ACTED))
            .order_by(col(PlanRow.created_at).desc(), col(PlanRow.chain_seq).desc())
            .limit(1)
        ).first()
    if latest is not None:
        keep.setdefault(latest, "is the plan applied last")
    return keep


def _count(db: Session, table: Any, plans: set[str]) -> int:
    return sum(
        db.exec(select(func.count()).select_from(table).where(where)).one()
        for where in in_chunks(table.plan_id, plans)
    )


def _hash_of(db: Session, seq: int) -> str:
    """The hash of record ``seq`` (a plan's or an event's)."""
    found = db.exec(select(EventRow.hash).where(EventRow.chain_seq == seq)).first()
    if found is None:
        found = db.exec(select(PlanRow.hash).where(PlanRow.chain_seq == seq)).first()
    return found or ""
