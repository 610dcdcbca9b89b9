"""Renaming a project (``spec.renamedFrom``): its running jobs, usage and spent budget carry
over to the new name. Without it (user trial D5) a rename cancelled every running job of the
project and started it again under the new name, gave the project a fresh fair share and
a full budget, and said nothing but "no longer in the specs"."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]
T0 = datetime(2026, 3, 2, 8, tzinfo=UTC)
LATER = (T0 + timedelta(hours=10)).isoformat()  # 4 + 2 GPUs for 10 h: 60 GPU-hours spent


def _running_as_vision(capsys: Capsys, root: Path) -> Path:
    """Project vision (budget 50 GPU-hours a month) runs train (4 GPUs) and probe (2) since T0."""
    docs = [
        cluster(),
        project("vision", gpus=8, budget={"gpuHoursPerMonth": 50}),
        project("other", gpus=8),
        workload("train", "vision", gpus=4, walltime="3d"),
        workload("probe", "vision", gpus=2, walltime="3d"),
    ]
    specs = write_specs(root, docs)
    done = cp(capsys, "apply", specs, "--auto-approve", "--now", T0.isoformat())
    assert done.code == 0, done.out + done.err
    return specs


def _renamed(specs: Path, **cv: Any) -> None:
    """vision is now cv; probe is gone and a new workload, more, asks for 2 GPUs."""
    write_specs(
        specs,
        [
            cluster(),
            project("cv", gpus=8, budget={"gpuHoursPerMonth": 50}, **cv),
            project("other", gpus=8),
            workload("train", "cv", gpus=4, walltime="3d"),
            workload("more", "cv", gpus=2, walltime="3d"),
        ],
    )


def _plan(capsys: Capsys, specs: Path) -> dict[str, Any]:
    done = cp(capsys, "plan", specs, "--json", "--now", LATER)
    assert done.code == 0, done.out + done.err
    plan: dict[str, Any] = done.json()
    return plan


def test_a_renamed_project_keeps_its_running_jobs_usage_and_budget(
    tmp_path: Path, capsys: Capsys
) -> None:
    specs = _running_as_vision(capsys, tmp_path / "s")
    _renamed(specs, renamedFrom=["vision"])

    plan = _plan(capsys, specs)
    # train runs on as cv/train; probe left the specs; more waits: cv spent 60
    # GPU-hours as vision, over its budget of 50
    ops = [(a["op"], a["workload"], a.get("taggedAs")) for a in plan["actions"]]
    assert ops == [("cancel", "cv/probe", "vision/probe")]
    assert [(p["workload"], p["reason"]["code"]) for p in plan["pending"]] == [
        ("cv/more", "over-budget")
    ]
    usage = cp(capsys, "usage", specs, "--json", "--now", LATER).json()["projects"]["cv"]
    assert usage["monthGpuHours"] == pytest.approx(60)
    assert usage["decayedGpuHours"] > 50

    # the adapter takes the job tagged vision/probe for cv/probe, and then all is settled
    done = cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", LATER)
    assert done.code == 0, done.out + done.err
    assert [(a["op"], a["status"]) for a in done.json()["actions"]] == [("cancel", "done")]
    assert not _plan(capsys, specs)["actions"]
    jobs = cp(capsys, "get", "jobs", specs, "--json", "--now", LATER).json()["items"]
    assert [j["workload"] for j in jobs] == ["cv/train"]
    # its history goes back beyond the rename: started as vision/train; and so does a
    # workload's that left the specs since (probe)
    past = cp(capsys, "history", specs, "--workload", "cv/train", "--json").json()
    assert [(r["op"], r["workload"]) for r in past] == [("submit", "vision/train")]
    gone = cp(capsys, "history", specs, "--workload", "cv/probe", "--json").json()
    assert [(r["op"], r["workload"]) for r in gone] == [
        ("cancel", "cv/probe"),
        ("submit", "vision/probe"),
    ]
    told = cp(capsys, "explain", "cv/probe", specs, "--json", "--now", LATER).json()
    assert [r["workload"] for r in told["history"]] == ["cv/probe", "vision/probe"]
    told = cp(capsys, "explain", "cv/train", specs, "--json", "--now", LATER).json()
    assert [(r["op"], r["workload"]) for r in told["history"]] == [("submit", "vision/train")]


def test_a_rename_without_renamed_from_says_what_the_cancels_are(
    tmp_path: Path, capsys: Capsys
) -> None:
    """The rename restarts the work (the specs do not say it is the same project), and the
    prune's reason says how to keep it."""
    specs = _running_as_vision(capsys, tmp_path / "s")
    _renamed(specs)

    plan = _plan(capsys, specs)
    cancels = {
        a["workload"]: a["reason"]["message"] for a in plan["actions"] if a["op"] == "cancel"
    }
    assert set(cancels) == {"vision/probe", "vision/train"}
    assert "cv/train has its name" in cancels["vision/train"]
    assert "list vision in cv's spec.renamedFrom" in cancels["vision/train"]
    assert "has its name" not in cancels["vision/probe"]  # no workload of that name is left
    assert "cv/train" in [a["workload"] for a in plan["actions"] if a["op"] == "submit"]


def test_a_workload_moved_to_another_project_says_it_starts_there_afresh(
    tmp_path: Path, capsys: Capsys
) -> None:
    """A running workload whose `project` was edited is cancelled and submitted again: a
    workload's project is part of its name. The cancel said only "no longer in the specs"
    (trial T); it names the workload of the new project and what the move does."""
    specs = _running_as_vision(capsys, tmp_path / "s")
    write_specs(
        specs,
        [
            cluster(),
            project("vision", gpus=8, budget={"gpuHoursPerMonth": 50}),
            project("other", gpus=8),
            workload("train", "other", gpus=4, walltime="3d"),
            workload("probe", "vision", gpus=2, walltime="3d"),
        ],
    )
    plan = _plan(capsys, specs)
    [cancel] = [a for a in plan["actions"] if a["op"] == "cancel"]
    assert cancel["workload"] == "vision/train"
    message = cancel["reason"]["message"]
    assert "other/train has its name: moved to project other?" in message, message
    assert "starts there as a new job" in message and "renamedFrom" not in message, message


def test_a_deleted_workload_whose_name_another_project_runs_gets_no_hint(
    tmp_path: Path, capsys: Capsys
) -> None:
    """other/train has run all along: it is another workload, not vision/train moved
    (review: names like train are common to many projects)."""
    docs = [
        cluster(),
        project("vision", gpus=8),
        project("other", gpus=8),
        workload("train", "vision", gpus=4, walltime="3d"),
        workload("train", "other", gpus=2, walltime="3d"),
    ]
    specs = write_specs(tmp_path / "s", docs)
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", T0.isoformat()).code == 0
    vision_train = docs[3]
    write_specs(specs, [d for d in docs if d is not vision_train])
    plan = _plan(capsys, specs)
    [cancel] = [a for a in plan["actions"] if a["op"] == "cancel"]
    assert cancel["reason"]["message"] == "workload vision/train is no longer in the specs"


def test_an_old_name_still_in_the_specs_or_claimed_twice_is_an_error(
    tmp_path: Path, capsys: Capsys
) -> None:
    specs = write_specs(
        tmp_path / "s",
        [
            cluster(),
            project("vision", gpus=4),
            project("cv", gpus=4, renamedFrom=["vision"]),
            project("a", gpus=4, renamedFrom=["old"]),
            project("b", gpus=4, renamedFrom=["old"]),
        ],
    )
    done = cp(capsys, "validate", specs)
    assert done.code == 1
    assert "spec.renamedFrom: project 'vision' is still in the specs" in done.err
    assert "spec.renamedFrom: project 'a' is renamed from 'old' too" in done.err
    assert "specs.yaml:" in done.err
    # a name listed twice, or its own: said as such (it read "renamed from 'x' too",
    # and "remove that document", the project's own: user trial)
    write_specs(
        specs,
        [
            cluster(),
            project("z", gpus=4, renamedFrom=["y", "y"]),
            project("w", gpus=4, renamedFrom=["w"]),
        ],
    )
    done = cp(capsys, "validate", specs)
    assert "renamedFrom lists 'y' twice" in done.err
    assert "renamedFrom lists its own name" in done.err
    assert "too" not in done.err and "remove that document" not in done.err


def test_what_the_store_knows_under_the_old_name_carries_over(
    tmp_path: Path, capsys: Capsys
) -> None:
    """Once the cluster has forgotten a job (Slurm keeps an ended one for minutes), only the
    store remembers it, under the name it ran as: a completed workload must not run again,
    and a segmented one goes on from its segments, under the new name."""
    checkpoint = {"signal": "USR1", "grace": "5m", "total": "3h"}

    def docs(name: str, **spec: Any) -> list[dict[str, Any]]:
        return [
            cluster(),
            project(name, gpus=8, **spec),
            workload("short", name, gpus=2, walltime="1h"),
            workload("seg", name, gpus=2, walltime="1h", checkpoint=checkpoint),
        ]

    specs = write_specs(tmp_path / "s", docs("vision"))

    def apply(hours: float) -> list[tuple[str, str, str]]:
        at = (T0 + timedelta(hours=hours)).isoformat()
        done = cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", at)
        assert done.code == 0, done.out + done.err
        plan = cp(capsys, "show", done.json()["plan"], "--dir", specs, "--json").json()
        return [(a["op"], a["workload"], a["reason"]["message"]) for a in plan["actions"]]

    apply(0)
    assert [(op, w) for op, w, _ in apply(1.1)] == [("submit", "vision/seg")]  # segment 2
    state = specs / ".cp" / "simulator" / "sim.json"
    saved = json.loads(state.read_text())
    saved["state"]["jobs"] = [j for j in saved["state"]["jobs"] if j["state"] != "COMPLETED"]
    state.write_text(json.dumps(saved))  # the cluster forgot the ended jobs

    write_specs(specs, docs("cv", renamedFrom=["vision"]))
    assert apply(1.2) == []  # short completed as vision/short; seg's segment 2 runs on
    [(op, key, why)] = apply(2.2)
    assert (op, key) == ("submit", "cv/seg")
    assert "segment 3: 2h of 3h done" in why
    assert apply(3.3) == []  # three segments, two of them run as vision/seg: complete
    shown = cp(
        capsys,
        "get",
        "workloads",
        specs,
        "--json",
        "--now",
        (T0 + timedelta(hours=3.3)).isoformat(),
    )
    states = {w["name"]: w["state"] for w in shown.json()["items"]}
    assert states == {"cv/seg": "completed", "cv/short": "completed"}, states

    # once nothing runs under the old name, renamedFrom may go: the store moved its records
    # (it read them as the new name's, and the completed work ran again: user trial)
    write_specs(specs, docs("cv"))
    at = (T0 + timedelta(hours=3.4)).isoformat()
    assert cp(capsys, "plan", specs, "--json", "--now", at).json()["actions"] == []
    usage = cp(capsys, "usage", specs, "--json", "--now", at).json()["projects"]["cv"]
    assert usage["monthGpuHours"] == pytest.approx(2 * 1 + 2 * 3, abs=0.05)  # short, seg


def test_work_that_completed_after_the_rename_stays_completed_without_renamed_from(
    tmp_path: Path, capsys: Capsys
) -> None:
    """A job running at the rename completed after it (recorded with the spec it ran,
    the old project's); renamedFrom dropped later, the workload ran again: its new spec
    differed from that one, an edit made while it ran (user trial)."""
    docs = [cluster(), project("vision", gpus=8), workload("t", "vision", gpus=4, walltime="2h")]
    specs = write_specs(tmp_path / "s", docs)

    def apply(hours: float) -> None:
        at = (T0 + timedelta(hours=hours)).isoformat()
        assert cp(capsys, "apply", specs, "--auto-approve", "--now", at).code == 0

    apply(0)
    renamed = [
        cluster(),
        project("cv", gpus=8, renamedFrom=["vision"]),
        workload("t", "cv", gpus=4, walltime="2h"),
    ]
    write_specs(specs, renamed)
    apply(1)
    apply(3)  # t completed at 2h, seen completed
    renamed[1] = project("cv", gpus=8)
    write_specs(specs, renamed)
    plan = cp(capsys, "plan", specs, "--json", "--now", (T0 + timedelta(hours=3)).isoformat())
    assert plan.json()["actions"] == []


def test_explain_by_an_old_name_explains_the_workload_under_its_new_one(
    tmp_path: Path, capsys: Capsys
) -> None:
    """`cp explain vision/train` after vision was renamed cv said "not in the specs (any
    more)", with no job, though job 1000 tagged vision/train ran on as cv/train (user
    trial). It explains cv/train, and says so."""
    specs = _running_as_vision(capsys, tmp_path / "s")
    _renamed(specs, renamedFrom=["vision"])
    done = cp(capsys, "explain", "vision/train", specs, "--json", "--now", LATER)
    assert done.code == 0, done.err
    doc = done.json()
    assert (doc["workload"], doc["state"], doc["inSpecs"]) == ("cv/train", "running", True)
    assert "vision/train is cv/train now" in done.err
    text = cp(capsys, "explain", "vision/train", specs, "--now", LATER)
    assert text.out.startswith("cv/train: running"), text.out


def test_a_completed_job_the_cluster_still_shows_is_listed_once_after_a_rename(
    tmp_path: Path, capsys: Capsys
) -> None:
    """The store's memory of a completed job, carried to the project's new name, was added
    beside the same job the cluster still showed under the old name, as "1000 (earlier)",
    "its id now names another job" (user trial)."""
    docs = [cluster(), project("vision", gpus=8), workload("t", "vision", gpus=4, walltime="1h")]
    specs = write_specs(tmp_path / "s", docs)
    for hours in (0, 2):  # started; seen completed (and remembered)
        at = (T0 + timedelta(hours=hours)).isoformat()
        assert cp(capsys, "apply", specs, "--auto-approve", "--now", at).code == 0
    write_specs(
        specs,
        [
            cluster(),
            project("cv", gpus=8, renamedFrom=["vision"]),
            workload("t", "cv", gpus=4, walltime="1h"),
        ],
    )
    at = (T0 + timedelta(hours=3)).isoformat()
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", at).code == 0  # carried over
    listed = cp(capsys, "get", "jobs", specs, "-o", "json", "--now", at).json()["items"]
    mine = [(j["id"], j["workload"], j["state"]) for j in listed if j["workload"]]
    assert mine == [("1000", "cv/t", "COMPLETED")], mine
    assert cp(capsys, "plan", specs, "--json", "--now", at).json()["actions"] == []

    # renamedFrom dropped (nothing runs under the old name): the same, once (trialS)
    write_specs(
        specs, [cluster(), project("cv", gpus=8), workload("t", "cv", gpus=4, walltime="1h")]
    )
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", at).code == 0
    listed = cp(capsys, "get", "jobs", specs, "-o", "json", "--now", at).json()["items"]
    mine = [(j["id"], j["workload"], j["state"]) for j in listed if j["workload"]]
    assert mine == [("1000", "cv/t", "COMPLETED")], mine
    # and it is no workload "edited since it ran": only its project's name changed (trialS)
    planned = cp(capsys, "plan", specs, "--json", "--now", at).json()
    assert planned["actions"] == [] and "finished" not in planned, planned.get("finished")
