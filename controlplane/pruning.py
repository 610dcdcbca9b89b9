"""Pruning the history, as ``cp store prune`` and ``cp watch --keep-history`` do it:
the store opened, the apply lease held, the oldest records removed (store/retention.py),
and what went told in one line."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from controlplane import workflow
from controlplane.errors import LeaseHeldError, StoreError
from controlplane.lease import holding_lease

if TYPE_CHECKING:  # the store (sqlalchemy) loads when one is opened
    from controlplane.store.retention import Pruned


def prune(
    spec_dir: Path,
    db: str | None,
    older_than: int,
    *,
    dry_run: bool = False,
    wait: float = 0.0,
    vacuum: bool = False,
) -> tuple[datetime, Pruned, bool]:
    """Remove the history older than ``older_than`` seconds before now: the cutoff, what
    went (or would, ``dry_run``) and whether the file was vacuumed (``vacuum``: SQLite).
    An apply holding the lease is waited for up to ``wait`` seconds (a watch cycle is
    short). A store that is not there is an error."""
    store = workflow.open_store(spec_dir, db, reading=True)
    if store.missing is not None:
        raise StoreError(f"no store to prune: {store.missing} does not exist")
    before = datetime.now(UTC) - timedelta(seconds=older_than)
    until = time.monotonic() + wait
    with store:
        if dry_run:  # it changes nothing: it waits for no apply
            return before, store.prune(before, dry_run=True), False
        while True:
            try:
                with holding_lease(store):
                    pruned = store.prune(before)
                    return before, pruned, vacuum and store.vacuum()
            except LeaseHeldError:
                if time.monotonic() >= until:
                    raise
                time.sleep(min(1.0, max(0.0, until - time.monotonic())))


def told(pruned: Pruned, *, dry_run: bool = False) -> str:
    """What a prune did, in a line."""
    verb = "would remove" if dry_run else "removed"
    if pruned.plans:
        line = (
            f"{verb} records {pruned.since}-{pruned.through}: {_n(pruned.plans, 'plan')}, "
            f"{_n(pruned.actions, 'action')}, {_n(pruned.events, 'event')}, "
            f"{_n(pruned.observations, 'observation')}"
        )
    elif pruned.observations:
        line = f"no plan to prune; {verb} {_n(pruned.observations, 'old observation')}"
    else:
        line = "nothing to prune"
    if pruned.stopped:
        line += f"; older history stays from {pruned.stopped}"
    return line


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun if count == 1 else noun + 's'}"
