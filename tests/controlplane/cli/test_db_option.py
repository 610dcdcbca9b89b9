"""``--db`` (and ``CP_DB``) never creates directories, whichever command is given it: a
typo in a path must fail, not scatter new folders (the default store under DIR/.cp/ is
the one folder the control plane makes itself)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]

# every command that takes --db, with the rest of a command line that would work
INVOCATIONS: dict[str, list[str]] = {
    "observe": ["observe", "{dir}"],
    "plan": ["plan", "{dir}"],
    "apply": ["apply", "{dir}", "--auto-approve"],
    "watch": ["watch", "{dir}", "--once", "--auto-approve"],
    "history": ["history", "{dir}"],
    "show": ["show", "0123", "--dir", "{dir}"],
    "status": ["status", "{dir}"],
    "get": ["get", "workloads", "{dir}"],
    "usage": ["usage", "{dir}"],
    "explain": ["explain", "p/w", "--dir", "{dir}"],
    "cost": ["cost", "p/w", "--dir", "{dir}"],
    "store init": ["store", "init", "{dir}"],
    "store forget-cluster": ["store", "forget-cluster", "gone", "{dir}"],
    "store prune": ["store", "prune", "{dir}", "--older-than", "90d"],
}


def test_every_command_with_db_is_covered() -> None:
    from controlplane.cli import commands  # noqa: F401
    from controlplane.cli.app import app

    found: set[str] = set()

    def walk(command: object, prefix: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*prefix, name])
        if any(p.name == "db" for p in getattr(command, "params", [])):
            found.add(" ".join(prefix))

    walk(typer.main.get_command(app), [])
    assert found == set(INVOCATIONS)


@pytest.mark.parametrize("name", sorted(INVOCATIONS))
def test_a_missing_directory_is_refused_not_created(
    name: str, tmp_path: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = write_specs(
        tmp_path / "specs", [cluster(), project("p", gpus=2), workload("w", "p", gpus=1)]
    )
    missing = tmp_path / "no" / "such" / "dir"
    args = [a.format(dir=specs) for a in INVOCATIONS[name]]
    # watch reports a failed cycle on its line (and with --once exits 1 for it)
    code = 1
    res = cp(capsys, *args, "--db", f"sqlite:///{missing / 'cp.db'}")
    assert res.code == code, (res.out, res.err)
    said = res.out if name == "watch" else res.err
    assert "does not exist" in said and "--db never creates directories" in said
    monkeypatch.setenv("CP_DB", f"sqlite:///{missing / 'cp.db'}")
    assert cp(capsys, *args).code == code, "the same through CP_DB"
    assert not (tmp_path / "no").exists()
