"""A plan file applied from a pull request's branch that was then abandoned.

The clusters follow the specs of a commit no branch has any more; main's apply is refused
as behind it (it would undo that apply), and the refusal said "pull it", where there was
nothing to pull (user trial). It says what the commit is and how to go on from there.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.builders.cli import cp
from tests.builders.git import git

ROOT = Path(__file__).resolve().parents[2]
Capsys = pytest.CaptureFixture[str]


def test_a_plan_applied_from_a_deleted_branch_says_how_to_go_on(
    tmp_path: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    specs = repo / "specs"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "specs")
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0

    pr = _applied_from_a_deleted_branch(repo, specs, capsys, push=False)

    refused = cp(capsys, "apply", specs, "--auto-approve")
    assert refused.code == 1
    assert f"git {pr[:12]}" in refused.err and "on no branch here" in refused.err, refused.err
    assert "pull it" not in refused.err
    assert "git merge" in refused.err and "git commit --allow-empty" in refused.err
    # the plan of this checkout says so before anyone applies it (trialS)
    planned = cp(capsys, "plan", specs, "--json")
    assert planned.code == 0 and "on no branch here" in planned.json()["alerts"][0]
    said = cp(capsys, "plan", specs)
    assert "warning: this checkout" in said.err and "refuses to act" in said.err
    # a commit after that plan (git keeps seconds: one made in the plan's second counts as
    # older, and the checkout as behind)
    later = datetime.now(UTC) + timedelta(seconds=2)
    monkeypatch.setenv("GIT_COMMITTER_DATE", later.isoformat())
    git(repo, "commit", "-q", "--allow-empty", "-m", "back to main's specs")
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0


def test_a_plan_applied_from_a_branch_only_a_remote_tracking_ref_still_has(
    tmp_path: Path, capsys: Capsys
) -> None:
    """The branch was pushed, applied from, then deleted upstream and here; this clone never
    ran `git fetch --prune`, so its `origin/pr7` still has the commit, and the refusal said
    "pull it" only (closing note of issue 10): pulling brings nothing. It names the
    remote-tracking branch and gives both ways on."""
    origin, repo, specs = _pushed_and_applied(tmp_path, capsys)

    pr = _applied_from_a_deleted_branch(repo, specs, capsys, push=True)
    git(origin, "branch", "-qD", "pr7")  # deleted upstream; origin/pr7 stays here

    refused = cp(capsys, "apply", specs, "--auto-approve")
    assert refused.code == 1
    said = " ".join(refused.err.split())
    assert f"git {pr[:12]}" in said and "only remote-tracking branches have it: origin/pr7" in said
    assert "pull" in said and "git fetch --prune" in said, said
    assert "git merge" in said and "git commit --allow-empty" in said, said


def test_a_clone_that_fetched_but_did_not_merge_is_told_to_pull(
    tmp_path: Path, capsys: Capsys
) -> None:
    """The everyday case: a teammate pushed to main and applied; this clone fetched
    (`origin/main`, its main's upstream, has the commit) but did not merge. Pulling is
    the way on, and the refusal says only that (review: the remote-tracking branch message
    suggested an empty commit here, which would undo the teammate's apply)."""
    _, repo, specs = _pushed_and_applied(tmp_path, capsys)
    vision = specs / "workloads" / "vision.yaml"
    vision.write_text(vision.read_text().replace("walltime: 12h", "walltime: 10h", 1))
    git(repo, "commit", "-qam", "teammate: 10h")
    git(repo, "push", "-q", "origin", "main")
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    git(repo, "reset", "-q", "--hard", "HEAD~1")  # fetched, not merged: as origin/main left it

    refused = cp(capsys, "apply", specs, "--auto-approve")
    said = " ".join(refused.err.split())
    assert refused.code == 1 and "which comes after it; pull it" in said, said
    assert "--allow-empty" not in said and "remote-tracking" not in said, said


def _pushed_and_applied(tmp_path: Path, capsys: Capsys) -> tuple[Path, Path, Path]:
    """A spec repo whose main is pushed to a bare origin (and tracks it), applied: the
    origin, the clone and its specs."""
    origin, repo = tmp_path / "origin.git", tmp_path / "repo"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    specs = repo / "specs"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "specs")
    git(repo, "push", "-q", "-u", "origin", "main")
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    return origin, repo, specs


def _applied_from_a_deleted_branch(repo: Path, specs: Path, capsys: Capsys, *, push: bool) -> str:
    """Branch pr7 (``push``: pushed to origin) edits a walltime; its plan file is applied,
    and the branch deleted here. Its commit."""
    git(repo, "checkout", "-qb", "pr7")
    vision = specs / "workloads" / "vision.yaml"
    vision.write_text(vision.read_text().replace("walltime: 12h", "walltime: 10h", 1))
    git(repo, "commit", "-qam", "augment workers: 10h")
    if push:
        git(repo, "push", "-q", "origin", "pr7")
    pr = git(repo, "rev-parse", "HEAD")
    saved = repo.parent / "pr7.json"
    assert cp(capsys, "plan", specs, "--out", saved).code == 0
    assert cp(capsys, "apply", saved, "--dir", specs, "--auto-approve").code == 0
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-qD", "pr7")
    return pr
