"""The simulated cluster's accounting database: ended runs, one line each.

It lives beside the cluster's state as ``<cluster>.runs.<generation>.jsonl`` and is written
as slurmdbd's tables are: appended to, never rewritten, so an action writes the runs it
ended and none of the history. The state file holds the :class:`Mark` that says which
generation counts and how many of its bytes: what lies past them was written by an action
whose state never landed (a crash between the two), and the next append cuts it off.
Within a generation the counted bytes only grow, so a reader without the lock reads a
whole, unchanging prefix.

A line is a stamp, a tab, and the run as JSON. The stamp is a time (UTC, fixed width, so
that text order is time order): when the run ended, or the stamp of the line before where
that is later. Stamps never go down from line to line and are never before the run's end,
so the runs that ended since T are all on lines stamped since T: a look at recent runs
finds where those start by bisection and reads from there, not the whole history; a prune
drops the lines stamped before its horizon.

A prune (runs that ended longer ago than the accounting keeps) copies the lines stamped
since the horizon as the next generation, counted once the state says so; the generation
before it stays until the next prune, for a reader that read the state just before.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from adapters.simulator.durable import replace_whole, sync_folder
from specs.snapshot import JobRun

_RUN = TypeAdapter(JobRun)


def _stamp(at: datetime) -> bytes:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode()


class Mark(BaseModel):
    """How much of which generation of the accounting counts."""

    model_config = ConfigDict(populate_by_name=True, frozen=True)

    generation: int = 0
    size: int = Field(default=0, alias="bytes")
    pruned_at: datetime | None = Field(default=None, alias="prunedAt")


class Ledger:
    """The accounting files of cluster ``name`` in ``folder``."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.name = name

    def path(self, generation: int) -> Path:
        return self.folder / f"{self.name}.runs.{generation}.jsonl"

    def read(self, mark: Mark, since: datetime | None = None) -> list[JobRun]:
        """The runs that count (``since``: those that ended at or after it, and some
        before); ValueError for a file shorter than the mark, or a line not a run."""
        if mark.size == 0:
            return []
        path = self.path(mark.generation)
        with open(path, "rb") as f:
            start = _first_written(f, mark.size, _stamp(since)) if since else 0
            f.seek(start)
            counted = f.read(mark.size - start)
        if len(counted) < mark.size - start:
            raise ValueError(f"{path} is shorter than the state says")
        try:
            return [_RUN.validate_json(line.partition(b"\t")[2]) for line in counted.splitlines()]
        except ValueError as exc:
            raise ValueError(f"{path} has a line that is not a run: {exc}") from None

    def check(self, mark: Mark) -> None:
        """ValueError when the bytes ``mark`` counts are not all there."""
        path = self.path(mark.generation)
        if mark.size and (not path.exists() or path.stat().st_size < mark.size):
            raise ValueError(f"its accounting {path} is missing, or shorter than it says")

    def append(self, mark: Mark, runs: Iterable[JobRun], at: datetime) -> Mark:
        """Write ``runs`` (ended by ``at``) after the counted bytes, cutting off any
        uncounted ones first; the mark that counts them too, once the state holds it."""
        ended = sorted(runs, key=lambda r: r.ended_at or at)
        if not ended:
            return mark
        self.check(mark)  # never padded out to the size it should have
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(mark.generation)
        new = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+b") as f:
            last = _last_stamp(f, mark.size)
            lines = []
            for r in ended:  # stamped when it ended, in the order written
                last = max(last, _stamp(r.ended_at or at))
                lines.append(last + b"\t" + _RUN.dump_json(r, by_alias=True) + b"\n")
            f.truncate(mark.size)
            f.seek(mark.size)
            f.write(b"".join(lines))
            f.flush()
            os.fsync(f.fileno())
            size = f.tell()
        if new:
            sync_folder(self.folder)  # the file is there before a state names it
        return mark.model_copy(update={"size": size})

    def prune(self, mark: Mark, horizon: datetime, now: datetime) -> Mark:
        """Drop the lines stamped before ``horizon`` (their runs ended before it): the rest,
        copied as the next generation, and its mark, once the state holds it; ``mark``
        with the prune's time when none is that old."""
        if mark.size == 0:
            return mark.model_copy(update={"pruned_at": now})
        with open(self.path(mark.generation), "rb") as f:
            start = _first_written(f, mark.size, _stamp(horizon))
            if start == 0:
                return mark.model_copy(update={"pruned_at": now})
            f.seek(start)
            kept = f.read(mark.size - start)
        replace_whole(self.path(mark.generation + 1), kept)
        sync_folder(self.folder)  # the file is there before a state names it
        return Mark(generation=mark.generation + 1, size=len(kept), pruned_at=now)

    def adopted(self) -> Mark:
        """The mark of a state that has none (an earlier version wrote it, knowing no
        accounting file): the newest generation, whole. Its runs are of jobs gone from
        the queue, so none is also in that version's runs; a run written by an action
        whose state never landed counts too (a crash, then a change of versions)."""
        newest = max(self._files(), default=None)
        if newest is None:
            return Mark()
        number, path = newest
        with open(path, "rb") as f:
            body = f.read()
        return Mark(generation=number, size=body.rfind(b"\n") + 1)

    def next_generation(self) -> int:
        """A generation no file has yet (for runs carried over from elsewhere)."""
        return 1 + max((g for g, _ in self._files()), default=-1)

    def drop_before(self, generation: int) -> None:
        """Remove the generations older than ``generation``."""
        for number, old in self._files():
            if number < generation:
                with contextlib.suppress(OSError):
                    old.unlink()

    def _files(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.folder.glob(f"{self.name}.runs.*.jsonl"):
            number = path.name[len(self.name) + len(".runs.") : -len(".jsonl")]
            if number.isdigit():
                found.append((int(number), path))
        return found


def _last_stamp(f: BinaryIO, size: int) -> bytes:
    """The stamp of the last of the ``size`` counted bytes' lines (none: the lowest)."""
    window = 4096
    while True:  # back far enough to see where the last line starts
        start = max(0, size - window)
        f.seek(start)
        body = f.read(size - start).rstrip(b"\n")
        if start == 0 or b"\n" in body:
            return body.rsplit(b"\n", 1)[-1].partition(b"\t")[0] if body else b""
        window *= 4


def _first_written(f: BinaryIO, size: int, stamp: bytes) -> int:
    """Where the first line stamped at or after ``stamp`` starts, among the ``size``
    counted bytes of ``f`` (``size``: none is), by bisection over line starts."""

    def line_from(pos: int) -> int:  # the first line start at or after pos
        if pos == 0:
            return 0
        f.seek(pos - 1)
        f.readline()
        return min(f.tell(), size)

    def written_since(start: int) -> bool:
        if start >= size:
            return True
        f.seek(start)
        return f.readline().partition(b"\t")[0] >= stamp

    lo, hi = 0, size
    while lo < hi:
        mid = (lo + hi) // 2
        if written_since(line_from(mid)):
            hi = mid
        else:
            lo = mid + 1
    return line_from(lo)
