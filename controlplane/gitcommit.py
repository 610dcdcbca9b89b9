"""The commit a plan's specs were read at (the plan's ``gitCommit``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def git_commit(spec_dir: Path) -> str | None:
    """The commit the specs were read at, ``<sha>-dirty`` when a spec file under
    ``spec_dir`` differs from it (edited, added or deleted, committed or not), None
    outside a git checkout. Only ``*.yaml``/``*.yml`` outside ``.cp/`` count: what the
    loader reads; a README edit or the store's own files do not make a plan dirty."""
    head = _git(spec_dir, "rev-parse", "HEAD")
    if head is None:
        return None
    changed = _git(
        spec_dir,
        "status",
        "--porcelain",
        "--untracked-files=all",
        "--",
        "*.yaml",
        "*.yml",
        ":(exclude,glob)**/.cp/**",
        ":(exclude).cp",
    )
    return f"{head}-dirty" if changed else head


def _git(spec_dir: Path, *args: str) -> str | None:
    """``git -C spec_dir ARGS``'s output, stripped; None when git fails or is missing."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        res = subprocess.run(
            [git, "-C", str(spec_dir), *args],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() if res.returncode == 0 else None
