"""The control plane end to end on a real kube-apiserver: specs -> cp plan -> cp apply -> objects.

No mocks: the session's API server holds every object, the fake kubelet runs the pods,
and every claim is checked with the plain client. Covered here:

* a spec repo converges: every planned pod is bound where the plan says with the planned
  GPU requests, the next plan is empty; a pod nobody planned (no identity of ours) is never
  touched and the planner leaves its GPUs alone;
* spec edits: removed workloads are deleted (prune), and what replaces them is bound on
  the GPUs they freed, in the same apply;
* reclaim and preemption: the victims' pods are deleted and the beneficiaries' pods
  bound, in one apply; a checkpointable victim got its signal as a preStop hook.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.builders.cli import cp, ok, write_specs

pytestmark = pytest.mark.k8s
Helper = Callable[..., Any]
Capsys = pytest.CaptureFixture[str]
SLEEP = ["sleep", "600"]


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def workload(name: str, project: str, gpus: int, gpu_type: str, **spec: Any) -> dict[str, Any]:
    return doc(
        "Workload",
        name,
        project=project,
        gpus=gpus,
        gpuTypes=[gpu_type],
        walltime="1h",
        command=SLEEP,
        **spec,
    )


def placed(pods: Helper, workload: str) -> list[tuple[str, str]]:
    """(node, GPU limit) of each live pod of ``workload``, by replica."""
    project, name = workload.split("/")
    selector = f"controlplane.io/project={project},controlplane.io/workload={name}"
    live = [p for p in pods(selector) if not p.metadata.deletion_timestamp]
    return sorted(
        (p.spec.node_name, p.spec.containers[0].resources.limits["nvidia.com/gpu"]) for p in live
    )


def running(pods: Helper) -> bool:
    return all(p.status.phase == "Running" for p in pods())


def test_specs_converge_then_edits_delete_and_replace(
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    foreign_pod: Helper,
    pods: Helper,
    wait_for: Helper,
    kube: client.ApiClient,
) -> None:
    # somebody else's pod holds all of h100-0: never ours to touch, its GPUs are taken
    foreign_pod("squatter", "h100-0", 4)
    specs = tmp_path / "specs"
    docs = [
        cluster_doc,
        doc("Project", "chem", quota={"gpus": 16}),
        doc("Project", "ops", quota={"gpus": 8}),
        workload("train", "chem", 8, "a100_80"),
        workload("dist", "chem", 4, "a100_80", replicas=2),
        workload("small", "chem", 1, "h100"),
        workload("tune", "ops", 2, "h100"),
        workload("notebook", "ops", 1, "h100", type="interactive"),
    ]
    write_specs(specs, docs)
    planned = ok(cp(capsys, "plan", specs, "--json", "--out", tmp_path / "plan.json")).json()
    submits = {a["workload"]: a for a in planned["actions"]}
    assert {a["op"] for a in planned["actions"]} == {"submit"}
    assert sorted(submits) == ["chem/dist", "chem/small", "chem/train", "ops/notebook", "ops/tune"]
    for w in ("chem/small", "ops/tune", "ops/notebook"):
        assert [r["node"] for r in submits[w]["replicas"]] == ["h100-1"], "not on the foreign node"

    applied = ok(cp(capsys, "apply", tmp_path / "plan.json", "--dir", specs, "--json")).json()
    assert applied["ok"] and {a["status"] for a in applied["actions"]} == {"done"}
    for w, action in submits.items():
        want = sorted((r["node"], str(r["gpus"])) for r in action["replicas"])
        assert placed(pods, w) == want, w
    wait_for(lambda: running(pods))
    assert ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()["actions"] == []

    # edit: small and tune leave, big takes their GPUs on h100-1 (the only h100 with room)
    docs = [d for d in docs if d["metadata"]["name"] not in ("small", "tune")]
    docs.append(workload("big", "ops", 3, "h100"))
    write_specs(specs, docs)
    edited = ok(cp(capsys, "plan", specs, "--json")).json()
    ops = sorted((a["op"], a["workload"]) for a in edited["actions"])
    assert ops == [("cancel", "chem/small"), ("cancel", "ops/tune"), ("submit", "ops/big")]
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    assert placed(pods, "chem/small") == placed(pods, "ops/tune") == []
    assert placed(pods, "ops/big") == [("h100-1", "3")]
    wait_for(lambda: running(pods))
    assert ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()["actions"] == []

    squatter = client.CoreV1Api(kube).read_namespaced_pod("squatter", "default")
    assert squatter.status.phase == "Running" and squatter.metadata.deletion_timestamp is None
    history = ok(cp(capsys, "history", specs, "--json")).json()
    assert {h["cluster"] for h in history} == {"k8s"}


def test_reclaim_and_preemption_in_one_apply(
    cluster_doc: dict[str, Any], tmp_path: Path, capsys: Capsys, pods: Helper, wait_for: Helper
) -> None:
    specs = tmp_path / "specs"
    base = [
        cluster_doc,
        doc("Project", "chem", quota={"gpus": 16}),
        doc("Project", "bio", quota={"gpus": 8}),
        *[
            workload(
                f"sweep-{i}", "bio", 8, "a100_80", checkpoint={"signal": "USR1", "grace": "20s"}
            )
            for i in range(3)
        ],
    ]
    write_specs(specs, base)
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    wait_for(lambda: len(pods()) == 3 and running(pods))
    victim = pods()[0]
    assert victim.spec.termination_grace_period_seconds == 20
    hook = victim.spec.containers[0].lifecycle.pre_stop._exec.command
    assert hook[-2:] == ["USR1", "20"], "the checkpoint signal reaches the workload when preempted"

    # chem claims its deserved 16 back (reclaim), bio's urgent work outranks its sweeps
    write_specs(
        specs,
        [
            *base,
            workload("train", "chem", 8, "a100_80", replicas=2),
            workload("urgent", "bio", 8, "a100_80", priority=100),
        ],
    )
    planned = ok(cp(capsys, "plan", specs, "--json")).json()
    ops = sorted((a["op"], a["workload"], a["reason"]["code"]) for a in planned["actions"])
    assert [op for op, _, _ in ops].count("preempt") == 3
    assert {code for op, _, code in ops if op == "preempt"} == {"reclaim", "priority"}
    assert [(op, w) for op, w, _ in ops if op == "submit"] == [
        ("submit", "bio/urgent"),
        ("submit", "chem/train"),
    ]
    body = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()
    assert body["ok"]
    gone = [w for op, w, _ in ops if op == "preempt"]
    for w in gone:
        assert placed(pods, w) == []
    train = {a["workload"]: a for a in planned["actions"]}["chem/train"]
    assert placed(pods, "chem/train") == sorted((r["node"], "8") for r in train["replicas"])
    assert len(placed(pods, "bio/urgent")) == 1
    wait_for(lambda: running(pods) and len(pods()) == 3)
    again = ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()
    assert again["actions"] == []
    assert {p["workload"] for p in again["pending"]} == set(gone)


def test_a_new_namespace_or_default_image_replaces_running_jobs(
    make_cluster_doc: Helper, tmp_path: Path, capsys: Capsys, pods: Helper, wait_for: Helper
) -> None:
    """Neither a project's namespace nor the cluster's default image is in the workload's
    spec: changing them left running pods where and as they were, and the plan said
    nothing (user trial). Each now replaces the job, named in the reason."""
    specs = tmp_path / "specs"
    train = workload("train", "chem", 1, "a100_80")

    def specs_with(project: dict[str, Any], image: str = "busybox:1.36") -> None:
        write_specs(specs, [make_cluster_doc(image=image), project, train])

    def live() -> list[tuple[str, str]]:
        found = pods("controlplane.io/workload=train")
        return [
            (p.metadata.namespace, p.spec.containers[0].image)
            for p in found
            if not p.metadata.deletion_timestamp
        ]

    specs_with(doc("Project", "chem", quota={"gpus": 8}))
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    assert live() == [("cp-chem", "busybox:1.36")]
    wait_for(lambda: running(pods))

    specs_with(doc("Project", "chem", quota={"gpus": 8}, namespace="chem-lab"))
    moved = ok(cp(capsys, "plan", specs, "--json")).json()
    assert sorted(a["op"] for a in moved["actions"]) == ["cancel", "submit"]
    assert all("namespace: cp-chem -> chem-lab" in a["reason"]["message"] for a in moved["actions"])
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    assert live() == [("chem-lab", "busybox:1.36")]
    wait_for(lambda: running(pods))

    specs_with(doc("Project", "chem", quota={"gpus": 8}, namespace="chem-lab"), "busybox:1.37")
    newer = ok(cp(capsys, "plan", specs, "--json")).json()
    assert sorted(a["op"] for a in newer["actions"]) == ["cancel", "submit"]
    assert (
        "image: busybox:1.36 -> default (busybox:1.37)" in newer["actions"][0]["reason"]["message"]
    )
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    assert live() == [("chem-lab", "busybox:1.37")]
    wait_for(lambda: running(pods))
    assert ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()["actions"] == []


def test_a_renamed_project_keeps_its_pods_where_its_namespace_stays(
    make_cluster_doc: Helper, tmp_path: Path, capsys: Capsys, pods: Helper, wait_for: Helper
) -> None:
    """Project chem renamed bio (spec.renamedFrom): with its namespace kept, the pod runs
    on, untouched; left to follow the new name, the namespace changes and the pod tagged
    chem/train is replaced, the cancel carrying that tag (which the adapter checks)."""
    specs = tmp_path / "specs"
    cluster_doc = make_cluster_doc()

    def uids() -> list[tuple[str, str]]:
        found = pods("controlplane.io/workload=train")
        return [
            (p.metadata.namespace, p.metadata.uid)
            for p in found
            if not p.metadata.deletion_timestamp
        ]

    write_specs(
        specs,
        [
            cluster_doc,
            doc("Project", "chem", quota={"gpus": 8}),
            workload("train", "chem", 1, "a100_80"),
        ],
    )
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    wait_for(lambda: running(pods))
    before = uids()
    assert [ns for ns, _ in before] == ["cp-chem"]

    bio = workload("train", "bio", 1, "a100_80")
    kept = doc("Project", "bio", quota={"gpus": 8}, renamedFrom=["chem"], namespace="cp-chem")
    write_specs(specs, [cluster_doc, kept, bio])
    assert ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()["actions"] == []
    assert uids() == before

    write_specs(
        specs, [cluster_doc, doc("Project", "bio", quota={"gpus": 8}, renamedFrom=["chem"]), bio]
    )
    moved = ok(cp(capsys, "plan", specs, "--json")).json()
    ops = sorted((a["op"], a["workload"], a.get("taggedAs")) for a in moved["actions"])
    assert ops == [("cancel", "bio/train", "chem/train"), ("submit", "bio/train", None)]
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    wait_for(lambda: [ns for ns, _ in uids()] == ["cp-bio"])
    wait_for(lambda: running(pods))
    assert ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()["actions"] == []
