"""Saying what a slow step is doing, without the steps knowing how it is shown.

Observing a cluster, asking it for start estimates, solving, carrying out one action:
each can take seconds (a loaded slurmctld, a large plan), and silence for 10-30 s looks
like a hang. These steps run inside :func:`busy` with a few words on what they do, and may
:func:`note` where they stand (a long plan's round and step); the command line installs
a :class:`Reporter` (a spinner on stderr when it is a terminal, shown only once a step
has taken a second), and everywhere else, tests and library use included, both do
nothing.

The pure core (specs, solvers, controlplane/reconcile.py) never calls this: its callers
wrap it. A reporter must not print to stdout; callers keep printing outside ``busy``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Protocol


class Reporter(Protocol):
    """Shows the steps run inside :func:`busy`, and what :func:`note` adds to the current
    one."""

    def __call__(self, what: str) -> AbstractContextManager[None]: ...

    def note(self, detail: str) -> None: ...


_reporter: ContextVar[Reporter | None] = ContextVar("reporter", default=None)


def busy(what: str) -> AbstractContextManager[None]:
    """Run the ``with`` block as the step ``what`` ("observing cluster rivanna")."""
    reporter = _reporter.get()
    return reporter(what) if reporter is not None else nullcontext()


def note(detail: str) -> None:
    """Where the current step stands ("round 2, reclaim: 400 of 1,795 waiting jobs"),
    shown beside its words; nothing without a reporter or a step."""
    reporter = _reporter.get()
    if reporter is not None:
        reporter.note(detail)


@contextmanager
def reporting(reporter: Reporter) -> Iterator[None]:
    """Show the steps run inside the block with ``reporter``."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)
