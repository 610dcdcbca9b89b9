"""Run the ``cp`` command line: in-process (the same entry point as the console script), or
as several real processes at once (:func:`together`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.cli import run


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def ok(result: Result) -> Result:
    """``result``, after checking that its command succeeded (its output if not)."""
    assert result.code == 0, result.out + result.err
    return result


def cp(capsys: pytest.CaptureFixture[str], *args: str | Path) -> Result:
    capsys.readouterr()
    code = run([str(a) for a in args], "controlplane")
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def write_specs(root: Path, docs: list[dict[str, Any]], name: str = "specs.yaml") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return root


CP = str(Path(sys.executable).parent / "controlplane")


def together(*argvs: list[str | Path], timeout: float = 120) -> list[Result]:
    """Start every ``cp`` command line at once, as separate processes; their results in
    the order given. A small barrier (all processes block on one pipe until every one has
    started) makes them really race."""
    read, write = os.pipe()
    gate = (
        "import os, sys; os.read(int(sys.argv[1]), 1); "
        "from controlplane.cli import main; sys.argv = sys.argv[1:]; sys.argv[0] = 'cp'; "
        "main()"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", gate, str(read), *map(str, argv)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            pass_fds=(read,),
        )
        for argv in argvs
    ]
    os.write(write, b"x" * len(procs))  # open the gate for all of them
    os.close(write)
    os.close(read)
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        out.append(Result(proc.returncode, stdout, stderr))
    return out
