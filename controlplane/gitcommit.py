"""The commit a plan's specs were read at (the plan's ``gitCommit``), and what git knows
of two commits' order (controlplane/lineage.py)."""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime
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


def contains(spec_dir: Path, newer: str, older: str) -> bool | None:
    """Whether commit ``newer`` has ``older`` in its history (or is it); None when git
    cannot tell here (a commit this checkout has not fetched, no git)."""
    if _git(spec_dir, "cat-file", "-e", f"{older}^{{commit}}") is None:
        return None
    if _git(spec_dir, "cat-file", "-e", f"{newer}^{{commit}}") is None:
        return None
    return _git(spec_dir, "merge-base", "--is-ancestor", older, newer) is not None


def branches_with(spec_dir: Path, commit: str) -> tuple[list[str], list[str]] | None:
    """The branches here that have ``commit`` in their history: local ones, and
    remote-tracking ones (``origin/pr7``) no local branch follows (``origin/main`` that
    ``main`` tracks counts as ``main``'s: pulling brings it); None when git cannot tell."""
    refs = _git(
        spec_dir,
        "for-each-ref",
        "--format=%(refname)",
        "--contains",
        commit,
        "refs/heads",
        "refs/remotes",
    )
    if refs is None:
        return None
    names = refs.split()
    followed = _git(spec_dir, "for-each-ref", "--format=%(upstream)", "refs/heads") or ""
    local = [r.removeprefix("refs/heads/") for r in names if r.startswith("refs/heads/")]
    local += [r for r in names if r in followed.split()]  # pulling brings those
    remote = [
        r.removeprefix("refs/remotes/")
        for r in names
        if r.startswith("refs/remotes/") and not r.endswith("/HEAD") and r not in local
    ]
    return local, remote


def committed_at(spec_dir: Path, commit: str) -> datetime | None:
    """When ``commit`` was committed (its committer date), None when git cannot tell."""
    stamp = _git(spec_dir, "show", "-s", "--format=%cI", commit)
    try:
        return datetime.fromisoformat(stamp) if stamp else None
    except ValueError:
        return None


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
