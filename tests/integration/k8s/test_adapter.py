"""KubernetesAdapter against a real kube-apiserver: what it creates, sees, deletes and refuses.

Every claim is checked with the plain client (what ``kubectl`` would show), not with the
adapter's own reading, except where the adapter's snapshot is the subject.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from adapters.base import PermanentError
from adapters.kubernetes import KubernetesAdapter
from adapters.kubernetes.fakekubelet import FakeKubelet
from adapters.kubernetes.identity import idempotency_key, submission_name
from specs.actions import Op
from specs.models import Cluster
from specs.snapshot import JobState

pytestmark = pytest.mark.k8s
Helper = Callable[..., Any]


def by_id(adapter: KubernetesAdapter) -> dict[str, Any]:
    return {j.id: j for j in adapter.observe().jobs}


def test_submit_creates_a_job_or_bound_pods_with_the_planned_gpus(
    adapter: KubernetesAdapter, kube: client.ApiClient, make_action: Helper, wait_for: Helper
) -> None:
    one = adapter.execute(make_action(gpus=2, nodes=["a100-0"]), plan_id="p1")
    gang = adapter.execute(
        make_action(workload="chem/gang", gpus=4, nodes=["a100-1", "a100-2"]), plan_id="p1"
    )
    assert one.ok and one.job and gang.ok and gang.job
    ns, name = one.job.split("/")
    assert ns == "cp-chem", "a namespace per project, created when missing"
    job = client.BatchV1Api(kube).read_namespaced_job(name, ns)
    assert job.metadata.labels["controlplane.io/managed"] == "true"
    assert job.metadata.annotations["controlplane.io/plan"] == "p1"
    template = job.spec.template.spec
    assert template.node_name == "a100-0"
    assert template.containers[0].resources.limits == {"nvidia.com/gpu": "2"}
    assert template.containers[0].resources.requests == {"nvidia.com/gpu": "2"}

    gang_ns, gang_name = gang.job.split("/")
    pods = (
        client.CoreV1Api(kube)
        .list_namespaced_pod(gang_ns, label_selector=f"controlplane.io/submission={gang_name}")
        .items
    )
    assert sorted((p.metadata.name, p.spec.node_name) for p in pods) == [
        (f"{gang_name}-0", "a100-1"),
        (f"{gang_name}-1", "a100-2"),
    ]
    assert {p.spec.containers[0].resources.limits["nvidia.com/gpu"] for p in pods} == {"4"}

    # the fake kubelet runs them; the snapshot shows them where they were put
    def running() -> bool:
        jobs = by_id(adapter)
        return all(
            jobs[j].state == JobState.RUNNING and jobs[j].started_at for j in (one.job, gang.job)
        )

    wait_for(running)
    jobs = by_id(adapter)
    assert [(r.node, r.gpus) for r in jobs[gang.job].replicas] == [("a100-1", 4), ("a100-2", 4)]
    assert (jobs[one.job].workload, jobs[one.job].plan_id) == ("chem/md-run", "p1")


def test_a_rerun_of_the_same_plan_creates_nothing(
    adapter: KubernetesAdapter, cluster_doc: dict[str, Any], make_action: Helper, pods: Helper
) -> None:
    action = make_action(workload="chem/gang", gpus=1, nodes=["a100-0", "a100-1", "a100-1"])
    first = adapter.execute(action, plan_id="p1")
    again = adapter.execute(action, plan_id="p1")
    # a new process after a crash: nothing cached, only what the API server has
    fresh = KubernetesAdapter(Cluster.model_validate(cluster_doc)).execute(action, plan_id="p1")
    assert first.job == again.job == fresh.job
    assert "already submitted" in again.message and "already submitted" in fresh.message
    assert len(pods()) == 3
    # the same workload in another plan is another submission
    other = adapter.execute(action, plan_id="p2")
    assert other.job != first.job and len(pods()) == 6


def test_observe_counts_every_gpu_in_use_including_other_owners(
    adapter: KubernetesAdapter,
    make_action: Helper,
    foreign_pod: Helper,
    kube: client.ApiClient,
    wait_for: Helper,
) -> None:
    # an owner that exists (the garbage collector removes pods whose owner does not)
    rs = client.AppsV1Api(kube).create_namespaced_replica_set(
        "default",
        {
            "metadata": {"name": "web-7d9f"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
            },
        },
    )
    ref = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web-7d9f",
        "uid": rs.metadata.uid,
    }
    owner = {"ownerReferences": [ref]}
    foreign_pod("web-1", "a100-0", 3, **owner)
    foreign_pod("batch-1", "h100-0", 4, namespace="kube-public")
    ours = adapter.execute(make_action(gpus=2, nodes=["a100-0"]), plan_id="p1")
    ended = client.CoreV1Api(kube)
    ended.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "done", "annotations": {"controlplane.test/run-seconds": "0"}},
            "spec": {
                "nodeName": "a100-1",
                "restartPolicy": "Never",
                "containers": [
                    {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
                ],
            },
        },
    )
    wait_for(lambda: ended.read_namespaced_pod("done", "default").status.phase == "Succeeded")

    state = wait_for(
        lambda: (s := adapter.observe()) and all(j.state == JobState.RUNNING for j in s.jobs) and s
    )
    nodes = {n.name: n for n in state.nodes}
    used: dict[str, int] = {}
    for j in state.jobs:
        for r in j.replicas:
            used[r.node or ""] = used.get(r.node or "", 0) + r.gpus
    assert used == {"a100-0": 5, "h100-0": 4}, "a finished pod holds nothing"
    assert (nodes["a100-0"].state, nodes["h100-0"].state, nodes["a100-1"].state) == (
        "mixed",
        "allocated",
        "idle",
    )
    jobs = {j.id: j for j in state.jobs}
    assert (jobs["default/web-1"].workload, jobs["default/web-1"].owner) == (
        None,
        "ReplicaSet/web-7d9f",
    )
    assert jobs["kube-public/batch-1"].owner == "Pod"
    assert jobs[ours.job].workload == "chem/md-run"
    assert {(n.pool, n.gpu_type, n.gpus) for n in state.nodes} == {
        ("a100", "a100_80", 8),
        ("h100", "h100", 4),
    }


def test_cancel_deletes_with_propagation_and_never_touches_what_is_not_ours(
    adapter: KubernetesAdapter,
    make_action: Helper,
    foreign_pod: Helper,
    pods: Helper,
    wait_for: Helper,
    kube: client.ApiClient,
) -> None:
    one = adapter.execute(make_action(nodes=["a100-0"]), plan_id="p1")
    gang = adapter.execute(
        make_action(workload="chem/gang", nodes=["a100-1", "a100-2"]), plan_id="p1"
    )
    wait_for(lambda: len([p for p in pods() if p.status.phase == "Running"]) == 3)
    for workload, sub in (("chem/md-run", one), ("chem/gang", gang)):
        done = adapter.execute(
            make_action(Op.CANCEL, workload=workload, job=sub.job, nodes=[]), plan_id="p2"
        )
        assert done.ok and "deleted" in done.message
    wait_for(lambda: not pods())
    assert not client.BatchV1Api(kube).list_job_for_all_namespaces().items, "the Job went too"
    again = adapter.execute(make_action(Op.CANCEL, job=one.job, nodes=[]), plan_id="p3")
    assert again.ok and "already gone" in again.message

    foreign_pod("theirs", "a100-0", 1)
    with pytest.raises(PermanentError, match="not created by the control plane"):
        adapter.execute(make_action(Op.PREEMPT, job="default/theirs", nodes=[]), plan_id="p4")
    with pytest.raises(PermanentError, match="belongs to workload chem/md-run"):
        fresh = adapter.execute(make_action(nodes=["a100-0"]), plan_id="p5")
        adapter.execute(
            make_action(Op.CANCEL, workload="bio/x", job=fresh.job, nodes=[]), plan_id="p6"
        )
    assert (
        client.CoreV1Api(kube).read_namespaced_pod("theirs", "default").metadata.deletion_timestamp
        is None
    )
    # project chem renamed bio (spec.renamedFrom): bio/md-run's cancel carries the tag
    renamed = make_action(Op.CANCEL, workload="bio/md-run", job=fresh.job, nodes=[])
    done = adapter.execute(renamed.model_copy(update={"tagged_as": "chem/md-run"}), plan_id="p7")
    assert done.ok and "deleted" in done.message


def test_a_lookalike_with_our_labels_is_left_alone_and_blocks_nothing(
    adapter: KubernetesAdapter,
    make_action: Helper,
    pods: Helper,
    wait_for: Helper,
    kube: client.ApiClient,
) -> None:
    """Someone's pod carrying our labels but not our identity (a debug copy made with
    kubectl's --keep-labels) made every action on our job fail, "not created by the
    control plane", naming our own Job: it could never be cancelled (user trial). The
    lookalike is not ours: it is left alone, and our objects are acted on."""
    ours = adapter.execute(make_action(nodes=["a100-0"]), plan_id="p1")
    wait_for(lambda: [p.status.phase for p in pods()] == ["Running"])
    [pod] = pods()
    labels = {k: v for k, v in pod.metadata.labels.items() if k.startswith("controlplane.io/")}
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(
        pod.metadata.namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "debug-copy", "labels": labels},
            "spec": {
                "nodeName": "a100-1",
                "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "60"]}],
            },
        },
    )
    done = adapter.execute(make_action(Op.CANCEL, job=ours.job, nodes=[]), plan_id="p2")
    assert done.ok and "deleted" in done.message
    copy = core.read_namespaced_pod("debug-copy", pod.metadata.namespace)
    assert copy.metadata.deletion_timestamp is None, "not ours: never touched"
    wait_for(lambda: [p.metadata.name for p in pods()] == ["debug-copy"])


def test_resize_in_place_and_move_by_replacement(
    adapter: KubernetesAdapter, make_action: Helper, pods: Helper, wait_for: Helper
) -> None:
    gang = adapter.execute(
        make_action(workload="ml/elastic", gpus=4, nodes=["a100-0", "a100-1"]), plan_id="p1"
    )
    grown = adapter.execute(
        make_action(
            Op.RESIZE,
            workload="ml/elastic",
            gpus=4,
            job=gang.job,
            nodes=["a100-0", "a100-1", "a100-2"],
            details=False,
        ),
        plan_id="p2",
    )
    assert grown.job == gang.job, "same submission"
    wait_for(
        lambda: (
            sorted(p.spec.node_name for p in pods() if p.status.phase == "Running")
            == ["a100-0", "a100-1", "a100-2"]
        )
    )
    [survivor] = [p for p in pods() if p.spec.node_name == "a100-2"]
    shrunk = adapter.execute(
        make_action(
            Op.RESIZE, workload="ml/elastic", gpus=4, job=gang.job, nodes=["a100-2"], details=False
        ),
        plan_id="p3",
    )
    # to one replica too, in place: the pod the plan keeps runs on (a Job replacing the
    # gang restarted it, and its progress was lost: user trial)
    assert shrunk.job == gang.job, "same submission"
    wait_for(lambda: [p.metadata.uid for p in pods()] == [survivor.metadata.uid])
    moved = adapter.execute(
        make_action(
            Op.MOVE, workload="ml/elastic", gpus=4, job=shrunk.job, nodes=["a100-0"], details=False
        ),
        plan_id="p4",
    )
    wait_for(lambda: [p.spec.node_name for p in pods()] == ["a100-0"])
    jobs = wait_for(lambda: list(j := by_id(adapter)) == [moved.job] and j)  # old Job: GC'd
    assert jobs[moved.job].replicas[0].node == "a100-0"
    # a rerun of the move after it happened: nothing more
    again = adapter.execute(
        make_action(
            Op.MOVE, workload="ml/elastic", gpus=4, job=shrunk.job, nodes=["a100-0"], details=False
        ),
        plan_id="p4",
    )
    assert again.job == moved.job and len(pods()) == 1


def test_a_replica_grown_back_takes_the_index_the_gang_lacks(
    adapter: KubernetesAdapter,
    make_action: Helper,
    pods: Helper,
    wait_for: Helper,
    kube: client.ApiClient,
) -> None:
    """Replica 0 of a gang deleted by hand, then grown back: the new pod was replica 2 of
    2 (one above the highest), so the gang had no rank 0 and a rank out of range (user
    trial). The indices the gang lacks are filled first."""
    nodes = ["a100-0", "a100-1"]
    gang = adapter.execute(make_action(workload="ml/elastic", gpus=4, nodes=nodes), plan_id="p1")
    wait_for(lambda: [p.status.phase for p in pods()] == ["Running", "Running"])

    def ranks() -> list[tuple[str, str]]:
        return sorted(
            (e["CP_REPLICA"], e["CP_REPLICAS"])
            for p in pods()
            if not p.metadata.deletion_timestamp
            for e in [{v.name: v.value for v in p.spec.containers[0].env or []}]
        )

    [zero] = [p for p in pods() if p.metadata.name.endswith("-0")]
    client.CoreV1Api(kube).delete_namespaced_pod(
        zero.metadata.name, zero.metadata.namespace, grace_period_seconds=0
    )
    wait_for(lambda: ranks() == [("1", "2")])
    grown = adapter.execute(
        make_action(Op.RESIZE, workload="ml/elastic", gpus=4, job=gang.job, nodes=nodes,
                    details=False),
        plan_id="p2",
    )  # fmt: skip
    assert grown.job == gang.job
    assert ranks() == [("0", "2"), ("1", "2")]


def test_a_submit_waits_for_evicted_pods_and_refuses_gpus_someone_else_took(
    clean_k8s: Any,
    cluster_doc: dict[str, Any],
    make_action: Helper,
    foreign_pod: Helper,
    pods: Helper,
    wait_for: Helper,
    kube: client.ApiClient,
    kubelet: FakeKubelet,
) -> None:
    adapter = KubernetesAdapter(Cluster.model_validate(cluster_doc), room_timeout=20)
    victim = adapter.execute(
        make_action(workload="bio/low", gpus=8, nodes=["a100-0"]), plan_id="p1"
    )
    wait_for(lambda: [p.status.phase for p in pods()] == ["Running"])
    kubelet.deletion_delay = 2.0  # containers take a while to stop
    try:
        adapter.execute(
            make_action(Op.PREEMPT, workload="bio/low", job=victim.job, nodes=[]), plan_id="p2"
        )
        started = time.monotonic()
        winner = adapter.execute(
            make_action(workload="chem/high", gpus=8, nodes=["a100-0"]), plan_id="p2"
        )
        waited = time.monotonic() - started
    finally:
        kubelet.deletion_delay = 0.0
    assert waited > 1.0, "bound only once the evicted pod had gone"
    wait_for(
        lambda: (
            (s := by_id(adapter)).get(winner.job) is not None
            and s[winner.job].state == JobState.RUNNING
        )
    )
    assert [p.status.phase for p in pods()] == ["Running"], "not rejected by the kubelet"

    foreign_pod("squatter", "a100-1", 6)
    # running: seen through the API server's watch cache (the kubelet watches it too);
    # what slips in before that is for the kubelet to reject (the next test)
    wait_for(
        lambda: (
            client.CoreV1Api(kube).read_namespaced_pod("squatter", "default").status.phase
            == "Running"
        )
    )
    # not to be retried: the same plan would fail the same way (user trial: "plan again
    # (temporary: rerun `cp apply` to continue)", and the rerun failed again)
    with pytest.raises(PermanentError, match=r"node a100-1 has 2 GPUs free .* plan again"):
        adapter.execute(make_action(workload="chem/late", gpus=4, nodes=["a100-1"]), plan_id="p3")
    assert len(pods()) == 1, "nothing created"


def test_a_pod_the_kubelet_rejects_is_a_failed_start(
    adapter: KubernetesAdapter,
    make_action: Helper,
    foreign_pod: Helper,
    wait_for: Helper,
    kube: client.ApiClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API server does not check capacity for nodeName binding; the kubelet does. A pod
    that slipped in between the adapter's room check and its pod's admission (here: the
    check skipped) makes the kubelet reject ours: observed as a start that failed."""
    foreign_pod("sneaky", "h100-0", 4)
    core = client.CoreV1Api(kube)
    wait_for(lambda: core.read_namespaced_pod("sneaky", "default").status.phase == "Running")
    monkeypatch.setattr(adapter.room, "reserve", lambda req: None)
    sub = adapter.execute(
        make_action(workload="chem/x", gpus=4, nodes=["h100-0"], pool="h100"), plan_id="p1"
    )

    def ended() -> Any:
        job = by_id(adapter).get(sub.job)
        return job if job is not None and not job.state.active else None

    job = wait_for(ended)
    assert job.state == JobState.FAILED and job.started_at is None
    assert "OutOfnvidia.com/gpu" in (job.reason or "")


def test_a_shrink_keeps_the_lowest_replicas_where_it_has_a_choice(
    adapter: KubernetesAdapter, make_action: Helper, pods: Helper, wait_for: Helper
) -> None:
    """Two replicas on one node, one to go: replica 1 goes and replica 0 (the rank most
    frameworks coordinate from) stays; it deleted replica 0 (user trial)."""
    gang = adapter.execute(
        make_action(workload="ml/pair", gpus=2, nodes=["a100-1", "a100-1"]), plan_id="p1"
    )
    wait_for(lambda: sorted(p.status.phase for p in pods()) == ["Running", "Running"])
    adapter.execute(
        make_action(
            Op.RESIZE, workload="ml/pair", gpus=2, job=gang.job, nodes=["a100-1"], details=False
        ),
        plan_id="p2",
    )
    name = gang.job.split("/")[1]
    wait_for(lambda: [p.metadata.name for p in pods()] == [f"{name}-0"])


def test_an_object_of_our_name_that_is_not_ours_is_not_taken_for_the_submission(
    adapter: KubernetesAdapter, make_action: Helper, foreign_pod: Helper, kube: client.ApiClient
) -> None:
    """Submission names are deterministic (the workload and the plan id), so a rerun meets
    its own objects: AlreadyExists was read as "already submitted" whoever had made the
    object. Somebody's Job of that name (the plan id is in `cp plan --out`'s file) made the
    apply report the submit done, and the workload sat as a placeholder for a job that was
    not ours (user trial). An object of that name without our identity fails the submit."""
    core, batch = client.CoreV1Api(kube), client.BatchV1Api(kube)
    if not [n for n in core.list_namespace().items if n.metadata.name == "cp-chem"]:
        core.create_namespace({"metadata": {"name": "cp-chem"}})
    job_name = submission_name("chem/md-run", idempotency_key("p1"))
    batch.create_namespaced_job(
        "cp-chem",
        {
            "metadata": {"name": job_name},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox"}],
                    }
                }
            },
        },
    )
    gang_name = submission_name("chem/gang", idempotency_key("p1"))
    foreign_pod(f"{gang_name}-1", "a100-2", 1, namespace="cp-chem")
    with pytest.raises(PermanentError, match="not created by the control plane"):
        adapter.execute(make_action(nodes=["a100-0"]), plan_id="p1")
    with pytest.raises(PermanentError, match="not created by the control plane"):
        adapter.execute(make_action(workload="chem/gang", nodes=["a100-1", "a100-2"]), plan_id="p1")
    theirs = core.read_namespaced_pod(f"{gang_name}-1", "cp-chem")
    assert theirs.metadata.deletion_timestamp is None and not theirs.metadata.labels
    assert not batch.read_namespaced_job(job_name, "cp-chem").metadata.deletion_timestamp
    # a rerun of our own submission is still "already submitted"
    ours = adapter.execute(make_action(workload="chem/other", nodes=["a100-0"]), plan_id="p1")
    again = adapter.execute(make_action(workload="chem/other", nodes=["a100-0"]), plan_id="p1")
    assert ours.job == again.job and "already submitted" in again.message
