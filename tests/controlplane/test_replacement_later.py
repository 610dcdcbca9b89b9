"""The new version of an edited workload whose old job saved its checkpoint first is
submitted by a later plan, once that job has ended; its reason read as any start's
("within-deserved: …"), and `cp history` could not tell it was the edited version (trial
T). It names the job of the version before, which the plan before cancelled."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[2]
Capsys = pytest.CaptureFixture[str]


def test_a_replacement_submitted_after_its_old_job_ended_names_that_job(
    tmp_path: Path, capsys: Capsys
) -> None:
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-12-01T00:00:00Z").code == 0
    jobs = cp(capsys, "get", "jobs", specs, "-o", "json").json()["items"]
    [old] = [j["id"] for j in jobs if j["workload"] == "nlp/llm-finetune"]
    nlp = specs / "workloads" / "nlp.yaml"
    nlp.write_text(nlp.read_text().replace("  gpus: 8\n", "  gpus: 6\n", 1))
    first = cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", "2026-12-01T01:00:00Z")
    assert [(a["op"], a["job"]) for a in first.json()["actions"]] == [("cancel", old)]

    then = cp(capsys, "plan", specs, "--json", "--now", "2026-12-01T01:01:00Z").json()
    [submit] = [a for a in then["actions"] if a["workload"] == "nlp/llm-finetune"]
    assert submit["op"] == "submit"
    message = submit["reason"]["message"]
    assert f"the new version of the edited spec: job {old}, of the version before" in message


def test_a_replacement_in_the_plan_that_cancels_the_old_job_names_no_earlier_one(
    tmp_path: Path, capsys: Capsys
) -> None:
    """Edited twice: the second edit's new job replaces the running one in the same plan
    ("replaces job B"); it also read "job A, of the version before, was cancelled", A
    being the job the first edit cancelled a plan earlier (trial U's history)."""
    specs = tmp_path / "specs"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    vision = specs / "workloads" / "vision.yaml"
    text = vision.read_text()
    for i in range(3):
        vision.write_text(text.replace("train_vit.py]", f"train_vit.py, --v{i}]", 1))
        now = f"2026-12-01T0{i}:00:00Z"
        done = cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", now).json()
    ops = {a["op"]: a for a in done["actions"] if a["workload"] == "vision/vit-train"}
    assert set(ops) == {"cancel", "submit"}, ops
    shown = cp(capsys, "history", specs, "--workload", "vision/vit-train", "--json").json()
    [submit] = [r for r in shown if r["op"] == "submit" and r["plan"] == done["plan"]]
    why = submit["reason"]["message"]
    assert f"replaces job {ops['cancel']['job']}" in why, why
    assert "of the version before, was cancelled" not in why, why
