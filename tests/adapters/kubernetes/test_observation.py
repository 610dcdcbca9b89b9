"""Raw nodes and pods (as the API lists them) to snapshot nodes and jobs, without a server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from adapters.kubernetes import manifests
from adapters.kubernetes.observation import build_nodes, foreign_job, our_jobs, quantity
from adapters.kubernetes.request import build_request
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.models import KubernetesSettings, NodePool
from specs.snapshot import JobState, Replica

GPU = "nvidia.com/gpu"
LABEL = "nvidia.com/gpu.product"
POOLS = [
    NodePool(name="a100", gpu_type="a100_80", gpus_per_node=8, labels={LABEL: "A100"}),
    NodePool(name="h100", gpu_type="h100", gpus_per_node=8, labels={LABEL: "H100"}),
]
T0 = "2026-11-22T10:00:00Z"


def node(name: str, product: str | None = "A100", gpus: int = 8, **spec: Any) -> dict[str, Any]:
    ready = spec.pop("ready", True)
    return {
        "metadata": {"name": name, "labels": {LABEL: product} if product else {}},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": "96", GPU: str(gpus)} if gpus else {"cpu": "96"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    *,
    node: str | None = "a-1",
    gpus: int = 1,
    phase: str = "Running",
    namespace: str = "default",
    **meta: Any,
) -> dict[str, Any]:
    res = {"limits": {GPU: str(gpus)}} if gpus else {}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": res}]}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": T0, **meta},
        "spec": spec,
        "status": {"phase": phase, "startTime": T0} if phase != "Pending" else {"phase": phase},
    }


def ours(nodes: list[str | None], **status: Any) -> list[dict[str, Any]]:
    """The objects our adapter would create for chem/train, with pod statuses as given."""
    act = Action(
        op=Op.SUBMIT,
        workload="chem/train",
        cluster="k",
        pool="a100",
        replicas=[Replica(node=n, gpus=2) for n in nodes],
        reason=Reason(code=ReasonCode.WITHIN_DESERVED, message="t"),
        submit=SubmitDetails(gpu_type="a100_80", gpus_per_replica=2, walltime=60),
    )
    req = build_request(
        act, "plan-1", settings=KubernetesSettings(image="x"), pools=POOLS, namespaces={}
    )
    out = []
    for body in manifests.objects(req):
        if body["kind"] == "Job":
            body = {**body, "metadata": {**body["metadata"], "creationTimestamp": T0}}
        else:
            body = {**body, "metadata": {**body["metadata"], "creationTimestamp": T0}}
            body["status"] = {"phase": "Running", "startTime": T0} | status
        out.append(body)
    return out


def test_quantities() -> None:
    assert [quantity(q) for q in ("8", "8000m", "1k", 4, None, "bad")] == [8, 8, 1000, 4, 0, 0]


def test_nodes_join_pools_by_labels_and_use_counts_every_pod() -> None:
    nodes = [
        node("a-1"),
        node("a-2", unschedulable=True),  # cordoned
        node("h-1", product="H100", ready=False),
        node("t4-1", product="T4", gpus=2),  # no pool selects it
        node("cpu-1", product=None, gpus=0),  # not a GPU node: left out
    ]
    pods = [pod("x", gpus=3), pod("y", gpus=5, phase="Succeeded"), pod("z", node="t4-1", gpus=2)]
    got = {n.name: n for n in build_nodes(nodes, pods, POOLS, resource=GPU, type_label=LABEL)}
    assert sorted(got) == ["a-1", "a-2", "h-1", "t4-1"]
    assert (got["a-1"].pool, got["a-1"].gpu_type, got["a-1"].gpus, got["a-1"].state) == (
        "a100",
        "a100_80",
        8,
        "mixed",
    )
    assert got["a-2"].state == "drain" and got["h-1"].state == "drain" and got["h-1"].pool == "h100"
    assert (got["t4-1"].pool, got["t4-1"].gpu_type, got["t4-1"].state) == (None, "T4", "allocated")


def test_a_node_tainted_against_other_work_takes_none_of_ours() -> None:
    """Pods are bound by name (no scheduler), which passes over a NoSchedule taint, and a
    NoExecute one evicts them: a node an admin fenced off (``dedicated=other-team``, a GPU
    health taint) was planned on like an idle one (user trial). It is drained for the plan.
    The GPU resource's own taint (GPU nodes for GPU pods only) is what our pods ask for."""

    def tainted(name: str, key: str, effect: str) -> dict[str, Any]:
        return node(name, taints=[{"key": key, "value": "x", "effect": effect}])

    nodes = [
        tainted("a-1", "dedicated", "NoSchedule"),
        tainted("a-2", "gpu-health", "NoExecute"),
        tainted("a-3", "dedicated", "PreferNoSchedule"),  # a preference, not a fence
        tainted("a-4", GPU, "NoSchedule"),
    ]
    got = {n.name: n.state for n in build_nodes(nodes, [], POOLS, resource=GPU, type_label=LABEL)}
    assert got == {"a-1": "drain", "a-2": "drain", "a-3": "idle", "a-4": "idle"}


def test_one_pool_without_labels_takes_every_gpu_node() -> None:
    pools = [NodePool(name="all", gpu_type="a100_80", gpus_per_node=8)]
    got = build_nodes(
        [node("a-1"), node("t-1", product="T4")], [], pools, resource=GPU, type_label=LABEL
    )
    assert [(n.name, n.pool) for n in got] == [("a-1", "all"), ("t-1", "all")]


def test_foreign_pods_holding_gpus_are_jobs_of_nobody() -> None:
    owned = pod("web-1", gpus=2, ownerReferences=[{"kind": "ReplicaSet", "name": "web-7d9f"}])
    job = foreign_job(owned, GPU)
    assert job is not None
    assert (job.id, job.workload, job.owner, job.state, job.gpus) == (
        "default/web-1",
        None,
        "ReplicaSet/web-7d9f",
        JobState.RUNNING,
        2,
    )
    assert job.started_at == datetime(2026, 11, 22, 10, tzinfo=UTC)
    assert foreign_job(pod("cpu", gpus=0), GPU) is None
    assert foreign_job(pod("unbound", node=None, phase="Pending"), GPU) is None
    assert foreign_job(pod("done", phase="Failed"), GPU) is None
    deleting = foreign_job(pod("bye", deletionTimestamp=T0), GPU)
    assert deleting is not None and deleting.state == JobState.COMPLETING


def test_a_gang_is_one_job_with_a_replica_per_pod() -> None:
    objs = ours(["a-1", "a-2"])
    [job] = our_jobs(objs, [], GPU)
    assert job.workload == "chem/train" and job.state == JobState.RUNNING
    assert job.id.startswith("cp-chem/chem-train-") and job.plan_id == "plan-1"
    assert [(r.node, r.gpus) for r in job.replicas] == [("a-1", 2), ("a-2", 2)]
    assert (job.pool, job.gpu_type, job.walltime) == ("a100", "a100_80", 60)
    # where it runs and what: drift compares them with what the specs now ask
    assert (job.namespace, job.image) == ("cp-chem", "x")


def test_a_node_that_lost_gpus_under_our_pods_reports_both() -> None:
    """A GPU fell off the bus under a running gang (user trial): the node's allocatable
    drops below what our pods hold, and nothing evicts them. The snapshot keeps both facts,
    the node's count and every replica, for ``cp get nodes`` and ``cp status`` to show the
    over-commit (tests/controlplane/cli/test_overcommitted_node.py)."""
    objs = ours(["a-1", "a-1"])  # 2 x 2 GPUs
    pods = [o for o in objs if o["kind"] == "Pod"]
    [n] = build_nodes([node("a-1", gpus=2)], pods, POOLS, resource=GPU, type_label=LABEL)
    assert (n.gpus, n.state) == (2, "allocated")
    [job] = our_jobs(objs, [], GPU, nodes=["a-1"])
    assert [(r.node, r.gpus) for r in job.replicas] == [("a-1", 2), ("a-1", 2)]


def test_a_job_whose_pod_is_not_made_yet_is_placed_by_its_template() -> None:
    [k8s_job] = ours(["a-1"])
    [job] = our_jobs([], [k8s_job], GPU)
    assert job.state == JobState.RUNNING and [(r.node, r.gpus) for r in job.replicas] == [
        ("a-1", 2)
    ]
    assert (job.namespace, job.image) == ("cp-chem", "x")
    [unbound] = ours([None])
    [waiting] = our_jobs([], [unbound], GPU)
    assert waiting.state == JobState.PENDING


def test_states_of_a_gang() -> None:
    failing: list[int | None] = []

    def state(*statuses: dict[str, Any], **meta: Any) -> tuple[JobState, str | None, int]:
        objs = ours(["a-1", "a-2"])
        for o, s in zip(objs, statuses, strict=True):
            o["status"] = s
            o["metadata"] |= meta
        [job] = our_jobs(objs, [], GPU)
        failing.append(job.failed_replicas)
        return job.state, job.exit_code, len(job.replicas)

    running = {"phase": "Running", "startTime": T0}
    failed = {
        "phase": "Failed",
        "containerStatuses": [{"state": {"terminated": {"exitCode": 3, "finishedAt": T0}}}],
    }
    rejected = {"phase": "Failed", "reason": "OutOfnvidia.com/gpu", "message": "no room"}
    done = {
        "phase": "Succeeded",
        "containerStatuses": [{"state": {"terminated": {"exitCode": 0, "finishedAt": T0}}}],
    }
    assert state(running, running) == (JobState.RUNNING, None, 2)
    assert state(done, done) == (JobState.COMPLETED, None, 2)
    # one replica died: the other still holds its GPUs, so the gang is not over yet
    assert state(failed, running) == (JobState.COMPLETING, "3", 1)
    assert failing[-1] == 1, "nothing but a plan ends the other: it is told"
    # one replica finished first (rank 0 often does): the gang is ending, not one replica
    # short (every plan grew it back, and every apply did nothing: user trial)
    assert state(done, running) == (JobState.COMPLETING, None, 1)
    assert failing[-1] is None
    assert state(failed, done) == (JobState.FAILED, "3", 2)
    assert state(rejected, rejected)[0] == JobState.FAILED
    assert state(running, running, deletionTimestamp=T0)[0] == JobState.COMPLETING
    assert failing[-1] is None, "being deleted: it ends by itself"
    assert state({"phase": "Pending"}, {"phase": "Pending"})[0] == JobState.RUNNING, "bound"


def test_a_job_past_its_deadline_timed_out() -> None:
    [k8s_job] = ours(["a-1"])
    k8s_job["status"] = {
        "conditions": [
            {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "late"}
        ]
    }
    [job] = our_jobs([], [k8s_job], GPU)
    assert job.state == JobState.TIMEOUT and "DeadlineExceeded" in (job.reason or "")
