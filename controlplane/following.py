"""The changes under a spec directory that ``cp watch`` is told of, from the directory
its path names now: a spec directory may be replaced under the loop (git-sync pointing its
symlink at the next checkout, a fresh copy renamed into place), and a file watcher keeps
watching the one it started on."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Generator
from collections.abc import Set as AbstractSet
from pathlib import Path

REPLACED = "replaced"  # the kind of change :class:`Followed` reports for a new directory
Batch = AbstractSet[tuple[object, str]]  # one report of changes: (kind, path); empty: a tick


class Followed:
    """The changes ``watch()`` reports under ``spec_dir``, watched afresh whenever the path
    names another directory: a file watcher keeps watching the directory it started on,
    and once that one is replaced (a symlink pointed at the next checkout, a copy renamed
    into place, removed and made again) it reports nothing more, and edits reached the
    loop only at its interval. The replacement is reported as a change (``REPLACED``)
    once the new directory's watch has started, so that nothing written after the cycle
    it starts reads the files is missed; while no directory is there, ticks. Ends when
    ``stopping`` is set (``watch()`` ends then too)."""

    def __init__(
        self,
        spec_dir: Path,
        watch: Callable[[], Generator[Batch, None, None]],
        stopping: threading.Event,
    ) -> None:
        self.spec_dir, self.watch, self.stopping = spec_dir, watch, stopping
        self.known = _identity(spec_dir)
        self.changes: Generator[Batch, None, None] | None = None

    def __iter__(self) -> Followed:
        return self

    def __next__(self) -> Batch:
        if self.stopping.is_set():
            self._close()
            raise StopIteration
        now = _identity(self.spec_dir)
        replaced = now != self.known
        if replaced:
            self._close()
            self.known = now
        if self.changes is None and now is not None:
            self.changes = self.watch()
        batch: Batch = set()
        if self.changes is None:
            self.stopping.wait(1.0)  # between a removal and its successor
        else:
            try:
                batch = next(self.changes)  # StopIteration: stopped
            except FileNotFoundError:
                self._close()  # removed as its watch started: looked at again next time
        return {*batch, (REPLACED, str(self.spec_dir))} if replaced else batch

    def _close(self) -> None:
        if self.changes is not None:
            self.changes.close()
            self.changes = None


def _identity(path: Path) -> tuple[int, int] | None:
    """Which directory ``path`` names now (symlinks followed), or None when none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino
