"""Builders for spec-loading tests: documents with keyword defaults, written as YAML trees.

Each builder returns a plain document (camelCase keys, as a user writes them); ``spec_tree``
dumps them into files under a temporary directory. ``position`` finds where a piece of text
sits in a written file, so tests assert exact ``file:line:col`` without hand-counting lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

Doc = dict[str, Any]


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
    name: str = "rivanna",
    *,
    pools: list[Doc] | None = None,
    gpu_types: Doc | None = None,
    **spec: Any,
) -> Doc:
    return document(
        "Cluster",
        name,
        {
            "adapter": "simulator",
            "gpuTypes": gpu_types
            if gpu_types is not None
            else {
                "a100_80": {"memoryGiB": 80, "costPerGpuHour": 3.0},
                "v100": {"memoryGiB": 32, "costPerGpuHour": 1.0},
            },
            "nodePools": pools
            if pools is not None
            else [pool(), pool("v100", gpu_type="v100", gpus_per_node=4, nodes=8)],
            **spec,
        },
    )


def department(
    name: str = "science", *, gpus: int = 16, parent: str | None = None, **spec: Any
) -> Doc:
    body: Doc = {"quota": {"gpus": gpus}, **spec}
    if parent is not None:
        body["parent"] = parent
    return document("Department", name, body)


def project(
    name: str = "chem", *, gpus: int = 8, department: str | None = "science", **spec: Any
) -> Doc:
    body: Doc = {"quota": {"gpus": gpus}, **spec}
    if department is not None:
        body["department"] = department
    return document("Project", name, body)


def workload(
    name: str = "md-run", *, project: str = "chem", gpus: int = 4, replicas: int = 1, **spec: Any
) -> Doc:
    return document(
        "Workload", name, {"project": project, "gpus": gpus, "replicas": replicas, **spec}
    )


def dump(*docs: Doc) -> str:
    """Block-style YAML, keys in the order written, one document per ``---``."""
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False)


def base_docs() -> list[Doc]:
    """A small valid organisation: one cluster, one department, one project, one workload."""
    return [cluster(), department(), project(), workload()]


def spec_tree(root: Path, files: dict[str, str | list[Doc]] | None = None) -> Path:
    """Write ``files`` (relative path -> YAML text or documents) under ``root``; by default
    the valid base organisation split over two files."""
    if files is None:
        docs = base_docs()
        files = {
            "cluster.yaml": docs[:1],
            "org/tree.yaml": docs[1:3],
            "workloads/chem.yaml": docs[3:],
        }
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else dump(*content))
    return root


def position(path: Path, needle: str, occurrence: int = 1, *, offset: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the ``occurrence``-th ``needle`` in ``path``, plus ``offset`` columns."""
    text = path.read_text()
    index = -1
    for _ in range(occurrence):
        index = text.index(needle, index + 1)
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, column + offset
