"""A real Kubernetes API server for the adapter's integration tests, started once per session.

The control plane comes from the project's own scripts (adapters/kubernetes/local/):
etcd, kube-apiserver and kube-controller-manager v1.20 on free loopback ports, built
into the machine's cache on first use. There is no kubelet: the fake one
(adapters/kubernetes/fakekubelet.py) runs in a thread, and the GPU nodes are Node objects
with ``nvidia.com/gpu`` in their status. If the server cannot start, every test that needs
it FAILS with the script's output: a CI run must never turn green by skipping.

Nodes (labelled ``nvidia.com/gpu.product``): ``a100-0..2`` with 8 GPUs (pool a100),
``h100-0..1`` with 4 (pool h100). Each test starts from a cluster without pods or Jobs.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from adapters.kubernetes import KubernetesAdapter
from adapters.kubernetes.fakekubelet import FakeKubelet
from adapters.kubernetes.localcluster import (
    GPU_PRODUCT,
    LocalKubernetes,
    LocalKubernetesError,
    add_gpu_node,
)
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.models import Cluster
from specs.snapshot import Replica

CLUSTER = "k8s"
A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"
NODES = {
    "a100-0": (A100, 8),
    "a100-1": (A100, 8),
    "a100-2": (A100, 8),
    "h100-0": (H100, 4),
    "h100-1": (H100, 4),
}
SYSTEM = ("kube-system", "kube-node-lease")


@pytest.fixture(scope="session")
def local_k8s() -> Iterator[LocalKubernetes]:
    root = Path(tempfile.mkdtemp(prefix="cp-k8s-"))
    cluster = LocalKubernetes(root / "state")
    try:
        cluster.start()
    except LocalKubernetesError as exc:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"the local Kubernetes API server did not start: {exc}", pytrace=False)
    try:
        api = cluster.api_client()
        for name, (product, gpus) in NODES.items():
            add_gpu_node(api, name, gpus=gpus, labels={GPU_PRODUCT: product})
        yield cluster
    finally:
        cluster.stop()
        leftovers = cluster.processes()
        shutil.rmtree(root, ignore_errors=True)
        assert not leftovers, f"processes left behind by the local Kubernetes: {leftovers}"


@pytest.fixture(scope="session")
def kube(local_k8s: LocalKubernetes) -> client.ApiClient:
    """A client of the test's own (not the adapter's connection)."""
    return local_k8s.api_client()


@pytest.fixture(scope="session")
def kubelet(local_k8s: LocalKubernetes) -> Iterator[FakeKubelet]:
    with FakeKubelet(local_k8s.api_client()) as k:
        yield k


def wipe(kube: client.ApiClient, timeout: float = 60.0) -> None:
    """Every pod and Job outside the system namespaces, gone (deleted with grace 0)."""
    core, batch = client.CoreV1Api(kube), client.BatchV1Api(kube)
    for ns in core.list_namespace().items:
        name = ns.metadata.name
        if name in SYSTEM or ns.status.phase == "Terminating":
            continue
        batch.delete_collection_namespaced_job(name, propagation_policy="Background")
        core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    _wait_for(
        lambda: (
            not [
                p
                for p in core.list_pod_for_all_namespaces().items
                if p.metadata.namespace not in SYSTEM
            ]
            and not batch.list_job_for_all_namespaces().items
        ),
        timeout=timeout,
    )


def _wait_for(predicate: Callable[[], Any], *, timeout: float = 20.0, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(every)


@pytest.fixture
def clean_k8s(
    local_k8s: LocalKubernetes, kube: client.ApiClient, kubelet: FakeKubelet
) -> Iterator[LocalKubernetes]:
    """The cluster without pods or Jobs before and after the test, the fake kubelet running."""
    wipe(kube)
    yield local_k8s
    wipe(kube)


def _cluster_doc(kubeconfig: Path, **settings: Any) -> dict[str, Any]:
    """The Cluster spec of the local test cluster: two pools, selected by GPU model."""
    return {
        "apiVersion": "controlplane/v1",
        "kind": "Cluster",
        "metadata": {"name": CLUSTER},
        "spec": {
            "adapter": "kubernetes",
            "kubernetes": {"kubeconfig": str(kubeconfig), "image": "busybox:1.36", **settings},
            "gpuTypes": {"a100_80": {"memoryGiB": 80}, "h100": {"memoryGiB": 80}},
            "nodePools": [
                {
                    "name": "a100",
                    "gpuType": "a100_80",
                    "gpusPerNode": 8,
                    "labels": {GPU_PRODUCT: A100},
                },
                {
                    "name": "h100",
                    "gpuType": "h100",
                    "gpusPerNode": 4,
                    "labels": {GPU_PRODUCT: H100},
                },
            ],
        },
    }


@pytest.fixture
def cluster_doc(clean_k8s: LocalKubernetes) -> dict[str, Any]:
    return _cluster_doc(clean_k8s.kubeconfig)


@pytest.fixture
def adapter(cluster_doc: dict[str, Any]) -> Iterator[KubernetesAdapter]:
    a = KubernetesAdapter(Cluster.model_validate(cluster_doc), room_timeout=20)
    yield a
    a.api.close()


def _make_action(
    op: Op | str = Op.SUBMIT,
    *,
    workload: str = "chem/md-run",
    job: str | None = None,
    nodes: list[str | None] | None = None,
    gpus: int = 1,
    pool: str = "a100",
    command: list[str] | None = None,
    walltime: int | None = 3600,
    checkpoint_signal: str | None = None,
    details: bool = True,
) -> Action:
    """A plan action with keyword defaults: one 1-GPU replica on a100-0."""
    nodes = nodes if nodes is not None else ["a100-0"]
    return Action(
        op=Op(op),
        workload=workload,
        cluster=CLUSTER,
        pool=pool,
        job=job,
        replicas=[Replica(node=n, gpus=gpus) for n in nodes] or None,
        reason=Reason(code=ReasonCode.WITHIN_DESERVED, message="test"),
        submit=SubmitDetails(
            gpu_type="a100_80" if pool == "a100" else "h100",
            gpus_per_replica=gpus,
            walltime=walltime,
            command=command or ["sleep", "600"],
            checkpoint_signal=checkpoint_signal,
            checkpoint_grace=30 if checkpoint_signal else None,
        )
        if details
        else None,
    )


def _foreign_pod(
    kube: client.ApiClient, name: str, node: str, gpus: int, namespace: str = "default", **meta: Any
) -> dict[str, Any]:
    """A GPU pod somebody else made (no identity of ours), bound to ``node``."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }
    client.CoreV1Api(kube).create_namespaced_pod(namespace, body)
    return body


def _pods(kube: client.ApiClient, selector: str = "controlplane.io/managed=true") -> list[Any]:
    return list(client.CoreV1Api(kube).list_pod_for_all_namespaces(label_selector=selector).items)


# Helpers reach the tests as fixtures, not imports (see tests/integration/slurm/conftest.py).


@pytest.fixture
def make_action() -> Callable[..., Action]:
    return _make_action


@pytest.fixture
def foreign_pod(kube: client.ApiClient) -> Callable[..., dict[str, Any]]:
    return lambda *a, **k: _foreign_pod(kube, *a, **k)


@pytest.fixture
def pods(kube: client.ApiClient) -> Callable[..., list[Any]]:
    return lambda selector="controlplane.io/managed=true": _pods(kube, selector)


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    return _wait_for


@pytest.fixture
def make_cluster_doc(clean_k8s: LocalKubernetes) -> Callable[..., dict[str, Any]]:
    def make(**settings: Any) -> dict[str, Any]:
        return _cluster_doc(Path(settings.pop("kubeconfig", clean_k8s.kubeconfig)), **settings)

    return make
