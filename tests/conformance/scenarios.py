"""KAI-Scheduler conformance scenarios turned into spec documents and observed snapshots.

The scenario facts (tests/conformance/kai-scenarios.json) come from KAI-Scheduler's test
suite; the semantics are spelled out in tests/conformance/README.md. A scenario becomes:
one simulator Cluster, a Department per KAI department, a Project per KAI queue, a
Workload per KAI job, and a snapshot holding the nodes, the running jobs and the queue
entry time of every pending job (one minute apart in KAI's creation order).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
CLUSTER = "kai"
POOL = "gpu"


def load_scenarios() -> list[dict[str, Any]]:
    scenarios: list[dict[str, Any]] = json.loads((HERE / "kai-scenarios.json").read_text())
    return scenarios


def _doc(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def _quota(deserved: int, weight: float, limit: int | None) -> dict[str, Any]:
    # KAI: a limit of 0 means "no limit"
    return {"gpus": deserved, "overQuotaWeight": weight, "limit": limit or None}


def spec_documents(sc: dict[str, Any]) -> list[dict[str, Any]]:
    # With --observed the snapshot's nodes are the whole truth; the pool's size only feeds
    # validation, which rejects a workload no pool could ever hold. KAI's kai-34 asks for
    # exactly that shape (a 4-GPU task on 2-GPU nodes), so the pool admits the largest task.
    biggest = max([n["gpus"] for n in sc["nodes"]] + [j["gpus_per_task"] for j in sc["jobs"]])
    docs = [
        _doc(
            "Cluster",
            CLUSTER,
            {
                "adapter": "simulator",
                "gpuTypes": {"gpu": {"memoryGiB": 80}},
                "nodePools": [{"name": POOL, "gpuType": "gpu", "gpusPerNode": biggest, "nodes": 0}],
            },
        )
    ]
    for d in sc.get("departments") or []:
        docs.append(
            _doc(
                "Department",
                d["name"],
                {
                    "rank": 100,
                    "quota": _quota(d["deserved_gpus"], d["over_quota_weight"], d["limit_gpus"]),
                },
            )
        )
    for q in sc["queues"]:
        docs.append(
            _doc(
                "Project",
                q["name"],
                {
                    "department": q["parent"],
                    "rank": q["priority"],
                    "quota": _quota(q["deserved_gpus"], q["over_quota_weight"], q["limit_gpus"]),
                },
            )
        )
    for j in sc["jobs"]:
        docs.append(
            _doc(
                "Workload",
                j["name"],
                {
                    "project": j["queue"],
                    "type": "training",
                    "priority": j["priority"],
                    "preemptible": j["preemptible"],
                    "replicas": j["tasks"],
                    "minReplicas": j["min_available"],
                    "gpus": j["gpus_per_task"],
                },
            )
        )
    return docs


def snapshot(sc: dict[str, Any]) -> dict[str, Any]:
    def created(job: dict[str, Any]) -> str:
        return (NOW - timedelta(hours=1) + timedelta(minutes=job["creation_rank"])).isoformat()

    jobs, queue = [], []
    for j in sc["jobs"]:
        key = f"{j['queue']}/{j['name']}"
        if j["state"] in ("running", "mixed"):
            # a "mixed" gang (some tasks running, some pending) is a RUNNING job whose replica
            # list is shorter than the workload's replicas: the missing ones still wait
            placed = [n for n in j["nodes"] if n is not None]
            jobs.append(
                {
                    "id": f"job-{j['name']}",
                    "workload": key,
                    "state": "RUNNING",
                    "submittedAt": created(j),
                    "startedAt": created(j),
                    "pool": POOL,
                    "replicas": [{"node": n, "gpus": j["gpus_per_task"]} for n in placed],
                }
            )
        else:
            queue.append({"workload": key, "since": created(j)})
    nodes = [
        {"name": n["name"], "pool": POOL, "gpuType": "gpu", "gpus": n["gpus"]} for n in sc["nodes"]
    ]
    return {
        "now": NOW.isoformat(),
        "clusters": [{"name": CLUSTER, "nodes": nodes, "jobs": jobs}],
        "queue": queue,
    }


def final_placement(snap: dict[str, Any]) -> dict[str, list[str | None]]:
    """Job name -> nodes of its replicas, for every job holding GPUs."""
    out = {}
    for c in snap["clusters"]:
        for j in c["jobs"]:
            if j["state"] in ("RUNNING", "COMPLETING", "SUSPENDED") and j["workload"]:
                out[j["workload"].split("/", 1)[1]] = sorted(r["node"] for r in j["replicas"])
    return out
