"""A reviewed plan applied on merge after the clusters moved on (user trial "trialC 03").

`cp apply --reviewed` refused the plan as stale whenever any job of ours ended between the
review and the merge, even one the plan does not touch: on a busy cluster nearly every
merge failed. A job that ended only frees GPUs; a change the plan's actions depend on
still refuses it, naming what changed. A real git repository per test: the specs on
main, a branch planned for review, merged, applied two hours later (the short job ends
after one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, ok, write_specs
from tests.builders.git import git, spec_repo

Capsys = pytest.CaptureFixture[str]
NOW = "2026-11-22T10:00:00+00:00"
LATER = "2026-11-22T12:00:00+00:00"  # the short job ended at 11:00


def org(*extra: dict[str, Any], short: bool = True) -> list[dict[str, Any]]:
    """32 GPUs; chem runs a long job and (``short``) one that ends after an hour."""
    docs = [
        cluster(pools=[{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 4}]),
        project("chem", gpus=32),
        workload("long", "chem", gpus=8, walltime="3d"),
    ]
    if short:
        docs.append(workload("short", "chem", gpus=8, walltime="1h"))
    return [*docs, *extra]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return spec_repo(tmp_path / "repo", lambda specs: write_specs(specs, org()))


def review(repo: Path, capsys: Capsys, docs: list[dict[str, Any]]) -> dict[str, Any]:
    """What main says applied at NOW; a branch with ``docs`` planned for review at NOW
    (its JSON returned) and merged."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    git(repo, "checkout", "-q", "-b", "change")
    write_specs(specs, docs)
    git(repo, "commit", "-q", "-am", "the change")
    reviewed = ok(cp(capsys, "plan", specs, "--base", "main", "--json", "--now", NOW)).json()
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "change")
    return reviewed


def test_a_job_that_ended_elsewhere_does_not_refuse_the_reviewed_apply(
    repo: Path, capsys: Capsys
) -> None:
    reviewed = review(repo, capsys, org(workload("new", "chem", gpus=8, walltime="3d")))
    assert [(a["op"], a["workload"]) for a in reviewed["actions"]] == [("submit", "chem/new")]

    applied = cp(capsys, "apply", repo / "specs", "--reviewed", "--json", "--now", LATER)
    assert applied.code == 0, applied.out + applied.err  # chem/short ended at 11:00
    body = applied.json()
    assert body["plan"] == reviewed["id"] and body["ok"]
    assert [(a["op"], a["workload"], a["status"]) for a in body["actions"]] == [
        ("submit", "chem/new", "done")
    ]
    [ended] = body["changedSince"]  # told, not hidden
    assert ended.startswith("job ") and ended.endswith(" (chem/short) ended")
    observed = ok(cp(capsys, "observe", repo / "specs", "--now", LATER)).json()
    running = {
        j["workload"] for c in observed["clusters"] for j in c["jobs"] if j["state"] == "RUNNING"
    }
    assert running == {"chem/long", "chem/new"}


def test_a_saved_plan_is_applied_by_the_same_rule(repo: Path, capsys: Capsys) -> None:
    """`cp plan --out` then `cp apply FILE`: the same check as the reviewed apply."""
    specs = repo / "specs"
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", NOW))
    write_specs(specs, org(workload("new", "chem", gpus=8, walltime="3d")))
    plan_file = repo / "plan.json"
    ok(cp(capsys, "plan", specs, "--out", plan_file, "--now", NOW))
    applied = cp(capsys, "apply", plan_file, "--dir", specs, "--now", LATER)
    assert applied.code == 0, applied.out + applied.err
    assert "Apply complete: 1 done, 0 failed." in applied.out
    assert "in ways its actions do not depend on: job " in applied.out
    assert "(chem/short) ended." in applied.out


def test_a_job_the_plan_cancels_that_ended_still_refuses_it(repo: Path, capsys: Capsys) -> None:
    """The change removes chem/short (its job is to be cancelled); the job ended before the
    merge: what the plan was to do is no longer what reviewers saw."""
    reviewed = review(repo, capsys, org(short=False))
    assert [(a["op"], a["workload"]) for a in reviewed["actions"]] == [("cancel", "chem/short")]
    job = reviewed["actions"][0]["job"]

    refused = cp(capsys, "apply", repo / "specs", "--reviewed", "--json", "--now", LATER)
    assert refused.code == 1
    error = refused.json()["error"]
    assert error["kind"] == "stale-plan"
    assert f"job {job} (chem/short), which the plan cancels, ended" in error["message"]
    assert "cp plan --base REF" in error["message"]


def test_a_drained_node_the_plan_places_work_on_still_refuses_it(
    repo: Path, capsys: Capsys
) -> None:
    """An administrator drains the node the reviewed submit is placed on (the simulator's
    state edited as `scontrol update state=drain` would): refused, naming the node."""
    reviewed = review(repo, capsys, org(workload("new", "chem", gpus=8, walltime="3d")))
    node = reviewed["actions"][0]["replicas"][0]["node"]
    state_file = repo / "specs" / ".cp" / "simulator" / "sim.json"
    state = json.loads(state_file.read_text())
    for n in state["state"]["nodes"]:
        if n["name"] == node:
            n["state"] = "drain"
    state_file.write_text(json.dumps(state))

    refused = cp(capsys, "apply", repo / "specs", "--reviewed", "--json", "--now", LATER)
    assert refused.code == 1
    error = refused.json()["error"]
    assert error["kind"] == "stale-plan"
    assert f"node {node}" in error["message"] and "chem/new" in error["message"]
