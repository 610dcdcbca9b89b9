"""A snapshot file people edit by hand (``--observed``) is refused with the place of its
first problem, ``file:line:col``, as a spec is: it named the field (``clusters.0.nodes.0
.gpus``) and left the user to count list items (user trial)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from controlplane.errors import StateFileError
from controlplane.statefiles import read_snapshot

SNAPSHOT = {
    "now": "2026-11-22T10:00:00Z",
    "clusters": [
        {
            "name": "sim",
            "nodes": [
                {"name": "a-1", "pool": "a", "gpuType": "a100", "gpus": 8, "state": "idle"},
                {"name": "a-2", "pool": "a", "gpuType": "a100", "gpus": 8, "state": "idle"},
            ],
        }
    ],
}


def _refusal(path: Path) -> str:
    with pytest.raises(StateFileError) as caught:
        read_snapshot(path)
    return str(caught.value)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_bad_value_is_refused_at_its_line_and_column(tmp_path: Path, suffix: str) -> None:
    good = tmp_path / f"good{suffix}"
    as_yaml = yaml.safe_dump(SNAPSHOT, sort_keys=False)  # each node's name first
    good.write_text(as_yaml if suffix == ".yaml" else json.dumps(SNAPSHOT, indent=2))
    assert read_snapshot(good).clusters[0].nodes[1].gpus == 8
    lines = good.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if "a-2" in line)  # the second node
    row += next(i for i, line in enumerate(lines[row:]) if "gpus" in line)
    lines[row] = lines[row].replace("8", '"eight"')
    bad = tmp_path / f"bad{suffix}"
    bad.write_text("\n".join(lines) + "\n")
    column = lines[row].index('"eight"') + 1
    said = _refusal(bad)
    assert said.startswith(f"{bad}:{row + 1}:{column}: "), said
    assert "clusters.0.nodes.1.gpus" in said and "cp observe" in said


def test_a_syntax_error_is_refused_at_its_place(tmp_path: Path) -> None:
    bad = tmp_path / "cut.yaml"
    bad.write_text("now: 2026-11-22T10:00:00Z\nclusters:\n- name: sim\n  nodes: [\n")
    assert _refusal(bad).startswith(f"{bad}:5:1: "), _refusal(bad)


def test_a_missing_file_has_no_place(tmp_path: Path) -> None:
    said = _refusal(tmp_path / "none.yaml")
    assert said.startswith(f"{tmp_path / 'none.yaml'} is not a snapshot"), said
