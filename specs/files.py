"""Which files of a spec repo are specs, and how their paths are shown.

A spec file is a ``.yaml`` or ``.yml`` file under the root with no hidden file or folder on
the way: ``.cp/`` (the store and the simulator's state), ``.git/`` and ``.github/`` are
never read. The loader walks the repo by this rule, and ``cp watch`` asks it which
changes start a cycle.
"""

from __future__ import annotations

import os
from pathlib import Path

from specs.diagnostics import Diagnostic


def spec_files(root: Path, errors: list[Diagnostic]) -> list[Path]:
    """Every spec file, in the order of its path relative to ``root``; a folder that cannot
    be read is an error in ``errors``."""
    if root.is_file():
        return [root]

    def unreadable(err: OSError) -> None:
        errors.append(
            Diagnostic(display(Path(err.filename or root)), 1, 1, f"cannot read: {err.strerror}")
        )

    found = []
    for folder, subfolders, names in os.walk(root, onerror=unreadable):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]  # includes .cp/
        for name in names:
            if is_spec_path(name):
                path = Path(folder, name)
                found.append((path.relative_to(root).as_posix(), path))
    return [path for _, path in sorted(found)]


def is_spec_path(relative: str) -> bool:
    """Whether a path relative to the spec root is a spec file: ``.yaml``/``.yml``, with no
    hidden file or folder on the way (``.cp/``, ``.git/``, ``.github/`` are not specs)."""
    parts = Path(relative).parts
    return relative.endswith((".yaml", ".yml")) and not any(p.startswith(".") for p in parts)


def display(path: Path) -> str:
    """The path as the user would type it: relative to the working directory when under it."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
