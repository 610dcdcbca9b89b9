"""A reader that leaves early (`cp apply --auto-approve | head -1`): click ended the command
at its next write, silently, with exit 1. An apply stopped between two actions with part
of its plan done, and nobody was told (user trial). Now the command goes on with its output
dropped and ends with its own exit code; `cp watch` stops as on a first Ctrl-C. Real
processes of the installed `cp`, with a pipe closed by the reader."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CP = Path(sys.executable).parent / "cp"


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    dst = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", dst, ignore=shutil.ignore_patterns(".cp"))
    return dst


def first_line_only(*args: str | Path, merged: bool = False) -> tuple[int, str, str]:
    """Run ``cp args``, read its first line of output and close the pipe, as ``| head -1``
    does (``merged``: ``2>&1 | head -1``); (exit code, that line, what it said on stderr)."""
    child = subprocess.Popen(
        [CP, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    child.stdout.close()
    err = child.stderr.read() if child.stderr is not None else ""
    return child.wait(timeout=120), line, err


def test_an_apply_whose_reader_left_applies_its_whole_plan(quickstart: Path) -> None:
    code, line, err = first_line_only("apply", quickstart, "--auto-approve")
    assert line.startswith("Plan ") and code == 0, err
    left = subprocess.run(
        [CP, "plan", quickstart, "--detailed-exitcode"], capture_output=True, text=True
    )
    assert left.returncode == 0, "nothing left to do: " + left.stdout


@pytest.mark.parametrize("json", [False, True], ids=["text", "json"])
def test_a_plan_whose_reader_left_ends_as_it_would(quickstart: Path, json: bool) -> None:
    code, line, err = first_line_only("plan", quickstart, *(["--json"] if json else []))
    assert line.strip() and code == 0 and "Traceback" not in err


def test_a_watch_whose_reader_left_stops_as_on_ctrl_c(quickstart: Path) -> None:
    code, line, err = first_line_only("watch", quickstart, "--interval", "0.5", "--quiet", "0")
    assert line.strip() and code == 0, err
    assert "output closed: stopping after the step in flight" in err


def test_a_watch_whose_only_pipe_closed_stops_too(quickstart: Path) -> None:
    """`cp watch 2>&1 | head`: the word that it stops had nowhere to go either."""
    code, line, _ = first_line_only(
        "watch", quickstart, "--interval", "0.5", "--quiet", "0", merged=True
    )
    assert "cycle 1" in line and code == 0
