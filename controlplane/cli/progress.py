"""A spinner on stderr while a step runs longer than a second, and only on a terminal.

The steps announce themselves through controlplane/activity.py; this is the reporter the
command line installs. Nothing is drawn when stderr is not a terminal (pipes, CI logs,
tests stay clean), nor for steps that finish within the delay (most plans), so quick
commands never flicker. Steps may nest (observing inside applying): one spinner shows
the innermost step's words, and what it last noted of where it stands (a long plan's
round and step).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.status import Status

DELAY = 1.0  # seconds a step runs before the spinner appears


class Spinner:
    """One spinner for every step of one command (rich allows one live display)."""

    def __init__(self, console: Console, delay: float | None = None) -> None:
        self.console = console
        self.delay = DELAY if delay is None else delay
        self.steps: list[str] = []
        self.detail = ""  # the innermost step's latest note
        self.status: Status | None = None
        self.timer: threading.Timer | None = None
        self.lock = threading.Lock()

    @contextmanager
    def __call__(self, what: str) -> Iterator[None]:
        if not self.console.is_terminal:
            yield
            return
        with self.lock:
            self.steps.append(what)
            self.detail = ""
            if self.status is not None:
                self.status.update(self._words())
            elif self.timer is None:
                self.timer = threading.Timer(self.delay, self._show)
                self.timer.daemon = True
                self.timer.start()
        try:
            yield
        finally:
            with self.lock:
                self.steps.pop()
                self.detail = ""
                if self.steps and self.status is not None:
                    self.status.update(self._words())
                elif not self.steps:
                    self._hide()

    def note(self, detail: str) -> None:
        """Where the innermost step stands, shown after its words."""
        with self.lock:
            if not self.steps:
                return
            self.detail = detail
            if self.status is not None:
                self.status.update(self._words())

    def _words(self) -> str:  # with the lock held
        what = self.steps[-1]
        return f"{what} ({self.detail}) …" if self.detail else f"{what} …"

    def _show(self) -> None:
        with self.lock:
            self.timer = None
            if self.steps and self.status is None:
                self.status = self.console.status(self._words(), spinner="dots")
                self.status.start()

    def _hide(self) -> None:  # with the lock held
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.status is not None:
            self.status.stop()
            self.status = None
