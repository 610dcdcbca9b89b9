"""A saved plan made as of a later time than its apply (``cp plan --now`` ahead of the
clock, then ``cp apply plan.json``) was carried out early (user trial): its decisions that
depend on time (a minRuntime over, a walltime ended, a month's budget) acted before that
time, and the history showed a plan "made 08:45" acting at 08:15. The staleness check
compared the clusters, not the clock. Such a plan is refused now, untouched, and saying
when it may be applied."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[2]
HOTFIX = """---
apiVersion: controlplane/v1
kind: Workload
metadata: {name: hotfix-eval}
spec: {project: nlp, priority: 200, gpus: 8, gpuTypes: [a100_80], walltime: 2h, command: [python, eval.py]}
"""


@pytest.fixture
def specs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The quick start applied at 08:00, then urgent work that a young job's minRuntime
    keeps waiting until 08:30."""
    dst = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", dst, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", dst, "--auto-approve", "--now", "2026-03-02T08:00:00Z").code == 0
    with (dst / "workloads" / "nlp.yaml").open("a") as f:
        f.write(HOTFIX)
    return dst


def test_a_plan_made_as_of_a_later_time_is_refused_before_then(
    specs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    early = cp(capsys, "plan", specs, "--now", "2026-03-02T08:15:00Z", "--json").json()
    assert not any(a["op"] == "preempt" for a in early["actions"]), "minRuntime still holds"
    saved = tmp_path / "later.json"
    later = cp(capsys, "plan", specs, "--now", "2026-03-02T08:45:00Z", "--out", saved, "--json")
    assert any(a["op"] == "preempt" for a in later.json()["actions"]), "minRuntime is over"

    res = cp(capsys, "apply", saved, "--dir", specs, "--now", "2026-03-02T08:15:00Z", "--json")
    assert res.code == 1, res.out
    error = res.json()["error"]
    assert error["kind"] == "stale-plan"
    assert "2026-03-02 08:45" in error["message"] and "08:15" in error["message"]
    assert cp(capsys, "history", specs, "--json").json()[0]["at"].startswith("2026-03-02T08:00")

    res = cp(capsys, "apply", saved, "--dir", specs, "--now", "2026-03-02T08:45:00Z")
    assert res.code == 0, res.out + res.err
    assert "Apply complete" in res.out
