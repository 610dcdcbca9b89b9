"""A store that is not there is not made by a command that only reads, and ``cp history
--verify`` does not call an absent history intact: a user deleted ``.cp/controlplane.db``
and was told "history intact: 0 records" (exit 0), while that very command created a
fresh empty database in its place; ``cp history /nonexistent/dir --verify`` was intact
too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]

# the commands that only read, with the rest of a command line that would work
READERS: dict[str, list[str]] = {
    "history": ["history", "{dir}"],
    "history --verify": ["history", "{dir}", "--verify"],
    "show": ["show", "0123", "--dir", "{dir}"],
    "status": ["status", "{dir}"],
    "get": ["get", "workloads", "{dir}"],
    "usage": ["usage", "{dir}"],
    "explain": ["explain", "p/w", "--dir", "{dir}"],
    "explain a workload not in the specs": ["explain", "p/gone", "--dir", "{dir}"],
    "cost": ["cost", "p/w", "--dir", "{dir}"],
}


def test_verify_refuses_a_deleted_store_and_does_not_recreate_it(
    quickstart: Path, capsys: Capsys
) -> None:
    """rm .cp/controlplane.db, then `cp history . --verify`: "history intact: 0 records",
    exit 0, and a new empty database where the deleted one was."""
    assert cp(capsys, "apply", quickstart, "--auto-approve").code == 0
    db = quickstart / ".cp" / "controlplane.db"
    db.unlink()
    res = cp(capsys, "history", quickstart, "--verify")
    assert res.code == 1 and "history intact" not in res.out, (res.out, res.err)
    [line] = res.err.splitlines()  # one line: what was expected, where, what to do
    assert "no store to verify" in line and str(db) in line and "--db" in line, line
    doc = json.loads(cp(capsys, "history", quickstart, "--verify", "--json").out)
    assert doc["ok"] is False and doc["error"]["kind"] == "store", doc
    plain = cp(capsys, "history", quickstart)
    assert plain.code == 0 and "No actions applied yet" in plain.out
    assert not db.exists(), "a read-only command created a database"


def test_a_directory_that_does_not_exist_is_refused(tmp_path: Path, capsys: Capsys) -> None:
    """`cp history /nonexistent/dir --verify` said intact and `cp history /nonexistent`
    "No actions applied yet." (exit 0); `cp status` there says it is no directory of specs."""
    nowhere = tmp_path / "no" / "such" / "dir"
    for args in (["--verify"], [], ["--json"]):
        res = cp(capsys, "history", nowhere, *args)
        assert res.code == 1, (args, res.out, res.err)
        said = res.out if "--json" in args else res.err
        assert "is not a directory of specs" in said, (args, said)
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("name", sorted(READERS))
def test_no_read_only_command_creates_the_database(
    name: str, tmp_path: Path, capsys: Capsys
) -> None:
    """Each of them made an empty ``controlplane.db`` in a spec repo that had lost its own."""
    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=2), workload("w", "p")])
    (specs / ".cp").mkdir()  # a spec repo used before, whose store was lost
    args = [a.format(dir=specs) for a in READERS[name]]
    cp(capsys, *args)
    assert not (specs / ".cp" / "controlplane.db").exists(), name


def test_a_plan_still_starts_the_store(tmp_path: Path, capsys: Capsys) -> None:
    """``cp plan`` keeps its plan record (``cp show``, ``cp apply --reviewed`` find it):
    its first run in a spec repo creates the store, as before."""
    specs = write_specs(tmp_path / "s", [cluster(), project("p", gpus=2), workload("w", "p")])
    plan = cp(capsys, "plan", specs, "--json")
    assert plan.code == 0 and (specs / ".cp" / "controlplane.db").exists()
    assert cp(capsys, "show", plan.json()["id"][:8], "--dir", specs).code == 0
