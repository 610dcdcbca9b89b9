"""Several reconcilers, each from its own clone of the spec repo, sharing one PostgreSQL
store and one (simulated) cluster: a clone that has not pulled a newer commit yet must
not undo what that commit's apply did, and must apply again once it has caught up.

Real git (a bare origin and clones), a real PostgreSQL, the simulator: its state lives
in one folder both clones point at, as a real cluster is one whoever reaches it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from controlplane.store import Store
from tests.builders import cluster, project, workload
from tests.builders.cli import cp
from tests.builders.git import git
from tests.controlplane.test_concurrency import active_jobs

pytestmark = pytest.mark.postgres


def write(repo: Path, names: list[str]) -> None:
    docs = [
        cluster(pools=[{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]),
        project("team", gpus=16),
        *[workload(n, "team", gpus=1) for n in names],
    ]
    (repo / "specs" / "specs.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))


def commit(repo: Path, names: list[str], message: str) -> None:
    write(repo, names)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    git(repo, "push", "-q", "origin", "HEAD:main")


@pytest.fixture
def clones(tmp_path: Path, fresh_db: str) -> tuple[Path, Path]:
    """Two clones, A and B, of a spec repo whose first commit A has applied."""
    origin, seed = tmp_path / "origin.git", tmp_path / "seed"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    subprocess.run(["git", "clone", "-q", str(origin), str(seed)], check=True, capture_output=True)
    (seed / "specs").mkdir()
    (seed / ".gitignore").write_text(".cp/\n")
    commit(seed, ["keep", "old"], "v1")
    shared = tmp_path / "cluster"
    shared.mkdir()
    pair = []
    for name in ("A", "B"):
        clone = tmp_path / name
        subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
        (clone / "specs" / ".cp").mkdir(parents=True)
        (clone / "specs" / ".cp" / "simulator").symlink_to(shared)
        pair.append(clone)
    Store(fresh_db, init=True)
    return pair[0], pair[1]


def running(clone: Path) -> set[str]:
    return set(active_jobs(clone / "specs"))


def test_a_clone_behind_holds_back_and_applies_once_it_has_pulled(
    clones: tuple[Path, Path], fresh_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = clones
    assert cp(capsys, "apply", a / "specs", "--auto-approve", "--db", fresh_db).code == 0
    commit(a, ["keep", "new"], "v2: new in, old out")
    assert cp(capsys, "apply", a / "specs", "--auto-approve", "--db", fresh_db).code == 0
    assert running(a) == {"team/keep", "team/new"}

    # B has not pulled: git there does not know v2 at all
    held = cp(
        capsys, "watch", b / "specs", "--once", "--auto-approve", "--quiet", "0", "--db", fresh_db
    )
    assert held.code == 1
    assert "behind" in held.out and "pull" in held.out, held.out
    assert running(a) == {"team/keep", "team/new"}  # nothing undone
    # fetched but not merged: git knows B's commit is older than the one applied
    git(b, "fetch", "-q")
    by_hand = cp(capsys, "apply", b / "specs", "--auto-approve", "--db", fresh_db)
    assert by_hand.code == 1 and "behind" in by_hand.err, by_hand.err
    assert running(a) == {"team/keep", "team/new"}

    git(b, "merge", "-q", "--ff-only", "origin/main")
    caught_up = cp(
        capsys, "watch", b / "specs", "--once", "--auto-approve", "--quiet", "0", "--db", fresh_db
    )
    assert caught_up.code == 0, caught_up.out
    assert running(a) == {"team/keep", "team/new"}


def test_a_revert_is_a_new_commit_and_is_applied(
    clones: tuple[Path, Path], fresh_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = clones
    assert cp(capsys, "apply", a / "specs", "--auto-approve", "--db", fresh_db).code == 0
    commit(a, ["keep", "new"], "v2")
    assert cp(capsys, "apply", a / "specs", "--auto-approve", "--db", fresh_db).code == 0
    git(a, "revert", "--no-edit", "HEAD")  # the specs of v1 again, in a commit after v2
    git(a, "push", "-q", "origin", "HEAD:main")
    git(b, "pull", "-q")
    back = cp(capsys, "apply", b / "specs", "--auto-approve", "--db", fresh_db)
    assert back.code == 0, back.err
    assert running(a) == {"team/keep", "team/old"}
