"""The apply lease: one reconciler acts at a time, end to end.

Whoever applies observes, plans and acts under a lease kept in the store (shared
PostgreSQL when several reconcilers run), renewed as it goes. A lease left by a process
of this host that has died (killed mid-apply) is taken over at once rather than after it
expires; one held elsewhere lapses after ``LEASE_SECONDS``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from controlplane.actor import actor
from controlplane.errors import LeaseHeldError

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.store import Store

LEASE_SECONDS = 300.0  # a crashed holder's lease lapses after this; a live one renews it
HOST_PID_NAMESPACE = 0xEFFFFFFC  # the inode of the host's own PID namespace (Linux)


class Lease:
    """The apply lease held by this process (see :func:`holding_lease`)."""

    def __init__(self, store: Store, holder: str, ttl: float) -> None:
        self.store, self.holder, self.ttl = store, holder, ttl
        self.renewed = time.monotonic()

    def keep(self) -> None:
        """Renew the lease when a third of its time is gone, so a long apply keeps it; a
        lease lost meanwhile (expired and taken) stops the apply."""
        if time.monotonic() - self.renewed >= self.ttl / 3:
            self._renew()

    def _renew(self) -> None:
        if (other := self.store.acquire_lease(self.holder, ttl=self.ttl)) is not None:
            raise LeaseHeldError(
                f"the apply lease was lost to {other}; nothing more was done: run `cp apply` again"
            )
        self.renewed = time.monotonic()

    def regained(self) -> bool:
        """Whether the lease was held all along: a wait (an approval prompt) may outlast
        it, and another reconciler take it, act and give it back meanwhile. On return it
        is held again, renewed (or LeaseHeldError names who has it now)."""
        held = self.store.lease_held(self.holder)
        self._renew()  # now, whatever the time since the last renewal
        return held


OBSERVING = " (observing)"  # the end of an observer's holder name
OBSERVATION_WAIT = 60.0  # seconds an apply waits for an observation to be recorded


@contextlib.contextmanager
def holding_lease(
    store: Store, ttl: float = LEASE_SECONDS, *, observing: bool = False
) -> Iterator[Lease]:
    """Hold the store's apply lease for the block, or raise LeaseHeldError naming who
    holds it. One actor at a time, end to end: whoever applies observes, plans and acts
    under the lease, so nobody plans against a world another process is changing.
    ``observing``: only to record an observation (``cp observe``, a watch that does not
    apply), which an apply waits out (up to ``OBSERVATION_WAIT`` seconds) rather than
    be refused."""
    # host and process first (a crashed holder on this host is recognised by them), then
    # who applies, for whoever finds the lease held
    holder = f"{here()}:{os.getpid()} by {actor()}" + (OBSERVING if observing else "")
    other = store.acquire_lease(holder, ttl=ttl)
    until = time.monotonic() + OBSERVATION_WAIT
    while other is not None and not observing and OBSERVING in other and time.monotonic() < until:
        time.sleep(0.25)
        other = store.acquire_lease(holder, ttl=ttl)
    if other is not None:
        dead = store.lease_holder()
        if (
            dead is None
            or not _dead_here(dead)
            or store.acquire_lease(holder, ttl=ttl, takeover=dead) is not None
        ):
            raise LeaseHeldError(f"another reconciler is applying ({other}); try again later")
    try:
        yield Lease(store, holder, ttl)
    finally:
        store.release_lease(holder)


def here() -> str:
    """Where this process's PIDs mean something: this host, and its PID namespace where
    that is not the host's own (containers that share a host name, as hostNetwork pods do,
    number their processes apart: a PID of one names nothing in the other)."""
    host, ns = socket.gethostname(), _pid_namespace()
    return host if ns in (None, HOST_PID_NAMESPACE) else f"{host}/pidns-{ns}"


def _pid_namespace() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _dead_here(holder: str) -> bool:
    """``holder`` ("host:pid", then " by " and who applies) is a process of this host
    (and PID namespace: :func:`here`) that no longer runs.

    Only this host's processes can be checked; a holder elsewhere keeps its lease until
    it expires. A zombie counts as dead: it can never release the lease itself.
    """
    host, _, pid = holder.split(" ", 1)[0].rpartition(":")
    if host != here() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"
