"""Pruning the history, as ``cp store prune`` and ``cp watch --prune-older-than`` do it:
the store opened, the apply lease held, the oldest records removed (store/retention.py),
and what went told in one line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from controlplane import workflow
from controlplane.errors import StoreError
from controlplane.lease import holding_lease
from controlplane.store.retention import Pruned


def prune(
    spec_dir: Path, db: str | None, older_than: int, *, dry_run: bool = False
) -> tuple[datetime, Pruned]:
    """Remove the history older than ``older_than`` seconds before now: the cutoff, and
    what went (or would, ``dry_run``). A store that is not there is an error."""
    store = workflow.open_store(spec_dir, db, reading=True)
    if store.missing is not None:
        raise StoreError(f"no store to prune: {store.missing} does not exist")
    before = datetime.now(UTC) - timedelta(seconds=older_than)
    with store, holding_lease(store):
        return before, store.prune(before, dry_run=dry_run)


def told(pruned: Pruned, *, dry_run: bool = False) -> str:
    """What a prune did, in a line."""
    if pruned.plans == 0:
        line = "nothing to prune"
    else:
        verb = "would remove" if dry_run else "removed"
        line = (
            f"{verb} records 1-{pruned.through}: {_n(pruned.plans, 'plan')}, "
            f"{_n(pruned.actions, 'action')}, {_n(pruned.events, 'event')}, "
            f"{_n(pruned.observations, 'observation')}"
        )
    if pruned.stopped:
        line += f"; older history stays from {pruned.stopped}"
    return line


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun if count == 1 else noun + 's'}"
