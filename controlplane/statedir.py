"""The control plane's own folder in a spec repo, ``.cp/``, and where the simulator keeps
its clusters (with the store that records their jobs)."""

from __future__ import annotations

import contextlib
from pathlib import Path


def state_dir(spec_dir: Path) -> Path:
    """The control plane's own folder in a spec repo (``.cp/``: the spec cache, the default
    store, the simulator's clusters), given a ``.gitignore`` that ignores all of it once it
    exists, so a spec repo's ``git add -A`` never commits a database. Never made here (a
    command run in the wrong folder leaves nothing behind); best effort, as a read-only
    checkout cannot take the file."""
    folder = spec_dir / ".cp"
    ignore = folder / ".gitignore"
    if folder.is_dir() and not ignore.exists():
        with contextlib.suppress(OSError):
            ignore.write_text("# the control plane's cache, store and simulator state\n*\n")
    return folder


def clusters_dir(state: Path, db: str | None) -> Path:
    """The folder the simulator keeps its clusters in (``simulator/`` under it): the one of
    the SQLite store that records their jobs. A spec directory may be swapped for another
    checkout (git-sync's symlink, a CI job's fresh clone) under a store kept outside it
    (``--db``): a simulated cluster left in the old checkout's ``.cp/`` was gone, while
    the store still held placeholders for its jobs. So a SQLite file given by ``--db`` has
    the clusters beside it; without one, the default store and they are in ``state`` (the
    spec repo's ``.cp/``), as they always were, and so are they beside a database that is
    no file (PostgreSQL, in memory)."""
    if db is None:
        return state
    from controlplane.store import sqlite_file  # sqlalchemy, only here

    file = sqlite_file(db)
    return state if file is None else file.parent
