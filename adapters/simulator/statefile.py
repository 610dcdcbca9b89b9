"""The simulated cluster's state file, ``<cluster>.json``: what the simulator knows now.

It holds the clock, the next job id, the cluster (nodes, and jobs until a day after they
end), the open runs' starts and the :class:`~adapters.simulator.ledger.Mark` of the
accounting kept beside it (``ledger``). Earlier versions kept the accounting inside it, as
a list of runs (``accounting``): such a file is read as it is, and its runs move to the
accounting file at the first write. The list stays, empty, so that an earlier version
reads the file this one writes.

A file is written whole to a temporary file, flushed to disk and renamed over the old one,
so a crash leaves the old state or the new, never half of one.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict, Field

from adapters.simulator.durable import replace_whole
from adapters.simulator.ledger import Mark
from specs.snapshot import ClusterState, JobRun


class StateFile(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    # where time stands: it only moves on (None: a file from before it was kept)
    clock: datetime | None = None
    next_id: int = Field(alias="nextId")
    state: ClusterState
    # the runs inline: always empty here, but for an earlier version, which reads this
    # list and writes its runs into it (it knows no mark, and drops it)
    accounting: list[JobRun] = Field(default_factory=list)
    ledger: Mark | None = None  # the accounting beside it (None: an earlier version's)
    open_since: dict[str, datetime] = Field(default_factory=dict, alias="openSince")


def read_state(path: Path) -> StateFile:
    """The file at ``path``; OSError or ValueError when it cannot be read as a state."""
    return StateFile.model_validate(json.loads(path.read_bytes()))


def write_state(path: Path, body: StateFile) -> Written:
    """Write ``body`` over ``path`` (atomically); the file written, held open."""
    replace_whole(path, body.model_dump_json(by_alias=True, indent=1).encode())
    # the writer holds the lock: nobody else writes the file before it is open here
    return Written(path, open(path, "rb"))  # closed by Written


class Written:
    """A state file as written, held open: while it is, no other file can have its inode
    number, so a file written over it since is told apart, as is one written in place
    (another modification time or size)."""

    def __init__(self, path: Path, handle: BinaryIO) -> None:
        self.path, self.handle = path, handle
        st = os.fstat(handle.fileno())
        self.seen = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)

    def unchanged(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size) == self.seen

    def close(self) -> None:
        self.handle.close()

    __del__ = close  # an adapter dropped while it holds one
