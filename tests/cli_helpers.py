"""Run the ``cp`` command line in-process (the same entry point as the console script)."""

from __future__ import annotations

import json
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


def cp(capsys: pytest.CaptureFixture[str], *args: str | Path) -> Result:
    capsys.readouterr()
    code = run([str(a) for a in args], "controlplane")
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def write_specs(root: Path, docs: list[dict[str, Any]], name: str = "specs.yaml") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return root
