"""Spec warnings (quotas the clusters cannot honour, children over their department) are
shown by validate and plan, human and JSON, each at its file:line:col."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import cluster, department, project, workload
from tests.builders.cli import cp
from tests.builders.files import dump, position

Capsys = pytest.CaptureFixture[str]


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    (tmp_path / "org.yaml").write_text(
        dump(
            cluster(),  # 64 GPUs
            department("science", gpus=80),
            project("chem", gpus=60, department="science"),
            project("bio", gpus=30, department="science"),
            workload("w", "chem", gpus=1, walltime="1h"),
        )
    )
    return tmp_path


def test_validate_and_plan_show_the_warnings(specs: Path, capsys: Capsys) -> None:
    org = specs / "org.yaml"
    line, column = position(org, "gpus: 80", offset=len("gpus: "))
    for command in (["validate"], ["plan"]):
        doc = cp(capsys, *command, specs, "--json").json()
        found = sorted(
            (w["line"], w["column"], w["field"], w["message"][:40]) for w in doc["warnings"]
        )
        assert found == [
            (line, column, "spec.quota.gpus", "deserved 80 GPUs, but the clusters hold "),
            (line, column, "spec.quota.gpus", "its children deserve 90 GPUs together (b"),
        ], command
        human = cp(capsys, *command, specs)
        assert human.code == 0
        lines = [x for x in human.err.splitlines() if ": warning: " in x]
        assert len(lines) == 2, human.err  # one line each, never wrapped
        assert all(f"org.yaml:{line}:{column}: warning: spec.quota.gpus: " in x for x in lines)


def test_a_sealed_plan_file_does_not_carry_them(specs: Path, capsys: Capsys) -> None:
    res = cp(capsys, "plan", specs, "--json", "--out", specs / "p.json")
    assert res.json()["warnings"]
    assert '"warnings"' not in (specs / "p.json").read_text()
    assert cp(capsys, "apply", specs / "p.json", "--dir", specs, "--json").code == 0


def test_with_errors_the_warnings_are_shown_too(specs: Path, capsys: Capsys) -> None:
    """The JSON document listed them beside the errors; the text showed errors only."""
    (specs / "bad.yaml").write_text(dump(workload("x", "chem", gpus=1, replicas=0)))
    for command in (["validate"], ["plan"]):
        human = cp(capsys, *command, specs)
        assert human.code == 1
        assert sum(": warning: " in x for x in human.err.splitlines()) == 2, human.err
        assert sum(": error: " in x for x in human.err.splitlines()) == 1, human.err
        assert "1 error in the specs (and 2 warnings)" in human.err


def test_beside_errors_at_most_twenty_warnings_are_printed(specs: Path, capsys: Capsys) -> None:
    (specs / "other.yaml").write_text("---\n{}\n" * 30)  # 30 "not a controlplane document"
    (specs / "bad.yaml").write_text(dump(workload("x", "chem", gpus=1, replicas=0)))
    human = cp(capsys, "validate", specs)
    assert human.code == 1
    assert sum(": warning: " in x for x in human.err.splitlines()) == 20, human.err
    assert "… and 12 more warnings (--json lists them all)" in human.err
    assert "1 error in the specs (and 32 warnings)" in human.err
