"""The control plane's own folder in a spec repo: ``.cp/``."""

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
