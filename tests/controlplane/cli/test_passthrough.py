"""`cp` is also coreutils' copy: a plain copy must cost what a copy costs, and a mistyped
subcommand must not be handed to coreutils (which would say "cannot stat 'stauts'").

The console script is run as a real process, the way a shell runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controlplane.cli.passthrough import COMMANDS, suggestion

EXE = Path(sys.executable).parent / "cp"
# what a plain copy must never load: the command line's libraries and our own packages
HEAVY = ("typer", "click", "rich", "pydantic", "yaml", "ruamel", "sqlmodel", "sqlalchemy")
OURS = ("specs", "solvers", "adapters")


def _imported(stderr: str) -> set[str]:
    """Module names from ``python -X importtime`` lines (``import time: self | total | name``)."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                names.add(name)
    return names


def test_a_plain_copy_imports_nothing_heavy(tmp_path: Path) -> None:
    src, dst = tmp_path / "a.txt", tmp_path / "b.txt"
    src.write_text("hello")
    res = subprocess.run(
        [sys.executable, "-X", "importtime", str(EXE), str(src), str(dst)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert dst.read_text() == "hello", "coreutils copied the file"
    names = _imported(res.stderr)
    assert "controlplane.cli.passthrough" in names, "the trace saw our entry point"
    loaded = {n for n in names if n.split(".")[0] in HEAVY + OURS}
    assert not loaded, f"a plain copy imported {sorted(loaded)}"
    ours = {n for n in names if n.split(".")[0] == "controlplane"}
    assert ours == {"controlplane", "controlplane.cli", "controlplane.cli.passthrough"}
    assert "pathlib" not in names or "__editable__" in res.stderr, "stdlib kept small too"


def _run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *map(str, args)], capture_output=True, text=True, cwd=cwd, check=False
    )


def test_a_mistyped_subcommand_gets_a_suggestion_not_coreutils(tmp_path: Path) -> None:
    res = _run("stauts", ".", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip() == "cp: unknown command 'stauts'; did you mean 'status'?"
    assert "cannot stat" not in res.stderr
    # the same through the other name
    res = subprocess.run(
        [str(EXE.parent / "controlplane"), "valdiate"], capture_output=True, text=True
    )
    assert res.returncode == 2 and "did you mean 'validate'?" in res.stderr


def test_an_existing_path_that_looks_like_a_typo_is_copied(tmp_path: Path) -> None:
    (tmp_path / "stauts").write_text("a file with an unlucky name")
    res = _run("stauts", "copy", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "copy").read_text() == "a file with an unlucky name"


def test_words_far_from_every_command_still_go_to_coreutils(tmp_path: Path) -> None:
    res = _run("nothing-here", "x", cwd=tmp_path)
    assert res.returncode == 1 and "nothing-here" in res.stderr and "did you mean" not in res.stderr


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("stauts", "status"), ("pln", "plan"), ("aply", "apply"), ("explian", "explain")],
)
def test_near_misses(typed: str, meant: str) -> None:
    assert suggestion(typed) == meant


@pytest.mark.parametrize("word", ["a", "b.txt", "src/", "-r", "--verbose", "data", "notes.md"])
def test_not_near_misses(word: str) -> None:
    assert suggestion(word) is None


def test_completion_options_are_ours(tmp_path: Path) -> None:
    """``--show-completion`` prints the script for the login shell; ``--install-completion``
    writes it where the shell looks and says so (twice is the same as once)."""
    env = {**os.environ, "SHELL": "/bin/bash", "HOME": str(tmp_path)}
    shown = subprocess.run([str(EXE), "--show-completion"], capture_output=True, text=True, env=env)
    assert shown.returncode == 0 and "_CP_COMPLETE=complete_bash" in shown.stdout
    for _ in range(2):
        done = subprocess.run(
            [str(EXE), "--install-completion"], capture_output=True, text=True, env=env
        )
        assert done.returncode == 0, done.stderr
    script = tmp_path / ".bash_completions" / "cp.sh"
    assert script.read_text().strip() == shown.stdout.strip()
    assert (tmp_path / ".bashrc").read_text().count(f"source '{script}'") == 1
    assert str(script) in done.stdout
    env["SHELL"] = "/bin/tcsh"
    res = subprocess.run([str(EXE), "--show-completion"], capture_output=True, text=True, env=env)
    assert res.returncode == 2 and "bash, zsh or fish" in res.stderr


def test_completion_subcommand_prints_scripts() -> None:
    for shell, marker in (("bash", "complete "), ("zsh", "compdef"), ("fish", "complete ")):
        res = _run("completion", shell)
        assert res.returncode == 0, res.stderr
        assert marker in res.stdout and "_CP_COMPLETE" in res.stdout
        # cp is also the copy command: the shells must still offer file names
        assert "--no-files" not in res.stdout
    res = _run("completion", "tcsh")
    assert res.returncode == 2


def test_the_bash_script_completes_subcommands_and_leaves_files_to_bash(tmp_path: Path) -> None:
    """What the shell does on TAB: run ``cp`` with the completion variables set."""
    env = {**os.environ, "_CP_COMPLETE": "complete_bash", "COMP_WORDS": "cp sta", "COMP_CWORD": "1"}
    res = subprocess.run([str(EXE)], capture_output=True, text=True, env=env)
    assert res.returncode == 0 and res.stdout.split() == ["status"]
    env["COMP_WORDS"], env["COMP_CWORD"] = "cp a.txt ", "2"
    res = subprocess.run([str(EXE)], capture_output=True, text=True, env=env)
    assert res.stdout.strip() == "", "nothing of ours: bash falls back to file names"


def test_every_command_is_listed() -> None:
    assert "completion" in COMMANDS
