"""Files the simulator must not lose or leave half written: its state and accounting."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def replace_whole(path: Path, data: bytes) -> None:
    """``data`` as the file ``path``: written aside, flushed to disk and renamed over it,
    so a crash leaves the old file or the new, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def sync_folder(folder: Path) -> None:
    """Make the names in ``folder`` durable (a file made or renamed there)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
