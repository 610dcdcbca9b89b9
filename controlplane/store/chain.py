"""The history chain: why "who preempted my job, when, why" can be trusted afterwards.

Every stored plan and every event of an action (started, done, failed, linked) is a
record in one chain: it carries the hash of the record before it, and its own hash over
that and its content. Editing a record changes its hash; deleting one breaks the link of
the next; editing the current-state tables (``actions``, a plan's ``status``) makes them
disagree with the events they were derived from. :func:`check` walks the chain and names
the first record that does not hold, :func:`state_problem` the first row of current
state that disagrees. It proves tampering afterwards, not prevents it: a
person who can rewrite the whole database can rewrite the chain too, so the head hash is
worth keeping elsewhere (``cp history --verify`` prints it).

Pure: records in, the first problem out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import TypeAdapter

from controlplane.plan import execution_order
from specs.actions import Action

if TYPE_CHECKING:  # rows, read here; the tables are the store's
    from controlplane.store.tables import ActionRow, EventRow, PlanRow

GENESIS = "0" * 64


def stamp(dt: datetime) -> str:
    """A time as the chain hashes it: UTC, to the microsecond (stores drop the zone)."""
    aware = dt if dt.tzinfo else dt.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def link(prev_hash: str, payload: Mapping[str, object]) -> str:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{prev_hash}\n{body}".encode()).hexdigest()


def plan_payload(
    plan_id: str,
    created_at: datetime,
    spec_digest: str,
    observed_digest: str,
    git_commit: str | None,
    body: str,
) -> dict[str, object]:
    return {
        "kind": "plan",
        "id": plan_id,
        "createdAt": stamp(created_at),
        "specDigest": spec_digest,
        "observedDigest": observed_digest,
        "gitCommit": git_commit,
        "body": body,
    }


def event_payload(
    plan_id: str,
    seq: int | None,
    status: str,
    job: str | None,
    message: str,
    at: datetime,
    actor: str | None = None,
) -> dict[str, object]:
    """An event's hashed content; ``actor`` only where one was recorded, so the events
    written before the store kept it hash as they did."""
    payload: dict[str, object] = {
        "kind": "event",
        "plan": plan_id,
        "seq": seq,
        "status": status,
        "job": job,
        "message": message,
        "at": stamp(at),
    }
    if actor is not None:
        payload["actor"] = actor
    return payload


@dataclass(frozen=True)
class Record:
    """One chained row, as read back: where it sits and what it claims."""

    chain_seq: int
    name: str  # how a person finds it: "plan 3f2a1b0c" or "event 17 (plan 3f2a1b0c, action 2)"
    payload: dict[str, object]
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class Verdict:
    records: int
    head: str  # the last record's hash: keep it somewhere else to check against later
    problem: str | None = None  # the first broken record, in words
    base: tuple[int, str] | None = None  # the checkpoint it starts after (a pruned store)

    @property
    def ok(self) -> bool:
        return self.problem is None


def check(
    records: Iterable[Record],
    head: tuple[int, str] | None,
    base: tuple[int, str] | None = None,
) -> Verdict:
    """Walk ``records`` in chain order; ``head`` is what the store says the last one is,
    ``base`` the checkpoint of a store whose oldest records were pruned (the number and
    hash of the last one removed): the chain starts after it."""
    count, last, problem = _walk(records, head, base or (0, GENESIS))
    return Verdict(count, last, problem, base)


def _walk(
    records: Iterable[Record], head: tuple[int, str] | None, base: tuple[int, str]
) -> tuple[int, str, str | None]:
    """Records walked, the last good hash, and the first problem (None: none)."""
    expected, prev_hash = base[0] + 1, base[1]
    count = 0
    for record in sorted(records, key=lambda r: r.chain_seq):
        count += 1
        where = f"record {record.chain_seq}, {record.name}"
        if record.chain_seq != expected:
            jump = f"record {expected} is missing (the chain jumps to {where})"
            if count == 1 and base[0] == 0:  # no checkpoint: none, or it was removed
                return (
                    count,
                    prev_hash,
                    f"{jump}: rows were deleted, or the checkpoint a prune left (meta "
                    "chain_base) was",
                )
            if count == 1:
                return count, prev_hash, f"{jump}: a row was deleted, or the checkpoint moved"
            return count, prev_hash, f"{jump}: a row was deleted"
        if record.prev_hash != prev_hash and count == 1 and base[0] > 0:
            return (
                count,
                prev_hash,
                f"{where}: its link to the checkpoint (meta chain_base) does not match: the "
                "checkpoint was edited, or the record",
            )
        if record.prev_hash != prev_hash:
            return (
                count,
                prev_hash,
                f"{where}: its link to the record before does not "
                "match: the one before was edited or replaced",
            )
        if link(record.prev_hash, record.payload) != record.hash:
            return count, prev_hash, f"{where}: its content does not match its hash: it was edited"
        prev_hash, expected = record.hash, expected + 1
    if head is not None and head != (expected - 1, prev_hash):
        return (
            count,
            prev_hash,
            f"the chain head names record {head[0]}, but the chain "
            f"ends at record {expected - 1}: records were removed "
            "from its end",
        )
    return count, prev_hash, None


_ACTIONS = TypeAdapter(list[Action])


def actions_of(text: str) -> list[Action]:
    """The actions of a plan's JSON, in the order they run, the rest left unread: a busy
    org's plan is mostly its waiting work (1.1 MB of a steady loop's plan with five
    actions), and a check of the history reads every plan."""
    return execution_order(_ACTIONS.validate_python(json.loads(text).get("actions", [])))


def state_problem(
    plans: Iterable[PlanRow],
    events: Iterable[EventRow],
    actions: Iterable[ActionRow],
    early: set[str] | None = None,
) -> str | None:
    """The first row of current state (a plan's status, an action's row) that disagrees
    with the records it comes from: the stored plan and the events of the chain. ``early``:
    the plans from before the chain (schema 1), whose actions nothing records."""
    latest: dict[tuple[str, int | None], EventRow] = {}
    for e in sorted(events, key=lambda e: e.chain_seq):
        latest[e.plan_id, e.seq] = e
    bodies = {p.id: p for p in plans}
    for p in sorted(bodies.values(), key=lambda p: p.chain_seq or 0):
        last = latest.get((p.id, None))
        if p.status != (last.status if last else "planned"):
            return f"plan {p.id}: its status {p.status!r} is not what its events say"
    planned: dict[tuple[str, int], dict[str, object]] = {}
    for p in bodies.values():
        for seq, action in enumerate(actions_of(p.text)):
            planned[p.id, seq] = {
                "op": action.op.value,
                "workload": action.workload,
                "cluster": action.cluster,
                "reason_code": action.reason.code.value,
                "reason": action.reason.message,
                "acted_on": action.job,
            }
    actions = list(actions)
    rows = {(a.plan_id, a.seq) for a in actions}
    missing = sorted(k for k in planned if k not in rows)
    if missing:
        plan_id, seq = missing[0]
        what = planned[plan_id, seq]
        return (
            f"action {seq} of plan {plan_id} ({what['op']} {what['workload']}): the stored "
            "plan has it, and its row is gone"
        )
    for a in sorted(actions, key=lambda a: (a.plan_id, a.seq)):
        if a.plan_id in (early or set()):
            continue  # a plan from before the chain (schema 1)
        if a.plan_id not in bodies:  # a row added, or one of a plan a prune removed
            return f"action {a.seq} of plan {a.plan_id} ({a.op} {a.workload}): no such plan"
        name = f"action {a.seq} of plan {a.plan_id} ({a.op} {a.workload})"
        written = {
            "op": a.op,
            "workload": a.workload,
            "cluster": a.cluster,
            "reason_code": a.reason_code,
            "reason": a.reason,
        }
        if a.acted_on is not None:  # None: a row from before it was kept (13)
            written["acted_on"] = a.acted_on
        expected = planned.get((a.plan_id, a.seq))
        if expected is None:
            return f"{name}: the stored plan has no such action"
        expected = {key: value for key, value in expected.items() if key in written}
        if expected != written:
            return f"{name}: it differs from the stored plan: " + "; ".join(
                f"its {key} {_short(written[key])}, the plan's {_short(expected[key])}"
                for key in written
                if written[key] != expected[key]
            )
        last = latest.get((a.plan_id, a.seq))
        status, job = (last.status, last.job) if last else ("pending", None)
        if a.status != status or (job is not None and a.job != job):
            return f"{name}: its state {a.status!r} (job {a.job}) is not what its events say"
    return None


def _short(value: object) -> str:
    """A value in a verdict: quoted, long reasons cut (the record and plan are named)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
