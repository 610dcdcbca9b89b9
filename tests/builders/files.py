"""Spec documents written as a spec repo: YAML files under a directory, and where a piece
of text sits in them (so tests assert exact ``file:line:col`` without counting lines)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.builders.specs import Doc, base_docs


def dump(*docs: Doc) -> str:
    """Block-style YAML, keys in the order written, one document per ``---``."""
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False)


def spec_tree(root: Path, files: dict[str, str | list[Doc]] | None = None) -> Path:
    """Write ``files`` (relative path -> YAML text or documents) under ``root``; by default
    the valid base organisation split over two files."""
    if files is None:
        docs = base_docs()
        files = {
            "cluster.yaml": docs[:1],
            "org/tree.yaml": docs[1:3],
            "workloads/chem.yaml": docs[3:],
        }
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else dump(*content))
    return root


def position(path: Path, needle: str, occurrence: int = 1, *, offset: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the ``occurrence``-th ``needle`` in ``path``, plus ``offset`` columns."""
    text = path.read_text()
    index = -1
    for _ in range(occurrence):
        index = text.index(needle, index + 1)
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, column + offset
