"""Spec documents as a user writes them, with keyword defaults (see tests/builders/__init__)."""

from __future__ import annotations

from typing import Any

Doc = dict[str, Any]

GPU_TYPES: Doc = {
    "a100_80": {"memoryGiB": 80, "costPerGpuHour": 3.0},
    "v100": {"memoryGiB": 32, "costPerGpuHour": 1.0},
}


def document(kind: str, name: str, spec: Doc | None = None, **metadata: Any) -> Doc:
    doc: Doc = {
        "apiVersion": "controlplane/v1",
        "kind": kind,
        "metadata": {"name": name, **metadata},
    }
    if spec is not None:
        doc["spec"] = spec
    return doc


def pool(
    name: str = "a100",
    *,
    gpu_type: str = "a100_80",
    gpus_per_node: int = 8,
    nodes: int = 4,
    **extra: Any,
) -> Doc:
    return {
        "name": name,
        "gpuType": gpu_type,
        "gpusPerNode": gpus_per_node,
        "nodes": nodes,
        **extra,
    }


def cluster(
    name: str = "sim",
    *,
    pools: list[Doc] | None = None,
    gpu_types: Doc | None = None,
    adapter: str = "simulator",
    **spec: Any,
) -> Doc:
    """Default pools: 4 nodes of 8 ``a100_80`` and 8 nodes of 4 ``v100``."""
    if pools is None:
        pools = [pool(), pool("v100", gpu_type="v100", gpus_per_node=4, nodes=8)]
    return document(
        "Cluster",
        name,
        {
            "adapter": adapter,
            "gpuTypes": gpu_types if gpu_types is not None else GPU_TYPES,
            "nodePools": pools,
            **spec,
        },
    )


def _quota(gpus: int, weight: float | None, limit: int | None) -> Doc:
    """Only what the test sets, so YAML positions stay predictable."""
    quota: Doc = {"gpus": gpus}
    if weight is not None:
        quota["overQuotaWeight"] = weight
    if limit is not None:
        quota["limit"] = limit
    return quota


def department(
    name: str = "science",
    *,
    gpus: int = 16,
    weight: float | None = None,
    limit: int | None = None,
    parent: str | None = None,
    **spec: Any,
) -> Doc:
    body: Doc = {"quota": _quota(gpus, weight, limit), **spec}
    if parent is not None:
        body["parent"] = parent
    return document("Department", name, body)


def project(
    name: str = "chem",
    *,
    gpus: int = 8,
    weight: float | None = None,
    limit: int | None = None,
    department: str | None = None,
    **spec: Any,
) -> Doc:
    body: Doc = {"quota": _quota(gpus, weight, limit), **spec}
    if department is not None:
        body["department"] = department
    return document("Project", name, body)


def workload(
    name: str = "md-run", project: str = "chem", *, gpus: int = 4, replicas: int = 1, **spec: Any
) -> Doc:
    return document(
        "Workload", name, {"project": project, "gpus": gpus, "replicas": replicas, **spec}
    )


def base_docs() -> list[Doc]:
    """A small valid organisation: cluster rivanna, department science, project chem in it,
    workload chem/md-run of 4 GPUs."""
    return [cluster("rivanna"), department(), project(department="science"), workload()]
