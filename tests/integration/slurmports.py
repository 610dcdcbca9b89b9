"""Port bases for the test suite's local Slurm clusters, one set per running suite.

A local cluster listens on fixed ports: slurmctld on its base, node i on base + i, and
with accounting slurmdbd and MariaDB on base + 90 and base + 91. Two suites on one host
(two CI runs, or a developer's run beside CI) used to pick the same bases, and the later
one's Slurm tests failed at setup. Each suite now claims a *slot*: a lock file held with
``flock`` for as long as the suite's process lives (the kernel lets go of it when the
process ends, even killed), and the slot's ports must be free when it is claimed.

Slot 0 is the bases the suite always used: 26817 for the plain cluster (26877 for the
mixed example's), 27817 for the one with accounting. Slot i adds 200 * i to each, so no
slot's ranges overlap another's. ``CP_TEST_SLURM_PORT_BASE`` and
``CP_TEST_SLURM_ACCT_PORT_BASE`` still choose the bases by hand, and then no slot is
claimed.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from pathlib import Path
from typing import IO

PLAIN, ACCOUNTING = 26817, 27817
MIXED_OFFSET = 60  # the mixed example's cluster, beside the plain one
SLOT_STEP, SLOTS = 200, 5  # slot 4's plain range ends below ACCOUNTING
SPAN = 92  # base .. base + 91: slurmctld, the nodes, slurmdbd, MariaDB

_claimed: list[tuple[int, IO[str]]] = []  # the slot and its lock file, kept open


def plain_base() -> int:
    """The plain cluster's base (the mixed example's is this plus MIXED_OFFSET)."""
    return _base("CP_TEST_SLURM_PORT_BASE", PLAIN)


def accounting_base() -> int:
    return _base("CP_TEST_SLURM_ACCT_PORT_BASE", ACCOUNTING)


def _base(variable: str, slot0: int) -> int:
    chosen = os.environ.get(variable)
    if chosen:
        return int(chosen)
    return slot0 + SLOT_STEP * _slot()


def _slot() -> int:
    """This suite's slot: the first whose lock it gets and whose ports are all free."""
    if _claimed:
        return _claimed[0][0]
    folder = Path(tempfile.gettempdir())
    for slot in range(SLOTS):
        lock = (folder / f"cp-test-slurm-slot-{slot}.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()  # another suite holds it
            continue
        bases = (PLAIN + SLOT_STEP * slot, ACCOUNTING + SLOT_STEP * slot)
        if all(_free(port) for base in bases for port in range(base, base + SPAN)):
            _claimed.append((slot, lock))
            return slot
        lock.close()  # free to lock, but something else listens there
    raise RuntimeError(
        f"no free port slot for the local Slurm clusters among {SLOTS} (set "
        "CP_TEST_SLURM_PORT_BASE and CP_TEST_SLURM_ACCT_PORT_BASE to choose by hand)"
    )


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no owner
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
