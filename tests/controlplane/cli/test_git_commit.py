"""A plan records the commit its specs were read at, marked ``-dirty`` when a spec file
differs from it: a reviewer must know the plan is not what the commit says."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.builders.cli import cp
from tests.builders.git import git

ROOT = Path(__file__).resolve().parents[3]
Capsys = pytest.CaptureFixture[str]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repo with the quickstart specs in a subfolder, committed."""
    specs = tmp_path / "repo" / "specs"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    (tmp_path / "repo" / "README.md").write_text("our GPUs\n")
    git(tmp_path / "repo", "init", "-q")
    git(tmp_path / "repo", "add", ".")
    git(tmp_path / "repo", "commit", "-qm", "specs")
    return specs


def commit_of(capsys: Capsys, specs: Path) -> str:
    res = cp(capsys, "plan", specs, "--json")
    assert res.code == 0, res.err
    return str(res.json()["gitCommit"])


def test_clean_edited_added_deleted(repo: Path, capsys: Capsys) -> None:
    head = git(repo, "rev-parse", "HEAD")
    assert commit_of(capsys, repo) == head, "the store under .cp/ is not a change"
    (repo.parent / "README.md").write_text("edited\n")
    (repo / "notes.txt").write_text("not a spec\n")
    assert commit_of(capsys, repo) == head, "only spec files count"

    cluster = repo / "cluster.yaml"
    cluster.write_text(cluster.read_text() + "# a comment is an edit\n")
    assert commit_of(capsys, repo) == f"{head}-dirty"
    git(repo, "checkout", "--", "cluster.yaml")
    assert commit_of(capsys, repo) == head

    (repo / "workloads" / "extra.yml").write_text("# not committed yet\n")
    assert commit_of(capsys, repo) == f"{head}-dirty", "an untracked spec file counts"
    (repo / "workloads" / "extra.yml").unlink()
    (repo / "workloads" / "vision.yaml").unlink()
    assert commit_of(capsys, repo) == f"{head}-dirty", "a deleted one too"


def test_the_human_plan_shows_the_marker(
    repo: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    (repo / "org.yaml").write_text((repo / "org.yaml").read_text() + "\n")
    monkeypatch.setenv("COLUMNS", "120")
    first = cp(capsys, "plan", repo).out.splitlines()[0]
    assert f"git {head[:12]}-dirty" in first


def test_outside_git_there_is_no_commit(tmp_path: Path, capsys: Capsys) -> None:
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "plan", specs, "--json").json()["gitCommit"] is None
