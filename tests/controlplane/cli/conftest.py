"""Fixtures of the command line's tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    """A copy of the bundled quick start example, without its store."""
    dst = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", dst, ignore=shutil.ignore_patterns(".cp"))
    return dst
