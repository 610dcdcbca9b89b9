"""Edits to running work: a GitOps tool acts on every change to the specs.

Each kind of edit to a running workload, through apply on the simulator: what needs a
new job is replaced (Terraform's "must be replaced": the old job cancelled and the new
version submitted, reason ``spec-changed`` naming the fields), what can change in place
is done in place, a replacement waits out the project's ``minRuntime`` and says until
when, and once applied the next plan is empty.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from controlplane.reconcile import plan as make_plan
from specs.snapshot import ClusterState, Job, JobState, Node, Replica, Snapshot
from tests.builders import NOW, cluster, desired, project, workload
from tests.builders.cli import cp, ok, write_specs

Capsys = pytest.CaptureFixture[str]
T0 = "2026-11-22T10:00:00+00:00"
T1 = "2026-11-22T11:00:00+00:00"
POOLS = [
    {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2},
    {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "nodes": 2},
]


def org(root: Path, min_runtime: str | None = None, **spec: Any) -> Path:
    extra = {"minRuntime": min_runtime} if min_runtime else {}
    base: dict[str, Any] = {"gpus": 2, "gpuTypes": ["a100_80"], "command": ["train"]}
    return write_specs(
        root,
        [
            cluster(pools=POOLS),
            project("p", gpus=16, **extra),
            workload("w", "p", **{**base, **spec}),
        ],
    )


def plan(capsys: Capsys, root: Path, now: str = T1) -> dict[str, Any]:
    data: dict[str, Any] = ok(cp(capsys, "plan", root, "--json", "--now", now)).json()
    return data


def ops(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a["op"], a["reason"]["code"]) for a in data["actions"]]


def settle(capsys: Capsys, root: Path, now: str = T1) -> None:
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", now))
    again = cp(capsys, "plan", root, "--detailed-exitcode", "--now", now)
    assert again.code == 0, again.out


@pytest.mark.parametrize(
    ("edit", "changed"),
    [
        ({"gpus": 4}, "gpus: 2 -> 4"),
        ({"command": ["train", "--resume"]}, "command: [train] -> [train, --resume]"),
        ({"gpuTypes": ["v100"]}, "gpuTypes: [a100_80] -> [v100]"),
        ({"replicas": 2}, "replicas: 1 -> 2"),
        ({"walltime": "2h"}, "walltime: none -> 2h"),
    ],
    ids=["gpus", "command", "gpu-type", "gang-replicas", "walltime"],
)
def test_an_edit_that_needs_a_new_job_replaces_it(
    tmp_path: Path, capsys: Capsys, edit: dict[str, Any], changed: str
) -> None:
    root = org(tmp_path / "s")
    settle(capsys, root, T0)
    org(root, **edit)
    data = plan(capsys, root)
    assert ops(data) == [("submit", "spec-changed"), ("cancel", "spec-changed")]
    submit, cancel = data["actions"]
    assert changed in cancel["reason"]["message"] and "replaced" in cancel["reason"]["message"]
    assert cancel["job"] and f"replaces job {cancel['job']}" in submit["reason"]["message"]
    assert data["pending"] == []
    settle(capsys, root)


@pytest.mark.parametrize(
    "edit",
    [{"priority": 7}, {"gpuTypes": ["a100_80", "v100"]}, {"preemptible": False}],
    ids=["priority", "wider-gpu-types", "preemptible"],
)
def test_an_edit_the_running_job_already_satisfies_changes_nothing(
    tmp_path: Path, capsys: Capsys, edit: dict[str, Any]
) -> None:
    root = org(tmp_path / "s")
    settle(capsys, root, T0)
    org(root, **edit)
    assert plan(capsys, root)["actions"] == []


def test_an_elastic_workload_grows_and_shrinks_in_place(tmp_path: Path, capsys: Capsys) -> None:
    root = org(tmp_path / "s", replicas=2, minReplicas=1)
    settle(capsys, root, T0)
    org(root, replicas=4, minReplicas=1)
    data = plan(capsys, root)
    assert [a["op"] for a in data["actions"]] == ["resize"]
    assert len(data["actions"][0]["replicas"]) == 4
    settle(capsys, root)
    org(root, replicas=3, minReplicas=1)
    data = plan(capsys, root)
    assert ops(data) == [("resize", "spec-changed")]
    assert len(data["actions"][0]["replicas"]) == 3
    assert "replicas: now 3): 1 of the 4 running" in data["actions"][0]["reason"]["message"]
    settle(capsys, root)


def test_a_shrink_says_what_the_spec_asks_and_how_many_replicas_stop(
    tmp_path: Path, capsys: Capsys
) -> None:
    """The spec went 4 -> 1 while 2 ran (4 GPUs were all the limit left): the reason said
    "replicas: 2 -> 1", a change nobody made (user trial). It says what the spec asks for
    now and how many of the running replicas stop."""
    root = write_specs(
        tmp_path / "s",
        [
            cluster(pools=POOLS),
            project("p", gpus=4, limit=4),
            workload("w", "p", gpus=2, replicas=4, minReplicas=1, gpuTypes=["a100_80"]),
        ],
    )
    settle(capsys, root, T0)
    write_specs(
        root,
        [
            cluster(pools=POOLS),
            project("p", gpus=4, limit=4),
            workload("w", "p", gpus=2, replicas=1, minReplicas=1, gpuTypes=["a100_80"]),
        ],
    )
    [resize] = plan(capsys, root)["actions"]
    assert resize["op"] == "resize" and len(resize["replicas"]) == 1
    message = resize["reason"]["message"]
    assert message.endswith("(replicas: now 1): 1 of the 2 running replicas stops"), message


def test_an_elastic_workload_held_below_its_replicas_by_a_limit_can_be_edited(
    tmp_path: Path, capsys: Capsys
) -> None:
    """An elastic workload running 1 of its 2 replicas under its project's limit had its
    walltime edited; every plan said the new version "would take project p to 8 GPUs,
    above its limit of 4", so the old version ran on for ever (trialN, real Slurm). The new
    version starts with its minReplicas, as any elastic job does: it replaces the old one."""

    def specs(walltime: str) -> Path:
        return write_specs(
            tmp_path / "s",
            [
                cluster(pools=POOLS),
                project("p", gpus=4, limit=4),
                workload(
                    "w", "p", gpus=4, replicas=2, minReplicas=1, gpuTypes=["a100_80"],
                    walltime=walltime, command=["train"],
                ),
            ],
        )  # fmt: skip

    root = specs("3h")
    settle(capsys, root, T0)
    specs("2h")
    data = plan(capsys, root)
    assert sorted(ops(data)) == [("cancel", "spec-changed"), ("submit", "spec-changed")], data
    [submit] = [a for a in data["actions"] if a["op"] == "submit"]
    assert len(submit["replicas"]) == 1


def test_a_shrink_by_an_edit_and_a_lowered_limit_says_both(tmp_path: Path, capsys: Capsys) -> None:
    """Fewer replicas and a lower limit in one edit: the resize said only "reclaim: project
    g holds 10 GPUs, above its limit of 8" while g held 14 (the 10 came after the edit's
    own shrink), and nothing of the edit (trialO)."""

    def specs(replicas: int, limit: int) -> Path:
        return write_specs(
            tmp_path / "s",
            [
                cluster(pools=POOLS[:1]),
                project("g", gpus=6, limit=limit),
                workload("w", "g", gpus=2, replicas=replicas, minReplicas=1, command=["x"]),
                workload("x", "g", gpus=6, command=["x"]),
            ],
        )

    root = specs(4, 20)
    settle(capsys, root, T0)
    specs(2, 8)
    [resize] = plan(capsys, root)["actions"]
    assert (resize["op"], resize["workload"], len(resize["replicas"])) == ("resize", "g/w", 1)
    message = resize["reason"]["message"]
    assert resize["reason"]["code"] == "reclaim"
    assert message.startswith("the spec changed (replicas: now 2): 2 of the 4 running")
    assert "; then project g holds 10 GPUs, above its limit of 8" in message


def test_a_replacement_names_only_what_needs_the_new_job(tmp_path: Path, capsys: Capsys) -> None:
    """A priority edit the running job followed, then a command edit: the replacement's
    reason read "priority: default (50) -> 70; command: ...", and a reviewer took the
    priority for the cause (trialQ). The fields that need a new job are named."""
    root = org(tmp_path / "s")
    settle(capsys, root, T0)
    org(root, priority=70)
    settle(capsys, root, T0)  # followed in place: nothing to do
    org(root, priority=70, command=["train", "--v2"])
    data = plan(capsys, root)
    assert ops(data) == [("submit", "spec-changed"), ("cancel", "spec-changed")]
    message = data["actions"][1]["reason"]["message"]
    assert "command: [train] -> [train, --v2]" in message and "priority" not in message


def test_a_fixed_gang_given_fewer_replicas_is_replaced_not_cut(
    tmp_path: Path, capsys: Capsys
) -> None:
    """A gang without minReplicas (torchrun --nnodes=2) cannot lose a rank while it runs:
    it was resized in place, one replica stopped under the others (user trial). It is a
    replacement, as any change the running job cannot follow; an elastic one still
    shrinks in place (above)."""
    root = org(tmp_path / "s", replicas=2)
    settle(capsys, root, T0)
    org(root, replicas=1)
    data = plan(capsys, root)
    assert ops(data) == [("submit", "spec-changed"), ("cancel", "spec-changed")]
    assert "replicas: 2 -> 1" in data["actions"][1]["reason"]["message"]
    settle(capsys, root)


def test_a_replacement_waits_out_min_runtime_and_says_until_when(
    tmp_path: Path, capsys: Capsys
) -> None:
    root = org(tmp_path / "s", min_runtime="2h")
    settle(capsys, root, T0)
    org(root, min_runtime="2h", gpus=4)
    data = plan(capsys, root)  # 1 h after it started
    assert data["actions"] == []
    [waits] = data["pending"]
    assert waits["reason"]["code"] == "spec-changed"
    assert "gpus: 2 -> 4" in waits["reason"]["message"]
    assert "minRuntime" in waits["reason"]["message"] and "12:00" in waits["reason"]["message"]
    # the text does not claim the clusters match the specs meanwhile (user trial)
    text = cp(capsys, "plan", root, "--now", T1).out
    assert "match the specs" not in text
    assert "No changes now. 1 edited workload still runs the old version" in text
    markdown = cp(capsys, "plan", root, "--now", T1, "--markdown").out
    assert "1 edited workload still on the old version." in markdown.splitlines()[0]
    later = plan(capsys, root, "2026-11-22T12:00:01+00:00")
    assert ops(later) == [("submit", "spec-changed"), ("cancel", "spec-changed")]


def test_a_replacement_that_does_not_fit_keeps_the_old_job(tmp_path: Path, capsys: Capsys) -> None:
    def specs(gpus: int) -> Path:
        a100 = {"gpuTypes": ["a100_80"], "command": ["x"]}
        return write_specs(
            tmp_path / "s",
            [
                cluster(pools=POOLS),
                project("p", gpus=32),
                workload("hog", "p", gpus=8, **a100),
                workload("half", "p", gpus=4, **a100),
                workload("w", "p", gpus=gpus, **a100),
            ],
        )

    root = specs(2)
    settle(capsys, root, T0)
    specs(8)  # 8 GPUs on one node: 6 would be free even without the old job
    data = plan(capsys, root)
    assert data["actions"] == []
    [waits] = data["pending"]
    assert waits["workload"] == "p/w" and waits["reason"]["code"] == "spec-changed"
    assert "gpus: 2 -> 8" in waits["reason"]["message"]
    assert "keeps running" in waits["reason"]["message"]
    # the quota table counts what the new version waits for, not the old one's 2 GPUs
    assert data["projects"]["p"]["pending"] == 8


def test_an_edit_after_the_job_completed_is_told_not_run(tmp_path: Path, capsys: Capsys) -> None:
    """Editing a workload whose job completed gave "No changes. The clusters match the
    specs." (user trial): a completed workload does not run again, and the plan says so,
    with the change and what to do."""
    root = org(tmp_path / "s", walltime="30m")
    settle(capsys, root, T0)  # done by T1
    org(root, walltime="30m", command=["train", "--resume"])
    data = plan(capsys, root)
    assert data["actions"] == [] and data["pending"] == []
    [told] = data["finished"]
    assert told["workload"] == "p/w" and "after its job completed" in told["reason"]["message"]
    text = ok(cp(capsys, "plan", root, "--now", T1)).out
    assert "1 completed workload edited since it ran does not run again" in text
    assert "Completed, edited since" in text and "match the specs" not in text
    markdown = ok(cp(capsys, "plan", root, "--now", T1, "--markdown")).out
    assert "1 completed workload edited since: not run again." in markdown.splitlines()[0]
    explained = " ".join(ok(cp(capsys, "explain", "p/w", root, "--now", T1)).out.split())
    assert "after its job completed" in explained and "nothing to do" not in explained
    doc = ok(cp(capsys, "explain", "p/w", root, "--now", T1, "--json")).json()
    assert doc["finished"]["reason"]["code"] == "spec-changed"
    org(root, walltime="30m")  # edited back: nothing to tell
    assert "finished" not in plan(capsys, root)


def test_a_job_made_non_preemptible_beyond_deserved_stays_preemptible(
    tmp_path: Path, capsys: Capsys
) -> None:
    """`preemptible: false` on a running job above its project's deserved quota made it
    immune to reclaim: reclaim took a smaller project's job instead, and non-preemptible
    work held more than deserved (user trial). Non-preemptible work starts only within
    deserved; an edit to running work keeps that rule: the job stays preemptible, and the
    plan says why."""
    a100 = {"gpuTypes": ["a100_80"], "command": ["x"]}

    def specs(big: dict[str, Any], claim: bool = False) -> Path:
        return write_specs(
            tmp_path / "s",
            [
                cluster(pools=POOLS[:1]),  # 16 GPUs: p's fair share is its deserved 4
                project("p", gpus=4),
                project("q", gpus=12),
                workload("big", "p", gpus=8, **a100, **big),
                workload("mine", "q", gpus=8, **a100),
                *([workload("claim", "q", gpus=4, **a100)] if claim else []),
            ],
        )

    root = specs({})
    settle(capsys, root, T0)
    specs({"preemptible": False})
    data = plan(capsys, root)
    assert data["actions"] == []
    [waits] = data["pending"]
    assert (waits["workload"], waits["reason"]["code"]) == ("p/big", "spec-changed")
    assert "project p's would hold 8 GPUs of its deserved 4" in waits["reason"]["message"]
    # the unset field is told by the value it stood for, not "none" (user trial)
    assert "(preemptible: default (true) -> false)" in waits["reason"]["message"]
    assert data["projects"]["p"]["pending"] == 0, "it waits for no GPUs"
    specs({"preemptible": False}, claim=True)
    data = plan(capsys, root)
    assert ("preempt", "p/big") in {(a["op"], a["workload"]) for a in data["actions"]}


def test_an_edit_waiting_on_a_job_that_then_completes_runs_its_new_version(
    tmp_path: Path, capsys: Capsys
) -> None:
    """An edit made while the job ran waited (here for minRuntime); the old job then ran
    to completion, and the edit was dropped: the workload counted as completed and the
    plan called it "edited after its job completed" (user trial). The edit asked for the
    new version, which runs once the old job is done; an edit made after the completion
    still does not run."""
    root = org(tmp_path / "s", min_runtime="2h", walltime="90m")
    settle(capsys, root, T0)
    org(root, min_runtime="2h", walltime="90m", gpus=4)
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", T1))  # waits: the store sees it
    after = "2026-11-22T11:45:00+00:00"  # the old job completed at 11:30
    data = plan(capsys, root, after)
    assert [(a["op"], a["workload"]) for a in data["actions"]] == [("submit", "p/w")]
    assert {r["gpus"] for r in data["actions"][0]["replicas"]} == {4}
    assert "finished" not in data
    settle(capsys, root, after)
    org(root, min_runtime="2h", walltime="90m", gpus=2)  # after the new one completed
    later = plan(capsys, root, "2026-11-22T14:00:00+00:00")
    assert later["actions"] == [] and [f["workload"] for f in later["finished"]] == ["p/w"]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ({"priority": 50}, {"priority": 60}),
        ({"replicas": 2, "minReplicas": 1}, {"replicas": 1, "minReplicas": 1}),
        ({"gpuTypes": ["a100_80"]}, {"gpuTypes": ["a100_80", "v100"]}),
    ],
    ids=["priority", "elastic-replicas", "wider-gpu-types"],
)
def test_an_edit_the_running_job_followed_completes_with_it(
    tmp_path: Path, capsys: Capsys, before: dict[str, Any], after: dict[str, Any]
) -> None:
    """An edit made while the job ran that the job followed in place (a priority, fewer
    elastic replicas given back, a wider list of GPU types) ran the workload again once
    its job completed, as if the edit asked for a new version (trialO: a 20-hour elastic
    job ran twice). The job that followed it was that version: the workload is done."""
    root = org(tmp_path / "s", walltime="90m", **before)
    settle(capsys, root, T0)
    org(root, walltime="90m", **after)
    settle(capsys, root, T1)  # in place: nothing, or a resize
    done = plan(capsys, root, "2026-11-22T11:45:00+00:00")  # the job completed at 11:30
    assert done["actions"] == [] and "finished" not in done


def test_an_edit_to_work_queued_in_the_cluster_replaces_its_queued_job(
    tmp_path: Path, capsys: Capsys
) -> None:
    """A workload whose job still waited in the cluster's own queue (here a fan-out
    candidate on a full cluster) kept the old version when edited, and the plan only said
    "submitted" (user trial). Nothing runs yet: the queued job is cancelled and the new
    version planned in its place."""
    a100 = {"gpuTypes": ["a100_80"], "command": ["x"]}
    fan = {"strategy": {"fanOut": True, "maxParallel": 1}, "walltime": "4h", **a100}

    def specs(gpus: int) -> Path:
        return write_specs(
            tmp_path / "s",
            [
                cluster(pools=POOLS[:1]),
                project("p", gpus=16),
                workload("hog", "p", gpus=8, replicas=2, **a100),
                workload("fan", "p", gpus=gpus, **fan),
            ],
        )

    root = specs(8)
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", T0))
    [queued] = [p for p in plan(capsys, root, T0)["pending"] if p["workload"] == "p/fan"]
    assert queued["reason"]["code"] == "submitted"
    specs(4)
    data = plan(capsys, root, T0)
    mine = [(a["op"], a["reason"]["code"]) for a in data["actions"] if a["workload"] == "p/fan"]
    assert ("cancel", "spec-changed") in mine and ("submit", "fan-out") in mine, mine
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", T0))
    again = plan(capsys, root, T0)
    assert again["actions"] == [], "the new version waits in the queue: nothing more to do"


def test_a_replacement_preempts_lower_priority_work_of_its_project(
    tmp_path: Path, capsys: Capsys
) -> None:
    """An edit that did not fit on what its old job leaves and what was free waited "until
    it fits" beside lower-priority work of its own project, which a new job of its
    priority would preempt: for ever, as nothing made room (user trial). The new version
    now competes as a new job would (allocate, reclaim, preempt) with its old job's GPUs
    free, and replaces the old job when it is placed."""
    a100 = {"gpuTypes": ["a100_80"], "command": ["x"]}

    def specs(gpus: int) -> Path:
        return write_specs(
            tmp_path / "s",
            [
                cluster(pools=POOLS[:1]),  # two nodes of 8 GPUs
                project("p", gpus=16),
                workload("w", "p", gpus=gpus, priority=100, **a100),
                workload("low1", "p", gpus=8, priority=10, **a100),
                workload("low2", "p", gpus=4, priority=10, **a100),
            ],
        )

    root = specs(2)
    settle(capsys, root, T0)
    specs(8)  # 4 GPUs are free with the old job gone, on two nodes or one
    data = plan(capsys, root)
    by_op = {a["op"]: a for a in data["actions"]}
    assert sorted(by_op) == ["cancel", "preempt", "submit"], ops(data)
    assert by_op["preempt"]["workload"] in ("p/low1", "p/low2")
    assert "p/w" in by_op["preempt"]["reason"]["message"]
    assert by_op["cancel"]["workload"] == by_op["submit"]["workload"] == "p/w"
    assert by_op["submit"]["reason"]["code"] == "spec-changed"
    assert {r["gpus"] for r in by_op["submit"]["replicas"]} == {8}
    assert [p["workload"] for p in data["pending"]] == [by_op["preempt"]["workload"]]
    settle(capsys, root)


def test_a_replacement_reclaims_what_its_project_deserves(tmp_path: Path, capsys: Capsys) -> None:
    """The new version of a project below its deserved quota takes back GPUs another
    project borrowed, as a new job of that project would."""
    a100 = {"gpuTypes": ["a100_80"], "command": ["x"]}

    def specs(gpus: int) -> Path:
        return write_specs(
            tmp_path / "s",
            [
                cluster(pools=POOLS[:1]),
                project("p", gpus=12),
                project("q", gpus=4),
                workload("w", "p", gpus=gpus, **a100),
                workload("borrow", "q", gpus=8, **a100),
                workload("own", "q", gpus=4, **a100),
            ],
        )

    root = specs(4)
    settle(capsys, root, T0)
    specs(8)
    data = plan(capsys, root)
    assert ops(data) == [
        ("submit", "spec-changed"),
        ("preempt", "reclaim"),
        ("cancel", "spec-changed"),
    ]
    submit, reclaimed, cancel = data["actions"]
    assert submit["workload"] == cancel["workload"] == "p/w"
    assert reclaimed["workload"].startswith("q/")
    settle(capsys, root)


def test_of_two_replacements_tried_as_new_jobs_the_one_placed_goes_ahead(
    tmp_path: Path, capsys: Capsys
) -> None:
    """The cycle that tried both runs again with the edit it could not place kept: that
    one's old job keeps running, and the other is still replaced."""
    a100, v100 = {"gpuTypes": ["a100_80"]}, {"gpuTypes": ["v100"]}

    def specs(first: int, second: int) -> Path:
        return write_specs(
            tmp_path / "s",
            [
                cluster(pools=POOLS),
                project("p", gpus=24),
                workload("w1", "p", gpus=first, priority=100, **a100),
                workload("low1", "p", gpus=8, priority=10, **a100),
                workload("low2", "p", gpus=4, priority=10, **a100),
                workload("w2", "p", gpus=second, priority=10, **v100),
                workload("v1", "p", gpus=4, priority=10, **v100),
                workload("v2", "p", gpus=2, priority=10, **v100),
            ],
        )

    root = specs(2, 2)
    settle(capsys, root, T0)
    specs(8, 4)  # w2 ties with everything beside it: no victim, and no other project
    data = plan(capsys, root)
    assert sorted((a["op"], a["workload"]) for a in data["actions"] if a["workload"] == "p/w1") == [
        ("cancel", "p/w1"),
        ("submit", "p/w1"),
    ]
    assert [a["op"] for a in data["actions"] if a["workload"] != "p/w1"] == ["preempt"]
    waits = {p["workload"]: p["reason"] for p in data["pending"]}
    assert waits["p/w2"]["code"] == "spec-changed"
    assert "with the old job's GPUs free, was not placed (" in waits["p/w2"]["message"]
    assert "gpus: 2 -> 4" in waits["p/w2"]["message"]


def test_a_replacement_held_back_by_min_runtime_says_so(tmp_path: Path, capsys: Capsys) -> None:
    """The new version could preempt lower-priority work of its project, but that work is
    still inside the project's minRuntime: the wait says so (it said "no lower-priority
    work of its project to preempt"; seen on the quick start's notebook). Once the
    protection ends, the replacement goes ahead."""
    a100 = {"gpuTypes": ["a100_80"], "command": ["x"]}

    def specs(gpus: int) -> Path:
        return write_specs(
            tmp_path / "s",
            [
                cluster(pools=POOLS[:1]),
                project("p", gpus=16, minRuntime="1h"),
                workload("w", "p", gpus=gpus, type="interactive", **a100),
                workload("low1", "p", gpus=8, priority=10, **a100),
                workload("low2", "p", gpus=4, priority=10, **a100),
            ],
        )

    root = specs(2)
    settle(capsys, root, T0)
    specs(8)
    data = plan(capsys, root, "2026-11-22T10:10:00+00:00")
    assert data["actions"] == []
    [waits] = [p for p in data["pending"] if p["workload"] == "p/w"]
    assert "was not placed (min-runtime:" in waits["reason"]["message"], waits
    later = plan(capsys, root, "2026-11-22T11:30:00+00:00")
    assert sorted(a["op"] for a in later["actions"]) == ["cancel", "preempt", "submit"]


def test_an_image_the_cluster_already_runs_by_default_changes_nothing() -> None:
    """Writing the Kubernetes cluster's default image into a workload restarted its running
    job ("image: none -> busybox:1.36") though the container runs that image already (user
    trial). What counts is the image the job runs: the same, nothing to do; another, a
    replacement."""
    k8s = cluster(
        "k8s", adapter="kubernetes", pools=K8S_POOLS, kubernetes={"image": "busybox:1.36"}
    )

    def org(**spec: Any) -> Any:
        return desired([k8s, project("p", gpus=8), workload("w", "p", gpus=2, **spec)])

    before = org()
    old = before.workloads["p/w"].spec
    node = Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8)
    job = Job(id="cp-p/w-1", workload="p/w", state=JobState.RUNNING, pool="a100",
              started_at=NOW - timedelta(hours=1), replicas=[Replica(node="a100-01", gpus=2)],
              spec_digest=old.digest)  # fmt: skip
    world = Snapshot(now=NOW, clusters=[ClusterState(name="k8s", nodes=[node], jobs=[job])])
    world.versions = {old.digest: old}
    same = make_plan(org(image="busybox:1.36"), world, now=NOW)
    assert same.actions == [], [(a.op, a.reason.message) for a in same.actions]
    other = make_plan(org(image="busybox:1.37"), world, now=NOW)
    assert sorted(a.op.value for a in other.actions) == ["cancel", "submit"]
    assert "image: default (busybox:1.36) -> busybox:1.37" in other.actions[0].reason.message


def test_an_image_edit_off_kubernetes_changes_nothing() -> None:
    """An image written into a workload that runs on the simulator (or Slurm) restarted its
    job, losing its progress ("spec-changed: image"), though no container runs it there:
    only Kubernetes clusters read spec.image (user trial). Off Kubernetes it is no change;
    a command change still is."""
    org = desired([cluster(), project("p", gpus=8), workload("w", "p", gpus=2, command=["a"])])
    old = org.workloads["p/w"].spec
    node = Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8)
    job = Job(id="1", workload="p/w", state=JobState.RUNNING, pool="a100",
              started_at=NOW - timedelta(hours=1), replicas=[Replica(node="a100-01", gpus=2)],
              spec_digest=old.digest)  # fmt: skip
    world = Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=[node], jobs=[job])])
    world.versions = {old.digest: old}

    def edited(**spec: Any) -> Any:
        return desired([cluster(), project("p", gpus=8), workload("w", "p", gpus=2, **spec)])

    same = make_plan(edited(command=["a"], image="pytorch:24.05"), world, now=NOW)
    assert same.actions == [], [(a.op, a.reason.message) for a in same.actions]
    other = make_plan(edited(command=["b"], image="pytorch:24.05"), world, now=NOW)
    assert sorted(a.op.value for a in other.actions) == ["cancel", "submit"]
    assert "image" not in other.actions[0].reason.message, other.actions[0].reason.message


K8S_POOLS = [
    {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1,
     "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
]  # fmt: skip


def k8s_world(spec: Any) -> Snapshot:
    """A Kubernetes cluster of one A100 node, where ``spec``'s job runs in namespace cp-p,
    from image busybox:1.36."""
    node = Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8)
    job = Job(id="cp-p/w-1", workload="p/w", state=JobState.RUNNING, pool="a100",
              started_at=NOW - timedelta(hours=1), replicas=[Replica(node="a100-01", gpus=2)],
              spec_digest=spec.digest, namespace="cp-p", image="busybox:1.36")  # fmt: skip
    return Snapshot(now=NOW, clusters=[ClusterState(name="k8s", nodes=[node], jobs=[job])])


def test_a_job_in_another_namespace_or_image_than_the_specs_now_ask_is_replaced() -> None:
    """A project's new spec.namespace, or the cluster's new default image, left running jobs
    where and as they were, and the plan said nothing (user trial on Kubernetes): neither
    is in the workload's spec. The observed job says where it runs and what: a difference
    is a replacement, named."""
    pools = K8S_POOLS

    def org(image: str = "busybox:1.36", **project_spec: Any) -> Any:
        k8s = cluster("k8s", adapter="kubernetes", pools=pools, kubernetes={"image": image})
        return desired([k8s, project("p", gpus=8, **project_spec), workload("w", "p", gpus=2)])

    spec = org().workloads["p/w"].spec
    world = k8s_world(spec)
    [job] = world.clusters[0].jobs
    assert make_plan(org(), world, now=NOW).actions == []
    moved = make_plan(org(namespace="lab-p"), world, now=NOW)
    assert sorted(a.op.value for a in moved.actions) == ["cancel", "submit"]
    assert "namespace: cp-p -> lab-p" in moved.actions[0].reason.message
    newer = make_plan(org(image="busybox:1.37"), world, now=NOW)
    assert sorted(a.op.value for a in newer.actions) == ["cancel", "submit"]
    assert "image: busybox:1.36 -> default (busybox:1.37)" in newer.actions[0].reason.message
    # pinned to what it runs, then the default changes: it runs what its spec says, so it
    # stays (the spec's edit, default -> busybox:1.36, was read against the new default)
    pinned = desired([
        cluster("k8s", adapter="kubernetes", pools=pools, kubernetes={"image": "busybox:1.37"}),
        project("p", gpus=8), workload("w", "p", gpus=2, image="busybox:1.36"),
    ])  # fmt: skip
    world.versions = {spec.digest: spec}
    kept = make_plan(pinned, world, now=NOW)
    assert kept.actions == [], [(a.op, a.reason.message) for a in kept.actions]
    world.versions = {}
    # a job observed without them (Slurm, the simulator, an older snapshot): as before
    bare = job.model_copy(update={"namespace": None, "image": None})
    world.clusters[0].jobs = [bare]
    assert make_plan(org(namespace="lab-p", image="busybox:1.37"), world, now=NOW).actions == []


def test_a_checkpointed_job_in_a_namespace_the_project_left_converges() -> None:
    """A checkpointed job of a project given a new namespace: cancelled with its grace to
    save, the new version to start once it has ended. Every plan ended "cut short: no
    fixed point after 4 rounds" until the job was gone (trialQ): in the plan's own later
    rounds the winding-down job was still in the old namespace, and was cancelled again.
    A command edit converged (it waited for the job to wind down)."""
    pools = [
        {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1,
         "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
    ]  # fmt: skip
    k8s = cluster("k8s", adapter="kubernetes", pools=pools, kubernetes={"image": "busybox:1.36"})
    saves = {"signal": "USR1", "grace": "30s"}

    def org(**project_spec: Any) -> Any:
        w = workload("w", "p", gpus=2, checkpoint=saves)
        return desired([k8s, project("p", gpus=8, **project_spec), w])

    world = k8s_world(org().workloads["p/w"].spec)
    [job] = world.clusters[0].jobs
    moved = make_plan(org(namespace="lab-p"), world, now=NOW)
    assert [a.op.value for a in moved.actions] == ["cancel"]  # saves first, then starts
    assert not moved.solver.cut_short, moved.solver.cut_short
    # the next plan, while it winds down: it waits for it, as for any edit
    winding = job.model_copy(update={"state": JobState.COMPLETING})
    world.clusters[0].jobs = [winding]
    waits = make_plan(org(namespace="lab-p"), world, now=NOW)
    assert waits.actions == [] and not waits.solver.cut_short
    assert [p.reason.code.value for p in waits.pending] == ["spec-changed"]


def test_a_job_of_a_version_the_store_does_not_hold_is_told_not_ignored() -> None:
    """After a move to a new store (`cp store init --db`, as the README says), a lost
    `.cp/`, or a job another spec repo made under the same name, the version a job runs
    is unknown: an edit to it was silently ignored ("No changes. The clusters match the
    specs.") while the old command ran on (user trial). What changed cannot be told, and
    the job may not be this store's to cancel: it is left running, and the plan says so."""
    d = desired([cluster(pools=POOLS), project("p", gpus=16), workload("w", "p", gpus=2)])
    node = Node(name="a100-01", pool="a100", gpu_type="a100_80", gpus=8)
    job = Job(id="12", workload="p/w", pool="a100", started_at=NOW - timedelta(hours=1),
              replicas=[Replica(node="a100-01", gpus=2)], spec_digest="0123456789abcdef")  # fmt: skip
    world = Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=[node], jobs=[job])])
    made = make_plan(d, world, now=NOW)
    assert made.actions == []
    [told] = [p for p in made.pending if p.workload == "p/w"]
    assert told.reason.code.value == "spec-changed"
    assert "job 12 runs a version of this spec that the store does not hold" in (
        told.reason.message
    )
    # the job of the current version, or one that carries no digest: nothing to say
    for digest in (d.workloads["p/w"].spec.digest, None):
        world.clusters[0].jobs = [job.model_copy(update={"spec_digest": digest})]
        assert make_plan(d, world, now=NOW).pending == []


def test_a_job_of_an_unknown_version_counts_the_gpus_it_holds() -> None:
    """Left running, a job of a version the store does not hold counted as its new spec's
    shape: 2 replicas of 4 GPUs edited to 1 GPU each held 8 GPUs and counted 2. Its
    project's limit (12) then let a second workload grow by 4 (new property test): 16
    GPUs under a limit of 12. It counts, and stays, as it runs."""
    d = desired([
        cluster(pools=POOLS), project("p", gpus=0, limit=12),
        workload("w", "p", gpus=1, replicas=2, minReplicas=1),
        workload("e", "p", gpus=4, replicas=2, minReplicas=1),
    ])  # fmt: skip
    nodes = [Node(name=f"a100-0{i}", pool="a100", gpu_type="a100_80", gpus=8) for i in (1, 2)]
    started = NOW - timedelta(hours=1)
    old = Job(id="12", workload="p/w", pool="a100", started_at=started,
              replicas=[Replica(node="a100-01", gpus=4), Replica(node="a100-02", gpus=4)],
              spec_digest="0123456789abcdef")  # fmt: skip
    elastic = Job(id="13", workload="p/e", pool="a100", started_at=started,
                  replicas=[Replica(node="a100-01", gpus=4)],
                  spec_digest=d.workloads["p/e"].spec.digest)  # fmt: skip
    world = Snapshot(now=NOW, clusters=[ClusterState(name="sim", nodes=nodes, jobs=[old, elastic])])
    made = make_plan(d, world, now=NOW)
    assert made.actions == [], [(a.op.value, a.workload, a.reason.message) for a in made.actions]
    assert [(p.workload, p.reason.code.value) for p in made.pending] == [("p/w", "spec-changed")]


def test_an_edit_to_a_running_fan_out_workload_is_told_while_its_job_runs(
    tmp_path: Path, capsys: Capsys
) -> None:
    """Fan-out workloads are not replaced (their candidates are chosen once): the new
    version runs when the old job ends. The plan meanwhile said "No changes. The clusters
    match the specs." and listed nothing, then submitted the new version unannounced once
    the job ended (user trial). It waits, `spec-changed`, as other edits that wait do."""
    fan = {"strategy": {"fanOut": True, "maxParallel": 2}, "walltime": "6h", "gpuTypes": None}
    root = org(tmp_path / "s", **fan)
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", T0))
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", T1))  # one starts, the other goes
    assert plan(capsys, root)["actions"] == []
    org(root, **fan, gpus=1)
    data = plan(capsys, root)
    assert data["actions"] == []
    [told] = [p for p in data["pending"] if p["workload"] == "p/w"]
    assert told["reason"]["code"] == "spec-changed"
    assert "gpus: 2 -> 1" in told["reason"]["message"], told["reason"]["message"]
    assert "fan-out" in told["reason"]["message"]


def test_a_completed_workload_reverted_to_an_earlier_spec_stays_done(
    tmp_path: Path, capsys: Capsys
) -> None:
    """Version 1 ran, version 2 replaced it and completed; then the spec went back to
    version 1. The apply said the workload "does not run again", and the plan a second
    later started it (trial Z): the cluster had forgotten the completed job, and the
    store's memory of it had no start, so the revert looked like an edit while it ran."""
    root = org(tmp_path / "s", walltime="1h")
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", "2026-06-01T00:00:00Z"))
    org(root, walltime="1h", gpus=4)  # a new job replaces the first
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", "2026-06-01T00:10:00Z"))
    org(root, walltime="1h")  # back to the first version, days after the second completed
    applied = ok(cp(capsys, "apply", root, "--auto-approve", "--now", "2026-06-04T00:00:00Z"))
    assert "does not run again" in applied.out
    later = plan(capsys, root, "2026-06-04T00:00:01Z")
    assert later["actions"] == [] and [f["workload"] for f in later["finished"]] == ["p/w"]
