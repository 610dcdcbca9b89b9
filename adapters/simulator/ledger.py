"""The simulated cluster's accounting database: ended runs, one JSON line each.

It lives beside the cluster's state as ``<cluster>.runs.<generation>.jsonl`` and is written
as slurmdbd's tables are: appended to, never rewritten, so an action writes the runs it
ended and none of the history. The state file holds the :class:`Mark` that says which
generation counts and how many of its bytes: what lies past them was written by an action
whose state never landed (a crash between the two), and the next append cuts it off.
Within a generation the counted bytes only grow, so a reader without the lock reads a
whole, unchanging prefix.

A prune (runs that ended longer ago than the accounting keeps) writes the kept runs as the
next generation, counted once the state says so; the generation before it stays until the
next prune, for a reader that read the state just before.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from specs.snapshot import JobRun

_LINE = TypeAdapter(JobRun)


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

    def read(self, mark: Mark) -> list[JobRun]:
        """The runs that count."""
        if mark.size == 0:
            return []
        with open(self.path(mark.generation), "rb") as f:
            counted = f.read(mark.size)
        if len(counted) < mark.size:
            raise ValueError(f"{self.path(mark.generation)} is shorter than the state says")
        return [_LINE.validate_json(line) for line in counted.splitlines() if line]

    def check(self, mark: Mark) -> None:
        """ValueError when the bytes ``mark`` counts are not all there."""
        path = self.path(mark.generation)
        if mark.size and (not path.exists() or path.stat().st_size < mark.size):
            raise ValueError(f"its accounting {path} is missing, or shorter than it says")

    def append(self, mark: Mark, runs: Iterable[JobRun]) -> Mark:
        """Write ``runs`` after the counted bytes (cutting off any uncounted ones first);
        the mark that counts them too, once the state holds it."""
        lines = b"".join(_LINE.dump_json(r, by_alias=True) + b"\n" for r in runs)
        if not lines:
            return mark
        self.check(mark)  # never padded out to the size it should have
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path(mark.generation), os.O_RDWR | os.O_CREAT, 0o644)
        with os.fdopen(fd, "r+b") as f:
            f.truncate(mark.size)
            f.seek(mark.size)
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())
        return mark.model_copy(update={"size": mark.size + len(lines)})

    def prune(self, mark: Mark, horizon: datetime, now: datetime) -> Mark:
        """The runs still open or ended at or after ``horizon``, written whole as the next
        generation; its mark, once the state holds it."""
        kept = [r for r in self.read(mark) if r.ended_at is None or r.ended_at >= horizon]
        lines = b"".join(_LINE.dump_json(r, by_alias=True) + b"\n" for r in kept)
        target = self.path(mark.generation + 1)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(lines)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return Mark(generation=mark.generation + 1, size=len(lines), pruned_at=now)

    def drop_before(self, generation: int) -> None:
        """Remove the generations older than ``generation``."""
        for old in self.folder.glob(f"{self.name}.runs.*.jsonl"):
            number = old.name[len(self.name) + len(".runs.") : -len(".jsonl")]
            if number.isdigit() and int(number) < generation:
                with contextlib.suppress(OSError):
                    old.unlink()
