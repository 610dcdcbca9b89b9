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
from controlplane.apply import apply_plan
from controlplane.plan import Plan, SolverReport
from controlplane.store import Store
from specs.actions import Op
from specs.models import Cluster
from tests.builders import NOW

pytestmark = pytest.mark.k8s
Helper = Callable[..., Any]
RBAC = Path(__file__).resolve().parents[3] / "examples" / "kubernetes" / "rbac.yaml"


def create_from_yaml(kube: client.ApiClient, path: Path) -> None:
    try:
        utils.create_from_yaml(kube, str(path))
    except utils.FailToCreateError as exc:  # a rerun in the same session: already there
        assert all(e.status == 409 for e in exc.api_exceptions), exc


def service_account_kubeconfig(
    kube: client.ApiClient, admin: Path, out: Path, wait_for: Helper, name: str = "controlplane"
) -> Path:
    core = client.CoreV1Api(kube)
    sa = wait_for(
        lambda: (
            (s := core.read_namespaced_service_account(name, "controlplane-system")).secrets and s
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
    create_from_yaml(kube, RBAC)
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


# examples/kubernetes/rbac.yaml's narrower way: reads everywhere, writes only in the
# namespaces an admin made and bound (here cp-vision; cp-newteam exists without a Role)
def account(name: str, rules: str) -> str:
    """A service account of ``controlplane-system`` with the cluster-wide ``rules``."""
    return f"""
apiVersion: v1
kind: Namespace
metadata: {{name: controlplane-system}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: {name}, namespace: controlplane-system}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {name}}}
rules:
{rules}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {name}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {name}}}
subjects: [{{kind: ServiceAccount, name: {name}, namespace: controlplane-system}}]
"""


NARROW = (
    account(
        "narrow",
        """  - {apiGroups: [""], resources: [nodes, pods, namespaces], verbs: [get, list, watch]}
  - {apiGroups: [batch], resources: [jobs], verbs: [get, list, watch]}""",
    )
    + """---
apiVersion: v1
kind: Namespace
metadata: {name: cp-newteam}
---
apiVersion: v1
kind: Namespace
metadata: {name: cp-vision}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: narrow-write, namespace: cp-vision}
rules:
  - {apiGroups: [""], resources: [pods], verbs: [create, delete]}
  - {apiGroups: [batch], resources: [jobs], verbs: [create, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: narrow-write, namespace: cp-vision}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: narrow-write}
subjects: [{kind: ServiceAccount, name: narrow, namespace: controlplane-system}]
"""
)


def test_an_apply_it_may_not_finish_evicts_nothing(evicting: Evicting) -> None:
    """A project whose namespace has no Role yet (a pull request merged before the admin
    made it): apply deleted the victim, then the beneficiary's submit failed 403, and every
    later apply did the same (user trial). Now the rights every action needs are asked for
    first (SelfSubjectAccessReview): nothing is done on the cluster, and the error names
    what is missing."""
    failed = evicting.refused(NARROW, "narrow", "newteam/train")
    assert "create" in failed.message and "cp-newteam" in failed.message, failed.message
    evicting.adapter.preflight([evicting.plan.actions[0]])  # the preemption alone: no error


class Evicting:
    """``vision/big`` runs (made with the admin's rights); as a service account of the
    rights an RBAC document gives, a plan preempts it for a submit of another project."""

    def __init__(self, k8s: LocalKubernetes, kube: client.ApiClient, *helpers: Any) -> None:
        self.k8s, self.kube = k8s, kube
        self.cluster_doc, self.action, self.pods, self.tmp, self.wait_for = helpers

    def refused(self, rbac: str, account: str, newcomer: str) -> Any:
        """Apply the plan as ``account``: the failed outcome, once checked that the apply
        did nothing on the cluster (the preemption never ran)."""
        (self.tmp / f"{account}.yaml").write_text(rbac)
        create_from_yaml(self.kube, self.tmp / f"{account}.yaml")
        admin = KubernetesAdapter(Cluster.model_validate(self.cluster_doc()))
        big = admin.execute(self.action(workload="vision/big", nodes=["a100-0"]), plan_id="p0")
        self.wait_for(lambda: len(self.pods("controlplane.io/project=vision")) == 1)
        config = self.tmp / f"{account}.kubeconfig"
        kubeconfig = service_account_kubeconfig(
            self.kube, self.k8s.kubeconfig, config, self.wait_for, name=account
        )
        doc = self.cluster_doc(kubeconfig=str(kubeconfig))
        self.adapter = KubernetesAdapter(Cluster.model_validate(doc))
        self.plan = Plan(
            id=f"rbac-{account}",
            created_at=NOW,
            spec_digest="s",
            observed_digest="o",
            solver=SolverReport(engine="test", status="OK"),
            actions=[
                self.action(Op.PREEMPT, workload="vision/big", job=big.job, nodes=[]),
                self.action(workload=newcomer, nodes=["a100-0"]),
            ],
        )
        with Store(f"sqlite:///{self.tmp / 'cp.db'}") as store:
            report = apply_plan(self.plan, {"k8s": self.adapter}, store, observed=None)
        [failed] = [o for o in report.outcomes if o.status == "failed"]
        assert "nothing was done on cluster k8s" in failed.message, failed.message
        assert [o.status for o in report.outcomes] == ["failed"]  # the preemption never ran
        assert len(self.pods("controlplane.io/project=vision")) == 1
        return failed


@pytest.fixture
def evicting(
    clean_k8s: LocalKubernetes,
    kube: client.ApiClient,
    make_cluster_doc: Helper,
    make_action: Helper,
    pods: Helper,
    tmp_path: Path,
    wait_for: Helper,
) -> Evicting:
    return Evicting(clean_k8s, kube, make_cluster_doc, make_action, pods, tmp_path, wait_for)


WIDE = account(
    "wide",
    """  - {apiGroups: [""], resources: [nodes, namespaces], verbs: [get, list, watch]}
  - {apiGroups: [""], resources: [pods], verbs: [get, list, watch, create, delete]}
  - {apiGroups: [batch], resources: [jobs], verbs: [get, list, watch, create, delete]}""",
)


def test_a_namespace_it_may_not_create_evicts_nothing(
    evicting: Evicting, kube: client.ApiClient
) -> None:
    """Rights to create pods and jobs everywhere, but not namespaces: a new project's
    namespace did not exist, the check asked only about pods and jobs, and the apply
    evicted the victim before the submit failed on "create namespace cp-…: forbidden"
    (trialQ). The missing namespace's create is asked for too."""
    namespaces = client.CoreV1Api(kube).list_namespace(field_selector="metadata.name=cp-opsteam")
    assert namespaces.items == []
    failed = evicting.refused(WIDE, "wide", "opsteam/train")
    assert "create namespaces" in failed.message and "cp-opsteam" in failed.message, failed.message
