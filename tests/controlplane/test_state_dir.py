"""The control plane's own folder in a spec repo (``.cp/``) ignores itself in git: a spec
repo's ``git add -A`` after an apply used to pick up the SQLite store and the caches."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from controlplane.cli import run
from controlplane.statedir import state_dir

ROOT = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def test_git_sees_nothing_of_what_an_apply_leaves(tmp_path: Path) -> None:
    repo = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "quickstart", repo, ignore=shutil.ignore_patterns(".cp"))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "specs")
    now = "2026-11-22T10:00:00"
    assert run(["apply", str(repo), "--auto-approve", "--now", now], "controlplane") == 0
    assert (repo / ".cp" / "controlplane.db").exists()  # the store is there, and ignored
    assert _git(repo, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_folder_without_specs_is_left_as_it_was(tmp_path: Path) -> None:
    """Best effort, and nothing made where there is nothing: a command run in the wrong
    folder leaves no ``.cp`` behind; one in the way (a file) is no error."""
    for command in (["validate"], ["plan"], ["status"], ["history"], ["get", "workloads"]):
        # no specs: a warning and an empty answer, or (plan: nothing to plan) an error; it
        # used to make a store here
        expected = 1 if command == ["plan"] else 0
        assert run([*command, str(tmp_path)], "controlplane") == expected, command
        assert not (tmp_path / ".cp").exists(), command
    (tmp_path / ".cp").write_text("not a folder")
    assert state_dir(tmp_path) == tmp_path / ".cp"
    assert (tmp_path / ".cp").read_text() == "not a folder"
