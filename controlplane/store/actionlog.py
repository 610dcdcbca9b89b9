"""The history read back: applied (or attempted) actions, newest first, narrowed by what a
person asks about ("who preempted my job 1234, and why"): workloads, projects, jobs,
operations and a time, all of which must hold."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, or_
from sqlalchemy.orm import defer
from sqlmodel import col, select

from controlplane.store.database import Database
from controlplane.store.history import utc
from controlplane.store.tables import ActionRow, EventRow, PlanRow

# an applied (or attempted) action, its plan, and who applied it (None: not recorded)
HistoryRow = tuple[ActionRow, PlanRow, str | None]


@dataclass(frozen=True)
class HistoryFilter:
    """What the rows must be about, besides their workload (empty: anything)."""

    projects: Collection[str] = ()  # one project's names: its workloads
    job: str | None = None
    ops: Collection[str] = ()
    since: datetime | None = None  # acted on at or after


class ActionLog:
    """The history as people ask about it (a part of :class:`~controlplane.store.Store`)."""

    db: Database

    def workloads_in_history(self) -> set[str]:
        """Every workload some applied or attempted action names (those that left the
        specs too: what `cp explain` suggests for a mistyped name)."""
        with self.db.session() as db:
            q = select(ActionRow.workload).where(ActionRow.status != "pending").distinct()
            return set(db.exec(q))

    def history(
        self,
        workloads: Collection[str] = (),
        limit: int = 50,
        *,
        where: HistoryFilter | None = None,
    ) -> list[HistoryRow]:
        """Applied or attempted actions (of ``workloads``, and as ``where`` says), newest
        first, each with who applied it: the actor of the latest start (or resume) of its
        plan's apply before it began."""
        where = where or HistoryFilter()
        with self.db.session() as db:
            # each row's plan: its id and time, not its body (1.6 GB for 3,000 rows)
            unread = [defer(PlanRow.body), defer(PlanRow.packed)]  # type: ignore[arg-type]
            q = select(ActionRow, PlanRow).options(*unread)
            q = q.where(ActionRow.plan_id == PlanRow.id, ActionRow.status != "pending")
            if workloads:  # one workload's names, before and after a rename
                q = q.where(col(ActionRow.workload).in_(workloads))
            if where.projects:
                q = q.where(
                    or_(
                        *(
                            col(ActionRow.workload).startswith(f"{p}/", autoescape=True)
                            for p in where.projects
                        )
                    )
                )
            if where.job is not None:  # the job acted on, or made (a move's new job)
                q = q.where(
                    or_(col(ActionRow.job) == where.job, col(ActionRow.acted_on) == where.job)
                )
            if where.ops:
                q = q.where(col(ActionRow.op).in_(where.ops))
            if where.since is not None:
                when = func.coalesce(ActionRow.started_at, PlanRow.created_at)
                q = q.where(when >= utc(where.since))  # stored as UTC
            q = q.order_by(col(ActionRow.started_at).desc(), col(ActionRow.id).desc())
            rows = list(db.exec(q.limit(limit)))
            starts: dict[str, list[tuple[datetime, str]]] = {}
            applying = select(EventRow).where(
                col(EventRow.plan_id).in_({p.id for _, p in rows}),
                col(EventRow.seq).is_(None),
                EventRow.status == "applying",
                col(EventRow.actor).is_not(None),
            )
            for e in db.exec(applying.order_by(col(EventRow.chain_seq))):
                starts.setdefault(e.plan_id, []).append((utc(e.at), e.actor or ""))
        out = []
        for a, p in rows:
            began = utc(a.started_at) if a.started_at else None
            actors = [who for at, who in starts.get(p.id, []) if began is None or at <= began]
            out.append((a, p, actors[-1] if actors else None))
        return out
