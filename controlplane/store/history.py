"""Plans and what became of their actions: the answer to "who did what, when, and why".

A stored plan is immutable; each of its actions has a current state (``actions``) and
the events that led there (``events``: started, done, failed, linked), and a plan has a
status (planned, applying, applied, failed, interrupted) kept the same way. Plans and
events are chained (store/chain.py) as they are written, in one transaction with the
state they change, so ``cp history --verify`` can tell an edited record from a genuine
one.

Two repairs keep the history honest after a crash: an action whose job was created but
never recorded (the apply was killed between the cluster's answer and the store's write)
is linked to its job by the next observation, which sees the job's plan and workload
tags; and a plan left ``applying`` by a process that is gone is closed as
``interrupted`` (rerunning it resumes it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from controlplane.errors import AmbiguousPlanError, StoreError
from controlplane.plan import Plan
from controlplane.store import chain, retention
from controlplane.store.database import Database
from controlplane.store.tables import ActionRow, EventRow, MetaRow, PlanRow, PrunedPlanRow
from solvers.order import job_id_order

# the ops whose job is a new one, created by the adapter (a placeholder until it runs)
CREATES_JOBS = ("submit", "move", "resize")
RESUMABLE = ("applying", "failed", "interrupted")


class History:
    """Plans, actions and their events (a part of :class:`~controlplane.store.Store`)."""

    db: Database
    clock: Callable[[], datetime]  # when things happen (Store: the wall clock, or --now)

    # ------------------------------------------------------------------ plans

    def save_plan(self, plan: Plan) -> None:
        """Store ``plan`` once (the same id is the same plan). Two processes saving at once,
        on a store whose chain has no head yet (nothing to lock) or the same plan: the one
        that loses the race finds the plan saved, or tries again after the head the other
        one left."""
        for attempt in range(3):
            with self.db.session() as db:
                try:
                    _insert_plan(db, plan)
                    db.commit()
                    return
                except IntegrityError:  # caught here: the session would make it a StoreError
                    db.rollback()
                    if attempt == 2:
                        raise

    def get_plan(self, ref: str) -> Plan | None:
        """A plan by id or id prefix (None: no plan's id begins so); a prefix several ids
        begin with is an AmbiguousPlanError naming them, not "no such plan"."""
        with self.db.session() as db:
            begins = col(PlanRow.id).startswith(ref, autoescape=True)  # '_', '%': no wildcards
            ids = sorted(db.exec(select(PlanRow.id).where(begins)).all())
            gone = col(PrunedPlanRow.id).startswith(ref, autoescape=True)  # named as pruned
            if len(ids) + len(pruned := db.exec(select(PrunedPlanRow.id).where(gone)).all()) > 1:
                raise AmbiguousPlanError(ref, sorted([*ids, *pruned]))
            row = db.get(PlanRow, ids[0]) if ids else None
            return Plan.from_json(row.text) if row else None

    def known_plans(self, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` that are plans this store made (or was shown), pruned or not."""
        wanted = list(ids)
        with self.db.session() as db:
            return {
                pid
                for table in (PlanRow, PrunedPlanRow)
                for pid in db.exec(select(table.id).where(col(table.id).in_(wanted)))
            }

    def plan_status(self, plan_id: str) -> str | None:
        """The plan's status (None: never stored), as it was when pruned for one pruned."""
        with self.db.session() as db:
            row = db.get(PlanRow, plan_id) or db.get(PrunedPlanRow, plan_id)
            return row.status if row else None

    def set_plan_status(
        self, plan_id: str, status: str, message: str = "", *, actor: str | None = None
    ) -> None:
        """A plan's new status, as an event of the chain (``actor``: who set it going)."""
        with self.db.session() as db:
            row = db.get(PlanRow, plan_id)
            if row is None or row.status == status:
                return
            now = self.clock()
            row.status = status
            if status == "applied":
                row.applied_at = now
            db.add(row)
            event = EventRow(
                plan_id=plan_id,
                seq=None,
                status=status,
                message=message,
                at=utc(now),
                actor=actor,
                chain_seq=0,
                prev_hash="",
                hash="",
            )
            _append(db, event, _event_payload(event))
            db.commit()

    def last_recorded(self) -> datetime | None:
        """When the latest event the store recorded happened (None: it holds none)."""
        with self.db.session() as db:  # the newest by the chain's index: no scan
            latest = db.exec(
                select(EventRow.at).order_by(col(EventRow.chain_seq).desc()).limit(1)
            ).first()
            return utc(latest) if latest is not None else None

    def last_applied_plan(self) -> Plan | None:
        """The plan that acted on the clusters last (applied, or begun and cut short), or
        that an apply found had nothing to do: the policy the clusters last followed. Last
        by its apply, not by when it was made: a pull request's plan is made before the
        scheduled applies that run until it is merged and applied."""
        acted = ("applied", "applying", "interrupted", "failed")
        with self.db.session() as db:
            row = db.exec(  # the newest such status event, read back along the chain's index
                select(PlanRow)
                .join(EventRow, col(EventRow.plan_id) == col(PlanRow.id))
                .where(
                    col(EventRow.seq).is_(None),
                    col(EventRow.status).in_(acted),
                    col(PlanRow.status).in_(acted),
                )
                .order_by(col(EventRow.chain_seq).desc())
                .limit(1)
            ).first()
            if row is None:  # a store from before status events: by when plans were made
                row = db.exec(
                    select(PlanRow)
                    .where(col(PlanRow.status).in_(acted))
                    .order_by(col(PlanRow.created_at).desc(), col(PlanRow.chain_seq).desc())
                    .limit(1)
                ).first()
            return Plan.from_json(row.text) if row is not None else None

    def applied_specs(self, spec_digest: str) -> bool:
        """Whether an apply ever acted on a plan of these specs (the clusters followed them)."""
        with self.db.session() as db:
            return any(
                db.exec(
                    select(table.id)
                    .where(table.spec_digest == spec_digest, table.status != "planned")
                    .limit(1)
                ).first()
                is not None
                for table in (PlanRow, PrunedPlanRow)
            )

    def reviewed_plan(self, spec_digest: str) -> Plan | None:
        """The last plan made for review (``cp plan --base``) of exactly these specs and
        not superseded: what a pull request's reviewers saw, looked up when it is merged.
        Last as stored, not as dated: a what-if at a later ``--now`` made before the pull
        request's comment is not what the comment shows. One whose apply was cut short is
        resumed by the same command, and one applied already is found too, to say so (a
        CI job run again). Plans that other commands stored of the same specs (``status``,
        ``explain``, a plain ``plan``) were shown to nobody reviewing, and are passed over."""
        with self.db.session() as db:
            rows = db.exec(
                select(PlanRow)
                .where(
                    PlanRow.spec_digest == spec_digest,
                    col(PlanRow.status).in_(("planned", "applied", *RESUMABLE)),
                )
                .order_by(col(PlanRow.chain_seq).desc())
            )
            for row in rows:
                if '"base":' not in row.text:  # only a plan made with --base has the key
                    continue
                plan = Plan.from_json(row.text)
                if plan.policy is not None and plan.policy.base is not None:
                    return plan
            return None

    def plans(self, limit: int = 20) -> list[PlanRow]:
        with self.db.session() as db:
            return list(
                db.exec(select(PlanRow).order_by(col(PlanRow.created_at).desc()).limit(limit))
            )

    # ------------------------------------------------------------------ actions

    def actions(self, plan_id: str) -> list[ActionRow]:
        with self.db.session() as db:
            query = select(ActionRow).where(ActionRow.plan_id == plan_id)
            return list(db.exec(query.order_by(col(ActionRow.seq))))

    def mark(
        self, plan_id: str, seq: int, status: str, *, job: str | None = None, message: str = ""
    ) -> None:
        """Record an action's progress; committed at once, so a crash loses nothing done."""
        with self.db.session() as db:
            row = db.exec(
                select(ActionRow).where(ActionRow.plan_id == plan_id, ActionRow.seq == seq)
            ).one()
            now = self.clock()
            row.status = status
            row.message = message
            if job is not None:
                row.job = job
            if status == "started":
                row.started_at = now
            else:
                row.finished_at = now
            db.add(row)
            event = EventRow(
                plan_id=plan_id,
                seq=seq,
                status=status,
                job=job,
                message=message,
                at=utc(now),
                chain_seq=0,
                prev_hash="",
                hash="",
            )
            _append(db, event, _event_payload(event))
            db.commit()

    # ------------------------------------------------------------------ repairs

    def link_jobs(self, tagged: Iterable[tuple[str, str, str, str]]) -> list[tuple[str, int, str]]:
        """Link actions left ``started`` without a job to the job the clusters show for
        them: ``tagged`` is (plan id, workload, cluster, job id) of our jobs in view; a job
        on the action's cluster that no other action of its plan has (a fan-out plan submits
        one workload to several clusters, whose job ids may be equal). Returns what was
        linked, as (plan id, action seq, job)."""
        by_key: dict[tuple[str, str, str], list[str]] = {}
        for plan, workload, cluster, job in tagged:
            by_key.setdefault((plan, workload, cluster), []).append(job)
        with self.db.session() as db:
            stranded = db.exec(
                select(ActionRow)
                .where(ActionRow.status == "started", col(ActionRow.op).in_(CREATES_JOBS))
                .order_by(col(ActionRow.plan_id), col(ActionRow.seq))
            ).all()
            plans = {row.plan_id for row in stranded}
            claimed = {
                (row.plan_id, row.cluster, row.job)
                for row in db.exec(select(ActionRow).where(col(ActionRow.plan_id).in_(plans)))
                if row.job is not None
            }
            found = []
            for row in stranded:
                jobs = by_key.get((row.plan_id, row.workload, row.cluster), [])
                free = [j for j in jobs if (row.plan_id, row.cluster, j) not in claimed]
                if free:
                    job = min(free, key=job_id_order)
                    claimed.add((row.plan_id, row.cluster, job))
                    found.append((row.plan_id, row.seq, job))
        linked = []
        for plan_id, seq, job in found:
            self.mark(
                plan_id,
                seq,
                "done",
                job=job,
                message=(
                    f"linked to job {job} by a later observation: the apply that created it was "
                    "interrupted before it could record it"
                ),
            )
            linked.append((plan_id, seq, job))
        return linked

    def supersede(self, by: str) -> list[str]:
        """Plans left interrupted or failed, now that plan ``by`` is applied from the world
        they left: ``superseded`` (their remaining actions no longer hold; the caller holds
        the apply lease)."""
        with self.db.session() as db:
            left = select(PlanRow.id).where(
                col(PlanRow.status).in_(("interrupted", "failed")), PlanRow.id != by
            )
            stale = list(db.exec(left))
        for plan_id in stale:
            self.set_plan_status(plan_id, "superseded", f"plan {by} was applied after it")
            for row in self.actions(plan_id):
                if row.status == "started":  # cut off while it ran: its outcome is unknown
                    self.mark(
                        plan_id,
                        row.seq,
                        "interrupted",
                        message=f"the apply stopped while it ran; plan {by} took over",
                    )
        return stale

    def status_message(self, plan_id: str) -> str:
        """What the latest change of a plan's status said."""
        with self.db.session() as db:
            q = select(EventRow.message).where(
                EventRow.plan_id == plan_id, col(EventRow.seq).is_(None)
            )
            return db.exec(q.order_by(col(EventRow.chain_seq).desc())).first() or ""

    def close_interrupted(self, *, except_plan: str | None = None) -> list[str]:
        """Plans left ``applying`` by a process that is gone: ``interrupted`` (the caller
        holds the apply lease, so nobody else is applying them)."""
        with self.db.session() as db:
            stuck = [
                p.id
                for p in db.exec(select(PlanRow).where(PlanRow.status == "applying"))
                if p.id != except_plan
            ]
        for plan_id in stuck:
            self.set_plan_status(
                plan_id,
                "interrupted",
                "the apply stopped before it finished (its process is gone); "
                "rerun the plan to resume it",
            )
        return stuck

    # ------------------------------------------------------------------ verification

    def verify(self) -> chain.Verdict:
        """Check the history chain, then that the current state agrees with the events."""
        with self.db.session() as db:
            plans = db.exec(select(PlanRow).where(col(PlanRow.chain_seq).is_not(None))).all()
            events = db.exec(select(EventRow)).all()
            head = db.get(MetaRow, "chain_head")
            base = db.get(MetaRow, retention.BASE)
            actions = db.exec(select(ActionRow)).all()
        records = [
            chain.Record(
                p.chain_seq or 0,
                f"plan {p.id}",
                chain.plan_payload(
                    p.id, p.created_at, p.spec_digest, p.observed_digest, p.git_commit, _text(p)
                ),
                p.prev_hash or "",
                p.hash or "",
            )
            for p in plans
        ]
        records += [
            chain.Record(e.chain_seq, _event_name(e), _event_payload(e), e.prev_hash, e.hash)
            for e in events
        ]
        verdict = chain.check(
            records,
            retention.parse(head.value) if head else None,
            retention.parse(base.value) if base else None,
        )
        if not verdict.ok:
            return verdict
        with self.db.session() as db:
            early = set(db.exec(select(PlanRow.id).where(col(PlanRow.chain_seq).is_(None))))
            problem = chain.state_problem(plans, events, actions, early) or (
                retention.pruned_problem(db)
            )
        return chain.Verdict(verdict.records, verdict.head, problem, verdict.base)


# ------------------------------------------------------------------ helpers


def _insert_plan(db: Session, plan: Plan) -> None:
    if db.get(PlanRow, plan.id) is not None:
        return  # plans are immutable: the same id is the same plan
    row = PlanRow(
        id=plan.id,
        created_at=utc(plan.created_at),
        spec_digest=plan.spec_digest,
        observed_digest=plan.observed_digest,
        git_commit=plan.git_commit,
        actions=len(plan.actions),
        body="",
    )
    text = plan.to_json(indent=None)
    row.packed = PlanRow.pack(text)  # the chain hashes the JSON, not how it is kept
    payload = chain.plan_payload(
        row.id, row.created_at, row.spec_digest, row.observed_digest, row.git_commit, text
    )
    _append(db, row, payload)
    db.flush()  # the plan row first: actions reference it (PostgreSQL enforces that)
    for seq, action in enumerate(plan.execution_order()):
        db.add(
            ActionRow(
                plan_id=plan.id,
                seq=seq,
                op=action.op.value,
                workload=action.workload,
                cluster=action.cluster,
                job=action.job,
                acted_on=action.job,
                reason_code=action.reason.code.value,
                reason=action.reason.message,
            )
        )


def _append(db: Session, row: PlanRow | EventRow, payload: dict[str, object]) -> None:
    """Chain ``row`` after the current head, in the caller's transaction (which holds the
    write lock: SQLite begins IMMEDIATE, PostgreSQL locks the head row)."""
    head = db.exec(select(MetaRow).where(MetaRow.key == "chain_head").with_for_update()).first()
    seq, prev = retention.parse(head.value) if head is not None else (0, chain.GENESIS)
    row.chain_seq, row.prev_hash = seq + 1, prev
    row.hash = chain.link(prev, payload)
    db.add(row)
    db.merge(MetaRow(key="chain_head", value=f"{row.chain_seq}:{row.hash}"))


def _text(row: PlanRow) -> str:
    """A plan's JSON for the chain's check: one damaged beyond reading hashes as nothing
    it could have been, so the check names it as edited."""
    try:
        return row.text
    except StoreError as exc:
        return f"<unreadable: {exc}>"


def _event_payload(e: EventRow) -> dict[str, object]:
    return chain.event_payload(e.plan_id, e.seq, e.status, e.job, e.message, e.at, e.actor)


def _event_name(e: EventRow) -> str:
    what = f"action {e.seq}" if e.seq is not None else "its status"
    return f"event {e.id} (plan {e.plan_id}, {what}: {e.status})"


def utc(dt: datetime) -> datetime:
    """In UTC: the chain hashes times as UTC (SQLite gives them back without a zone)."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
