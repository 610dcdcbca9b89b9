"""`cp explain` shows a workload's ten newest history records and says when there are
older ones, and where to read them (it cut them off without a word: the first submit of a
workload with eleven records was missing; trial U)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[3]
Capsys = pytest.CaptureFixture[str]


def test_explain_says_there_is_more_history(tmp_path: Path, capsys: Capsys) -> None:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    vision = specs / "workloads" / "vision.yaml"
    text = vision.read_text()
    for i in range(6):  # a submit, then five edits that each need a new job: 11 records
        vision.write_text(text.replace("train_vit.py]", f"train_vit.py, --v{i}]", 1))
        now = f"2026-12-01T0{i}:00:00Z"
        assert cp(capsys, "apply", specs, "--auto-approve", "--now", now).code == 0
    every = cp(capsys, "history", specs, "--workload", "vision/vit-train", "--json").json()
    assert len(every) == 11, every
    said = cp(
        capsys, "explain", "vision/vit-train", "--dir", specs, "--now", "2026-12-01T06:00:00Z"
    )
    assert said.code == 0
    shown = " ".join(said.out.split())
    assert f"older records: cp history {specs} --workload vision/vit-train" in shown, shown
    doc = cp(
        capsys,
        "explain",
        "vision/vit-train",
        "--dir",
        specs,
        "--now",
        "2026-12-01T06:00:00Z",
        "--json",
    ).json()
    assert len(doc["history"]) == 10 and doc["historyMore"] is True
