"""What a plan reads off a real API server, from a user trial on Kubernetes.

* An edit to a running workload is seen: the observed job carries the digest of the spec
  it runs, as on Slurm. Without it every edit read "no changes" on Kubernetes.
* A gang one of whose pods failed is not "grown" back in place (every apply reported a
  resize done that created nothing, and kept GPUs for it): nothing but the plan ends the
  survivors (a later trial: they held their GPUs past the project's limit), so it stops
  them and plans the gang again, whole.
* A GPU pod labelled ``controlplane.io/managed`` without our identity is somebody else's:
  its GPUs count. It was in neither list, so the plan bound work onto its GPUs, the room
  check refused, and every later plan did the same.
* A node that loses GPUs under a running gang (allocatable 8 -> 4, our pods hold 8) is
  over-committed: ``cp get nodes`` showed ``used 4`` and ``cp status`` ours + free above
  the GPUs, with nothing saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from adapters.kubernetes.localcluster import GPU_PRODUCT, add_gpu_node
from tests.builders.cli import cp, ok, write_specs
from tests.integration.k8s.conftest import A100

pytestmark = pytest.mark.k8s
Helper = Callable[..., Any]
Capsys = pytest.CaptureFixture[str]


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def workload(name: str, gpus: int, gpu_type: str, **spec: Any) -> dict[str, Any]:
    spec = {"walltime": "1h", "command": ["sleep", "600"], **spec}
    return doc("Workload", name, project="vision", gpus=gpus, gpuTypes=[gpu_type], **spec)


def ops(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted((a["op"], a["workload"], a["reason"]["code"]) for a in plan["actions"])


@contextmanager
def only_spare_has_room(kube: client.ApiClient, foreign_pod: Helper) -> Iterator[None]:
    """A fourth A100 node, spare-0, the only one with room: somebody else's pods fill the
    other three. The node is deleted afterwards."""
    add_gpu_node(kube, "spare-0", gpus=8, labels={GPU_PRODUCT: A100})
    try:
        for node in ("a100-0", "a100-1", "a100-2"):
            foreign_pod(f"full-{node}", node, 8)
        yield
    finally:
        client.CoreV1Api(kube).delete_node("spare-0")


def test_an_edit_to_running_work_is_seen(
    cluster_doc: dict[str, Any], tmp_path: Path, capsys: Capsys, pods: Helper, wait_for: Helper
) -> None:
    specs = tmp_path / "specs"
    project = doc("Project", "vision", quota={"gpus": 16})
    write_specs(specs, [cluster_doc, project, workload("resnet", 4, "a100_80")])
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    wait_for(lambda: [p.status.phase for p in pods()] == ["Running"])
    assert ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()["actions"] == []
    edited = workload("resnet", 4, "a100_80", command=["sleep", "700"])
    write_specs(specs, [cluster_doc, project, edited])
    plan = ok(cp(capsys, "plan", specs, "--json")).json()
    assert ops(plan) == [
        ("cancel", "vision/resnet", "spec-changed"),
        ("submit", "vision/resnet", "spec-changed"),
    ]


def test_a_gang_whose_pod_failed_is_not_grown_back(
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    pods: Helper,
    wait_for: Helper,
    kube: client.ApiClient,
) -> None:
    specs = tmp_path / "specs"
    project = doc("Project", "vision", quota={"gpus": 16})
    write_specs(specs, [cluster_doc, project, workload("vit", 2, "h100", replicas=2)])
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    wait_for(lambda: [p.status.phase for p in pods()] == ["Running", "Running"])
    [second] = [p for p in pods() if p.metadata.name.endswith("-1")]
    failing = {"controlplane.test/run-seconds": "0", "controlplane.test/exit-code": "137"}
    client.CoreV1Api(kube).patch_namespaced_pod(
        second.metadata.name, second.metadata.namespace, {"metadata": {"annotations": failing}}
    )
    wait_for(lambda: sorted(p.status.phase for p in pods()) == ["Failed", "Running"])
    planned = cp(capsys, "plan", specs, "--json", "--detailed-exitcode")
    assert planned.code == 2, planned.out + planned.err
    plan = planned.json()
    assert [(op, code) for op, _, code in ops(plan) if op == "cancel"] == [("cancel", "failed")]
    [again] = [a for a in plan["actions"] if a["op"] == "submit"]
    assert again["workload"] == "vision/vit" and len(again["replicas"]) == 2, "whole"
    assert not [a for a in plan["actions"] if a["op"] == "resize"]
    [job] = ok(cp(capsys, "get", "jobs", specs, "-o", "json")).json()["items"]
    assert job["state"] == "COMPLETING" and "replica failed" in job["reason"]


def test_a_pod_labelled_managed_without_our_identity_is_somebody_elses(
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    foreign_pod: Helper,
    pods: Helper,
) -> None:
    for node in ("a100-0", "a100-1"):  # only a100-2 has room: 1 GPU of it is taken
        foreign_pod(f"full-{node}", node, 8)
    foreign_pod("opted-out", "a100-2", 7, labels={"controlplane.io/managed": "false"})
    specs = tmp_path / "specs"
    project = doc("Project", "vision", quota={"gpus": 16})
    write_specs(specs, [cluster_doc, project, workload("tiny", 2, "a100_80")])
    plan = ok(cp(capsys, "plan", specs, "--json")).json()
    assert plan["actions"] == []
    assert {w["workload"]: w["reason"]["code"] for w in plan["pending"]} == {
        "vision/tiny": "no-capacity"
    }
    listed = ok(cp(capsys, "get", "nodes", specs, "-o", "json")).json()["items"]
    nodes = {n["name"]: n for n in listed}
    assert nodes["a100-2"]["used"] == 7


def test_work_on_a_deleted_node_is_placed_again(
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    foreign_pod: Helper,
    pods: Helper,
    wait_for: Helper,
    kube: client.ApiClient,
) -> None:
    """A node deleted under a one-replica Job (an autoscaler, an admin): the pod garbage
    collector removes its pod, and the Job makes another from its template, bound to the
    node that is gone, Pending for ever. It counted as running: every plan said "no
    changes" with room elsewhere (user trial). A job bound to a node the cluster no longer
    has waits, and the plan cancels it and places the workload again."""
    with only_spare_has_room(kube, foreign_pod):
        specs = tmp_path / "specs"
        project = doc("Project", "vision", quota={"gpus": 16})
        write_specs(specs, [cluster_doc, project, workload("big", 8, "a100_80")])
        ok(cp(capsys, "apply", specs, "--auto-approve"))
        wait_for(
            lambda: [(p.spec.node_name, p.status.phase) for p in pods()] == [("spare-0", "Running")]
        )
    items = ok(cp(capsys, "get", "jobs", specs, "-o", "json")).json()["items"]
    [job] = [j for j in items if j["workload"] == "vision/big"]
    assert job["state"] == "PENDING" and "spare-0, which the cluster no longer has" in job["reason"]
    client.CoreV1Api(kube).delete_namespaced_pod("full-a100-0", "default", grace_period_seconds=0)
    plan = ok(cp(capsys, "plan", specs, "--json")).json()
    assert ops(plan) == [
        ("cancel", "vision/big", "no-capacity"),
        ("submit", "vision/big", "within-deserved"),
    ]
    [submit] = [a for a in plan["actions"] if a["op"] == "submit"]
    assert [r["node"] for r in submit["replicas"]] == ["a100-0"]


def test_a_node_that_lost_gpus_under_a_gang_is_over_committed(
    cluster_doc: dict[str, Any],
    tmp_path: Path,
    capsys: Capsys,
    foreign_pod: Helper,
    pods: Helper,
    wait_for: Helper,
    kube: client.ApiClient,
) -> None:
    """A GPU fell off the bus (the device plugin restarted with 4 of 8): the pods keep
    running, the node's allocatable drops to 4. ``used`` is what they hold, the node is
    flagged, the excess counted, and the plan leaves everything as it is."""
    with only_spare_has_room(kube, foreign_pod):
        specs = tmp_path / "specs"
        project = doc("Project", "vision", quota={"gpus": 16})
        write_specs(specs, [cluster_doc, project, workload("gang", 4, "a100_80", replicas=2)])
        ok(cp(capsys, "apply", specs, "--auto-approve"))
        wait_for(
            lambda: (
                [(p.spec.node_name, p.status.phase) for p in pods()] == [("spare-0", "Running")] * 2
            )
        )
        lost = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "4"}
        status = {"status": {"capacity": lost, "allocatable": lost}}
        client.CoreV1Api(kube).patch_node_status("spare-0", status)
        listed = ok(cp(capsys, "get", "nodes", specs, "-o", "json")).json()["items"]
        [spare] = [n for n in listed if n["name"] == "spare-0"]
        assert (spare["gpus"], spare["used"], spare["overcommitted"]) == (4, 8, True)
        [row] = ok(cp(capsys, "status", specs, "--json")).json()["clusters"]
        # 3 x 8 a100 full of others' pods, 4 on spare-0, 2 x 4 h100 free
        assert (row["gpus"], row["ours"], row["others"], row["free"]) == (36, 8, 24, 8)
        assert (row["overcommittedGpus"], row["overcommittedNodes"]) == (4, ["spare-0"])
        assert ok(cp(capsys, "plan", specs, "--json")).json()["actions"] == []
