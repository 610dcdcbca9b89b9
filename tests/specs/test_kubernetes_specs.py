"""What a Kubernetes cluster asks of the specs (specs/kubernetes.py), through load_specs.

Each mistake would otherwise surface at apply time as the API server's 400 or 422, or a
pod without an image; here it is one diagnostic at the field, at validate time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specs.diagnostics import Diagnostic, SpecError
from specs.loader import load_specs
from specs.models import KubernetesSettings
from tests.builders import cluster, pool, project, workload
from tests.builders.files import dump

A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
V100 = {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}


def k8s(pools: list[dict[str, Any]] | None = None, **settings: Any) -> dict[str, Any]:
    return cluster(
        "k8s",
        adapter="kubernetes",
        pools=pools
        if pools is not None
        else [pool(labels=A100), pool("v100", gpu_type="v100", gpus_per_node=4, labels=V100)],
        kubernetes={"image": "busybox", **settings},
    )


def load(root: Path, *docs: dict[str, Any]) -> list[Diagnostic]:
    (root / "specs.yaml").write_text(dump(*docs))
    try:
        load_specs(root)
    except SpecError as exc:
        return [d for d in exc.diagnostics if d.severity == "error"]
    return []


def test_a_valid_kubernetes_cluster_and_the_old_settings_still_load(tmp_path: Path) -> None:
    assert load(tmp_path, k8s(), project("chem"), workload("w", "chem", gpus=1)) == []
    old = cluster(
        "old",
        adapter="kubernetes",
        kubernetes={"context": "prod", "namespace": "default"},
        pools=[pool()],
    )
    assert load(tmp_path, old, project("chem"), workload("w", "chem", gpus=1, image="x")) == []
    assert KubernetesSettings().namespace_for("chem") == "cp-chem"
    assert KubernetesSettings(namespace="shared").namespace_for("chem", "own") == "own"


def test_several_pools_each_need_their_own_selector(tmp_path: Path) -> None:
    [found] = load(
        tmp_path,
        k8s([pool(labels=A100), pool("v100", gpu_type="v100", gpus_per_node=4)]),
        project("chem"),
    )
    assert found.field == "spec.nodePools.1"
    assert "node pool 'v100' has no labels" in found.message
    assert "<the product its v100 nodes report>" in found.message  # not an A100 (trial)
    [same] = load(tmp_path, k8s([pool(labels=A100), pool("b", labels=A100)]), project("chem"))
    assert "selects the same nodes as pool 'a100'" in same.message
    [bad] = load(tmp_path, k8s([pool(labels={"gpu": "A100 80GB"})]), project("chem"))
    assert "'gpu: A100 80GB' is not a valid Kubernetes label" in bad.message
    assert load(tmp_path, k8s([pool()]), project("chem")) == [], "one pool may take every GPU node"


def test_derived_namespaces_must_be_valid_names(tmp_path: Path) -> None:
    [found] = load(tmp_path, k8s(), project("chem_lab"))
    assert "namespace 'cp-chem_lab', which is not a valid namespace name" in found.message
    assert "set this project's spec.namespace" in found.message
    assert load(tmp_path, k8s(), project("chem_lab", namespace="chem-lab")) == []
    assert load(tmp_path, k8s(namespace="gpu-jobs"), project("chem_lab")) == [], "shared namespace"
    [bad] = load(tmp_path, k8s(), project("chem", namespace="Chem"))
    assert bad.field == "spec.namespace"
    # the rule it gives is a namespace's: it listed '_' and '.', then refused them (trial)
    [dotted] = load(tmp_path, k8s(), project("chem", namespace="team.ns"))
    assert dotted.message == (
        "'team.ns' is not a valid namespace: use 1-63 lowercase letters, digits or '-', "
        "starting and ending with a letter or digit"
    ), dotted.message


def test_a_workload_that_may_run_on_kubernetes_needs_an_image(tmp_path: Path) -> None:
    base = [cluster("hpc"), k8s(image=None), project("chem")]
    [found] = load(tmp_path, *base, workload("w", "chem", gpus=1))
    assert (
        found.field == "spec"
        and "Kubernetes cluster 'k8s', which needs a container image" in found.message
    )
    assert load(tmp_path, *base, workload("w", "chem", gpus=1, image="pytorch:2")) == []
    assert load(tmp_path, *base, workload("w", "chem", gpus=1, clusters=["hpc"])) == []


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"gpuResource": "nvidia gpu"}, "gpuResource"),
        ({"namespacePrefix": "CP-"}, "namespacePrefix"),
    ],
)
def test_settings_are_checked(tmp_path: Path, settings: dict[str, str], field: str) -> None:
    [found] = load(tmp_path, k8s(**settings), project("chem"))
    assert found.field is not None and found.field.endswith(field)


def test_settings_that_would_never_be_read_are_refused(tmp_path: Path) -> None:
    """A user trial wrote a ``slurm:`` block on a Kubernetes cluster, and both a shared
    namespace and a prefix; validate took both, and one of each was silently ignored."""
    slurm = {**k8s(), "spec": {**k8s()["spec"], "slurm": {"account": "chem"}}}
    [found] = load(tmp_path, slurm, project("chem"))
    assert found.field == "spec.slurm"
    assert "adapter is kubernetes" in found.message and "never read" in found.message
    kube = cluster("hpc", adapter="slurm", kubernetes={"context": "prod"})
    [found] = load(tmp_path, kube, project("chem"))
    assert found.field == "spec.kubernetes" and "adapter is slurm" in found.message
    [both] = load(tmp_path, k8s(namespace="gpu-jobs", namespacePrefix="team-"), project("chem"))
    assert both.field == "spec.kubernetes.namespacePrefix"
    assert "namespace 'gpu-jobs' holds every project" in both.message
    assert load(tmp_path, k8s(namespacePrefix="team-"), project("chem")) == []


def test_a_namespace_of_kubernetes_itself_is_warned_of(tmp_path: Path) -> None:
    """A project (or the cluster's shared namespace) set to kube-system put its pods
    beside the cluster's own components, under their quotas and policies, and its
    cleanup there (user trial): validate says so, and it is only a warning."""
    (tmp_path / "specs.yaml").write_text(
        dump(k8s(), project("chem", namespace="kube-system"), project("bio"))
    )
    [warned] = load_specs(tmp_path).warnings
    assert warned.severity == "warning" and warned.field == "spec.namespace"
    assert "namespace 'kube-system' on Kubernetes cluster 'k8s'" in warned.message
    assert "Kubernetes' own" in warned.message
    (tmp_path / "specs.yaml").write_text(dump(k8s(namespace="kube-public"), project("bio")))
    [shared] = load_specs(tmp_path).warnings
    assert shared.field == "spec.kubernetes.namespace"
    assert "namespace 'kube-public'" in shared.message
    (tmp_path / "specs.yaml").write_text(dump(k8s(), project("chem", namespace="chem-ns")))
    assert load_specs(tmp_path).warnings == []
    # said once, whatever the number of Kubernetes clusters (review)
    other = {**k8s(), "metadata": {"name": "k8s-b"}}
    (tmp_path / "specs.yaml").write_text(
        dump(k8s(), other, project("chem", namespace="kube-system"))
    )
    [once] = load_specs(tmp_path).warnings
    assert "on Kubernetes clusters 'k8s', 'k8s-b'" in once.message, once.message
    # one derived from the prefix, too (trialS)
    (tmp_path / "specs.yaml").write_text(dump(k8s(namespacePrefix="kube-"), project("system")))
    [derived] = load_specs(tmp_path).warnings
    assert derived.field == "metadata.name" and "namespace 'kube-system'" in derived.message


def test_a_project_whose_work_runs_elsewhere_is_not_told_of_its_namespace(tmp_path: Path) -> None:
    """Every workload of the project runs on other clusters (spec.clusters): the namespace
    its name would give on the Kubernetes cluster is never made, so neither the warning of
    a system namespace nor the error of an invalid name is said. A project without
    workloads yet, or with one that may run there, still is."""
    hpc = cluster("hpc")
    pinned = workload("w", "chem_lab", gpus=1, clusters=["hpc"])
    assert load(tmp_path, hpc, k8s(), project("chem_lab"), pinned) == []
    anywhere = workload("v", "chem_lab", gpus=1)
    [found] = load(tmp_path, hpc, k8s(), project("chem_lab"), pinned, anywhere)
    assert "namespace 'cp-chem_lab', which is not a valid namespace name" in found.message
    (tmp_path / "specs.yaml").write_text(
        dump(
            hpc,
            k8s(),
            project("chem", namespace="kube-system"),
            workload("w", "chem", gpus=1, clusters=["hpc"]),
        )
    )
    assert load_specs(tmp_path).warnings == []
