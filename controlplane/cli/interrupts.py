"""Ctrl-C and SIGTERM (a cancelled CI job, a stopped service) during a command.

Before a command acts, either one ends it at once (:class:`Interrupted`): nothing was
done, and the command line says so (with ``--json``, in a document). Once an apply acts,
the first one asks it to stop after the action in flight (the plan is left interrupted,
and the report says where it stopped); a second one ends it at once, which is still safe
(the action in flight is marked started, and a rerun finds its job by its tags). A loop
(``cp watch``) is asked to stop by the first one whatever it is doing (:class:`StopLoop`),
and ended at once by a second one, as an apply is.

Signal handlers can only be set from the main thread; elsewhere (an embedding program)
the signals keep whatever handling they had.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, Protocol

Handler = Callable[[int, FrameType | None], Any]


class Interrupted(BaseException):
    """A command ended by a signal. Not a KeyboardInterrupt, which typer turns into a bare
    exit 130, and a BaseException, which code catching Exception lets through."""

    message = "interrupted: nothing was applied"


class ActingInterrupted(Interrupted):
    """Ended at once while an apply acted (a second signal)."""

    message = (
        "interrupted while an action ran; rerun the same `cp apply` to resume (nothing is "
        "done twice)"
    )


class LoopInterrupted(Interrupted):
    """A loop (``cp watch``) ended at once while no action ran (a second signal)."""

    message = "interrupted: no action was under way"


class LoopActingInterrupted(ActingInterrupted):
    """A loop (``cp watch``) ended at once while its apply acted (a second signal)."""

    message = (
        "interrupted while an action ran; start `cp watch` again (or run `cp apply`) to go "
        "on (nothing is done twice)"
    )


def interrupted_by(exc: BaseException) -> Interrupted | None:
    """The signal behind ``exc``, if one is: a signal while a module was imported ends the
    import with an ImportError caused by it (a compiled module: "initialization failed";
    a module imported again while partly initialised: "cannot import name")."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, Interrupted):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise Interrupted


@contextlib.contextmanager
def handling(handler: Handler) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` for the block, then to what they went to."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in before.items():
            signal.signal(sig, old)


def interrupting() -> contextlib.AbstractContextManager[None]:
    """Ctrl-C and SIGTERM end the block with :class:`Interrupted` (Python's default for
    SIGTERM ends the process at once, without a word)."""
    return handling(_interrupt)


class StopBetweenActions:
    """Signal handling while an apply runs; :meth:`asked` is its ``stop`` question."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.acting = False  # the apply asked once: it is about to act
        self.stopping = False

    def asked(self) -> bool:
        self.acting = True
        return self.stopping

    def _signalled(self, _signum: int, _frame: FrameType | None) -> None:
        if self.stopping:
            raise ActingInterrupted
        if not self.acting:
            raise Interrupted
        self.stopping = True
        self.say("stopping after the action in flight (again to stop at once)")

    @contextlib.contextmanager
    def installed(self) -> Iterator[StopBetweenActions]:
        with handling(self._signalled):
            yield self


class Loop(Protocol):
    """What :class:`StopLoop` needs of a loop (controlplane.watch.Watcher)."""

    @property
    def acting(self) -> bool:
        """Whether an apply of the loop's is acting now."""

    def stop(self) -> None:
        """End the loop after the step in flight (an apply: after the action in flight)."""


class StopLoop(StopBetweenActions):
    """Signal handling while a loop runs: the first signal asks it to stop after the step
    in flight, whatever that is (planning, waiting, an apply's action); a second one ends
    it at once, with what an apply's second one says when the loop's apply acts."""

    def __init__(self, say: Callable[[str], None], loop: Loop) -> None:
        super().__init__(say)
        self.loop = loop

    def _signalled(self, _signum: int, _frame: FrameType | None) -> None:
        if self.stopping:
            raise LoopActingInterrupted if self.loop.acting else LoopInterrupted
        self.stopping = True
        self.loop.stop()
        step = "action" if self.loop.acting else "step"
        self.say(f"stopping after the {step} in flight (again to stop at once)")
