"""Git in a test's own repositories: committer set, output as text."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
}


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS``, checked; its output without the trailing newline."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        env=os.environ | GIT_ENV,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def spec_repo(root: Path, specs: Callable[[Path], object], message: str = "the org") -> Path:
    """A repository at ``root`` on branch main, its state directory ignored, with one
    commit of what ``specs`` writes into ``root / "specs"``."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".cp/\n")
    specs(root / "specs")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return root
