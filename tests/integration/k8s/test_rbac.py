"""examples/kubernetes/rbac.yaml is enough for the adapter, and no more than it needs.

The local API server authorizes with RBAC; the test's own admin token is in
system:masters, so the adapter runs here as the example's service account instead, with
the token the controller manager issues for it.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, utils

from adapters.kubernetes import KubernetesAdapter
from adapters.kubernetes.localcluster import LocalKubernetes
from specs.actions import Op
from specs.models import Cluster

pytestmark = pytest.mark.k8s
Helper = Callable[..., Any]
RBAC = Path(__file__).resolve().parents[3] / "examples" / "kubernetes" / "rbac.yaml"


def service_account_kubeconfig(
    kube: client.ApiClient, admin: Path, out: Path, wait_for: Helper
) -> Path:
    core = client.CoreV1Api(kube)
    sa = wait_for(
        lambda: (
            (
                s := core.read_namespaced_service_account("controlplane", "controlplane-system")
            ).secrets
            and s
        )
    )
    secret = core.read_namespaced_secret(sa.secrets[0].name, "controlplane-system")
    token = base64.b64decode(secret.data["token"]).decode()
    config = yaml.safe_load(admin.read_text())
    config["users"] = [{"name": "controlplane", "user": {"token": token}}]
    config["contexts"] = [{"name": "sa", "context": {"cluster": "local", "user": "controlplane"}}]
    config["current-context"] = "sa"
    out.write_text(yaml.safe_dump(config))
    return out


def test_the_example_role_lets_the_adapter_do_its_work(
    clean_k8s: LocalKubernetes,
    kube: client.ApiClient,
    make_cluster_doc: Helper,
    make_action: Helper,
    pods: Helper,
    tmp_path: Path,
    wait_for: Helper,
) -> None:
    try:
        utils.create_from_yaml(kube, str(RBAC))
    except utils.FailToCreateError as exc:  # a rerun in the same session: already there
        assert all(e.status == 409 for e in exc.api_exceptions), exc
    kubeconfig = service_account_kubeconfig(
        kube, clean_k8s.kubeconfig, tmp_path / "sa.kubeconfig", wait_for
    )
    adapter = KubernetesAdapter(
        Cluster.model_validate(make_cluster_doc(kubeconfig=str(kubeconfig)))
    )

    assert {n.name for n in adapter.observe().nodes} >= {"a100-0", "h100-0"}
    one = adapter.execute(make_action(workload="rbac/one", nodes=["a100-0"]), plan_id="p1")
    gang = adapter.execute(
        make_action(workload="rbac/gang", nodes=["a100-1", "a100-2"]), plan_id="p1"
    )
    wait_for(lambda: len(pods("controlplane.io/project=rbac")) == 3)
    assert {j.workload for j in adapter.observe().jobs} == {"rbac/one", "rbac/gang"}
    adapter.execute(
        make_action(Op.CANCEL, workload="rbac/one", job=one.job, nodes=[]), plan_id="p2"
    )
    adapter.execute(
        make_action(Op.PREEMPT, workload="rbac/gang", job=gang.job, nodes=[]), plan_id="p2"
    )
    wait_for(lambda: not pods("controlplane.io/project=rbac"))

    # and nothing beyond it: the service account cannot touch nodes or secrets
    sa = client.CoreV1Api(adapter.api._api())
    with pytest.raises(client.ApiException) as denied:
        sa.delete_node("a100-0")
    assert denied.value.status == 403
    with pytest.raises(client.ApiException) as denied:
        sa.list_namespaced_secret("controlplane-system")
    assert denied.value.status == 403
