"""Test builders with keyword defaults: spec documents, desired states, snapshots."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from specs.desired import DesiredState
from specs.models import KINDS, Workload

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def cluster(name: str = "sim", pools: list[dict[str, Any]] | None = None,
            adapter_override: str = "simulator", **spec: Any) -> dict[str, Any]:
    pools = pools or [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]
    gpu_types = spec.pop("gpuTypes", {"a100_80": {"memoryGiB": 80, "costPerGpuHour": 3},
                                      "v100": {"memoryGiB": 32, "costPerGpuHour": 1}})
    return doc("Cluster", name, adapter=adapter_override, gpuTypes=gpu_types, nodePools=pools, **spec)


def project(name: str, gpus: int = 0, weight: float = 1, limit: int | None = None,
            department: str | None = None, **spec: Any) -> dict[str, Any]:
    return doc("Project", name, department=department,
               quota={"gpus": gpus, "overQuotaWeight": weight, "limit": limit}, **spec)


def department(name: str, gpus: int = 0, weight: float = 1, limit: int | None = None,
               **spec: Any) -> dict[str, Any]:
    return doc("Department", name, quota={"gpus": gpus, "overQuotaWeight": weight, "limit": limit}, **spec)


def workload(name: str, project: str, gpus: int = 1, **spec: Any) -> dict[str, Any]:
    return doc("Workload", name, project=project, gpus=gpus, **spec)


def desired(docs: list[dict[str, Any]], digest: str = "test") -> DesiredState:
    """Validated models straight from documents (the loader has its own tests)."""
    by_kind: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
    for d in docs:
        model = KINDS[d["kind"]].model_validate(d)
        key = model.key if isinstance(model, Workload) else model.metadata.name
        by_kind[d["kind"]][key] = model
    return DesiredState(clusters=by_kind["Cluster"], departments=by_kind["Department"],
                        projects=by_kind["Project"], workloads=by_kind["Workload"], digest=digest)
