"""Snapshot files (``cp plan --observed``) written as a cluster would report them: every
node of the builders' default cluster ``sim`` (4 x 8 ``a100_80``, 8 x 4 ``v100``), and the
jobs and records a test adds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NOW = "2026-11-22T10:00:00+00:00"


def sim_nodes(
    down: tuple[str, ...] = (), reported: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """``reported``: fields some nodes report otherwise, by name (``{"gpus": 4}``)."""
    nodes = [
        {"name": f"a100-{i:02d}", "pool": "a100", "gpuType": "a100_80", "gpus": 8}
        for i in range(1, 5)
    ] + [
        {"name": f"v100-{i:02d}", "pool": "v100", "gpuType": "v100", "gpus": 4} for i in range(1, 9)
    ]
    for node in nodes:
        node["state"] = "down" if node["name"] in down else "idle"
        node.update((reported or {}).get(node["name"], {}))
    return nodes


def job(
    id: str,
    workload: str | None,
    *replicas: tuple[str | None, int],
    state: str = "RUNNING",
    started: str | None = "2026-11-22T09:00:00+00:00",
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": id,
        "workload": workload,
        "state": state,
        "replicas": [{"node": node, "gpus": gpus} for node, gpus in replicas],
        **extra,
    }
    if started is not None:
        body["startedAt"] = started
    return body


def write_snapshot(
    path: Path,
    jobs: list[dict[str, Any]],
    *,
    now: str = NOW,
    down: tuple[str, ...] = (),
    reported: dict[str, dict[str, Any]] | None = None,
    **records: Any,
) -> Path:
    """One cluster ``sim`` with its nodes and ``jobs``; ``records``: queue, usage, failures…"""
    nodes = sim_nodes(down, reported)
    snap = {"now": now, "clusters": [{"name": "sim", "nodes": nodes, "jobs": jobs}]}
    path.write_text(json.dumps({**snap, **records}, indent=2))
    return path
