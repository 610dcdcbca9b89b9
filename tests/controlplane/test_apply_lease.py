"""The apply lease after a crash: a dead holder on this host is taken over, a live one is not."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from controlplane.apply import apply_plan
from controlplane.errors import LeaseHeldError
from controlplane.lease import here
from controlplane.plan import Plan, SolverReport
from controlplane.store import Store
from tests.builders import NOW

EMPTY = Plan(
    id="empty",
    created_at=NOW,
    spec_digest="s",
    observed_digest="o",
    solver=SolverReport(engine="test", status="OK"),
)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # exited and reaped: the pid names nothing now
    return proc.pid


@pytest.mark.parametrize("by", ["", " by alice@laptop"], ids=["before-actor", "with-actor"])
def test_the_lease_of_a_killed_apply_on_this_host_is_taken_over(tmp_path: Path, by: str) -> None:
    store = Store(f"sqlite:///{tmp_path}/db")
    assert store.acquire_lease(f"{here()}:{dead_pid()}{by}") is None
    report = apply_plan(EMPTY, {}, store, observed=None)
    assert report.ok and store.lease_holder() is None, "taken, used and released"


def test_a_held_lease_names_who_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The refusal named only "vm:672" (user trial): who holds the lease is told too."""
    from controlplane.lease import holding_lease

    store = Store(f"sqlite:///{tmp_path}/db")
    monkeypatch.setenv("CP_ACTOR", "nightly-ci")
    with holding_lease(store):
        monkeypatch.setenv("CP_ACTOR", "alice")
        with pytest.raises(LeaseHeldError, match=r"\(\S+:\d+ by nightly-ci until "):
            apply_plan(EMPTY, {}, store, observed=None)


@pytest.mark.parametrize(
    "holder",
    [
        f"{here()}:{os.getppid()}",  # alive on this host
        f"elsewhere.example:{os.getpid() + 1}",  # another host: cannot be checked, so it waits
    ],
)
def test_a_lease_that_may_be_live_is_respected(tmp_path: Path, holder: str) -> None:
    store = Store(f"sqlite:///{tmp_path}/db")
    assert store.acquire_lease(holder) is None
    with pytest.raises(LeaseHeldError, match="another reconciler is applying"):
        apply_plan(EMPTY, {}, store, observed=None)
    assert store.lease_holder() == holder


def test_a_lease_released_while_we_look_at_its_holder_is_taken(tmp_path: Path) -> None:
    """PostgreSQL, read committed: our insert fails on the holder's row, then the holder
    releases before we read who it is (seen in the PostgreSQL concurrency test). The
    interleaving is forced here on a real SQLite store: the holder's release runs, in our
    transaction, just before our look at the row."""
    store = Store(f"sqlite:///{tmp_path}/db")
    assert store.acquire_lease("first") is None
    released: list[str] = []

    def release_first(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        looks = statement.lstrip().upper().startswith("SELECT") and "leases" in statement
        if looks and not released:
            cursor.execute("DELETE FROM leases WHERE holder = 'first'")
            released.append(statement)

    event.listen(store.db.engine, "before_cursor_execute", release_first)
    try:
        assert store.acquire_lease("second") is None
    finally:
        event.remove(store.db.engine, "before_cursor_execute", release_first)
    assert released and store.lease_holder() == "second"


def test_a_holder_numbered_in_another_pid_namespace_is_not_judged_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two containers with one host name (hostNetwork pods, `docker --network host`)
    number their processes apart: a live holder's PID in one names nothing in the other,
    which took its lease over as if it had crashed (found by reading the code in a user
    trial). A holder is this host's only in this PID namespace."""
    import controlplane.lease as applying

    monkeypatch.setattr(applying, "_pid_namespace", lambda: 42)  # a container of its own
    host = socket.gethostname()
    assert applying.here() == f"{host}/pidns-42"
    store = Store(f"sqlite:///{tmp_path}/db")
    other = f"{host}:{dead_pid()} by bob"  # the host's (or another container's) process
    assert store.acquire_lease(other) is None
    with pytest.raises(LeaseHeldError, match="another reconciler is applying"):
        apply_plan(EMPTY, {}, store, observed=None)
    assert store.lease_holder() == other, "not taken over: its PID means nothing here"
    # in the host's own namespace the holder reads as before, host:pid
    monkeypatch.setattr(applying, "_pid_namespace", lambda: applying.HOST_PID_NAMESPACE)
    assert applying.here() == host
