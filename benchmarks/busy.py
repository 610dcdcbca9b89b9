"""A busy org, as a spec repo and an observed snapshot: what a real plan has to reclaim from.

``benchmarks/plan.py --busy`` plans against it. Most GPUs are held by running jobs; some
projects run far beyond their fair share on borrowed GPUs while others sit below their
deserved quota with work waiting; pending work comes in every kind (preemptible training
gangs, elastic jobs, non-preemptible interactive and inference work, GPU-type
constraints) under a three-level hierarchy (divisions > departments > projects).

Shapes, with their sources (shared/traces; the derived numbers are copied here):

- GPU models from the Alibaba openb inventory (openb_node_list_gpu_node.csv), weighted by
  its node counts; node sizes rounded to 4 and 8 GPUs so that 1,000 nodes hold ~7,000
  GPUs (the issue's org);
- project quotas from the SenseTime Helios Venus virtual-cluster sizes (256 ... 8 GPUs),
  cycled and scaled so deserved quotas add up to 85% of the cluster;
- GPUs per job from the Microsoft ITP traces (83% one GPU; 16/32/64 as 8-GPU gangs);
  34% of jobs constrained to one GPU model and 57% non-preemptible (openb gpuspec33 and
  its LS/BE qos split), of which a third are inference.

Deterministic for a seed. Nothing here is timed.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

NOW = datetime(2026, 11, 22, 10, tzinfo=UTC)
# openb GPU models with their share of the inventory's nodes, and the node size used here
MODELS: list[tuple[str, int, float, float]] = [  # (model, GPUs per node, share, memory GiB)
    ("g2", 8, 0.45, 32.0),
    ("g3", 8, 0.05, 32.0),
    ("v100m32", 8, 0.10, 32.0),
    ("v100m16", 8, 0.15, 16.0),
    ("t4", 4, 0.15, 16.0),
    ("p100", 4, 0.05, 16.0),
    ("a10", 4, 0.05, 24.0),
]
COST = {"g2": 2.4, "g3": 3.0, "v100m32": 2.0, "v100m16": 1.5, "t4": 0.5, "p100": 0.9, "a10": 1.1}
HELIOS_VC_GPUS = [256, 160, 88, 88, 80, 72, 64, 64, 48, 40, 32, 32, 24, 16, 8, 8]
ITP_GPU_MIX = {1: 83.17, 2: 2.14, 4: 3.42, 8: 10.11, 16: 0.55, 32: 0.51, 64: 0.10}
CONSTRAINED_SHARE = 0.34
NON_PREEMPTIBLE_SHARE = 0.57
ELASTIC_SHARE = 0.05  # preemptible training that may start small and grow
QUOTA_SHARE = 0.85
BUSY_FILL = 0.92  # share of the GPUs running jobs hold
RUNNING_TILT = 0.55  # running jobs: ITP's mix weighted by GPUs^0.6 (see _shape)


@dataclass
class Org:
    """The generated spec documents and snapshot, and a few facts about them."""

    docs: list[dict[str, Any]] = field(default_factory=list)
    snapshot: dict[str, Any] = field(default_factory=dict)
    gpus: int = 0
    running: int = 0
    pending: int = 0
    held: int = 0


def write_org(org: Org, root: Path, per_file: int = 1000) -> tuple[Path, Path]:
    """The org as a spec repo (``root/specs``, the workloads ``per_file`` to a file) and a
    snapshot file (``root/observed.json``); returns both paths."""
    specs = root / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    org_docs = [d for d in org.docs if d["kind"] != "Workload"]
    workloads = [d for d in org.docs if d["kind"] == "Workload"]
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    (specs / "org.yaml").write_text(yaml.dump_all(org_docs, Dumper=dumper, sort_keys=False))
    for i in range(0, len(workloads), per_file):
        chunk = workloads[i : i + per_file]
        (specs / f"workloads-{i // per_file:04d}.yaml").write_text(
            yaml.dump_all(chunk, Dumper=dumper, sort_keys=False)
        )
    observed = root / "observed.json"
    observed.write_text(json.dumps(org.snapshot))
    return specs, observed


def _doc(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def busy_org(nodes: int, pending: int, projects: int = 40, seed: int = 11) -> Org:
    """A busy org of ``nodes`` nodes, ``projects`` projects and ``pending`` waiting workloads."""
    rng = random.Random(seed)
    org = Org()
    pools, hosts = _inventory(nodes)
    org.gpus = sum(h["gpus"] for h in hosts)
    org.docs.append(
        _doc(
            "Cluster",
            "big",
            {
                "adapter": "simulator",
                "gpuTypes": {
                    m: {"memoryGiB": mem, "costPerGpuHour": COST[m]} for m, _, _, mem in MODELS
                },
                "nodePools": pools,
            },
        )
    )
    names, deserved = _hierarchy(org, projects, rng)
    # who is busy: a third of the projects run far beyond their quota on borrowed GPUs,
    # a third hardly run (below deserved, with the most waiting work), the rest near quota
    appetite = {p: rng.choice([3.0, 3.0, 1.0, 0.15]) for p in names}
    model_of = {p["name"]: p["gpuType"] for p in pools}
    by_pool: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for h in hosts:
        by_pool[h["pool"]].append(h)
    jobs, queue = _running(org, names, deserved, appetite, by_pool, model_of, rng)
    for i in range(pending):
        under = [p for p in names if appetite[p] < 1.0]
        weights = [deserved[p] * (4.0 if p in under else 1.0) for p in names]
        project = rng.choices(names, weights=weights)[0]
        wl = _workload(f"q{i:06d}", project, model_of, rng)
        org.docs.append(wl)
        queue.append(
            {
                "workload": f"{project}/q{i:06d}",
                "since": (NOW - timedelta(seconds=rng.randrange(86_400))).isoformat(),
            }
        )
    org.pending = pending
    org.snapshot = {
        "now": NOW.isoformat(),
        "clusters": [{"name": "big", "nodes": hosts, "jobs": jobs}],
        "queue": queue,
    }
    return org


def _inventory(nodes: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    counts = [max(1, round(nodes * share)) for _, _, share, _ in MODELS]
    counts[0] += nodes - sum(counts)
    pools, hosts = [], []
    for (model, size, _, _), count in zip(MODELS, counts, strict=True):
        pools.append({"name": model, "gpuType": model, "gpusPerNode": size, "nodes": count})
        for i in range(count):
            hosts.append(
                {"name": f"{model}-{i:05d}", "pool": model, "gpuType": model, "gpus": size}
            )
    return pools, hosts


def _hierarchy(org: Org, projects: int, rng: random.Random) -> tuple[list[str], dict[str, int]]:
    """Divisions > departments > projects; quotas add up level by level."""
    scale = QUOTA_SHARE * org.gpus / sum(HELIOS_VC_GPUS[i % 16] for i in range(projects))
    divisions = max(2, projects // 13)
    departments = max(divisions, projects // 5)
    deserved: dict[str, int] = {}
    dept_of: dict[str, str] = {}
    names = []
    for i in range(projects):
        name = f"p{i:03d}"
        names.append(name)
        deserved[name] = max(1, round(HELIOS_VC_GPUS[i % 16] * scale))
        dept_of[name] = f"d{i % departments:02d}"
    dept_total = Counter[str]()
    for p, d in dept_of.items():
        dept_total[d] += deserved[p]
    div_total = Counter[str]()
    for d in sorted(dept_total):
        div_total[f"v{int(d[1:]) % divisions}"] += dept_total[d]
    for v in sorted(div_total):
        spec: dict[str, Any] = {
            "rank": 110 if v == "v0" else 100,
            "quota": {"gpus": div_total[v], "overQuotaWeight": div_total[v]},
        }
        org.docs.append(_doc("Department", v, spec))
    for d in sorted(dept_total):
        spec = {
            "parent": f"v{int(d[1:]) % divisions}",
            "quota": {"gpus": dept_total[d], "overQuotaWeight": dept_total[d]},
        }
        org.docs.append(_doc("Department", d, spec))
    for i, p in enumerate(names):
        quota: dict[str, Any] = {"gpus": deserved[p], "overQuotaWeight": rng.choice([1, 1, 2, 4])}
        if i % 7 == 3:
            quota["limit"] = 3 * deserved[p]
        spec = {"department": dept_of[p], "quota": quota}
        if i % 5 == 1:
            spec["minRuntime"] = "30m"
        org.docs.append(_doc("Project", p, spec))
    return names, deserved


def _shape(rng: random.Random, tilt: float = 0.0) -> tuple[int, int]:
    """GPUs per replica and replicas; ``tilt`` > 0 favours bigger jobs (running work is
    weighted by GPU-hours: big jobs are over-represented among what runs at any time)."""
    weights = [share * gpus**tilt for gpus, share in ITP_GPU_MIX.items()]
    total = rng.choices(list(ITP_GPU_MIX), weights=weights)[0]
    return (8, total // 8) if total > 8 else (total, 1)


def _workload(
    name: str,
    project: str,
    model_of: dict[str, str],
    rng: random.Random,
    *,
    preemptible: bool | None = None,
    tilt: float = 0.0,
) -> dict[str, Any]:
    gpus, replicas = _shape(rng, tilt)
    if preemptible is None:
        preemptible = rng.random() >= NON_PREEMPTIBLE_SHARE
    spec: dict[str, Any] = {
        "project": project,
        "gpus": gpus,
        "walltime": "2d",
        "command": ["python", "run.py"],
    }
    if preemptible:
        spec["type"] = "training"
        spec["priority"] = rng.choice([40, 50, 50, 50, 75])
        if rng.random() < ELASTIC_SHARE and replicas == 1 and gpus <= 4:
            spec["replicas"], spec["minReplicas"] = 4, 1
    else:
        spec["type"] = rng.choice(["interactive", "interactive", "inference"])
    if replicas > 1:
        spec["replicas"] = replicas
    if rng.random() < CONSTRAINED_SHARE:
        fits = sorted({m for m in model_of.values() if _size(m) >= gpus})
        spec["gpuTypes"] = [rng.choice(fits)]
    return _doc("Workload", name, spec)


def _size(model: str) -> int:
    return next(size for m, size, _, _ in MODELS if m == model)


def _running(
    org: Org,
    names: list[str],
    deserved: dict[str, int],
    appetite: dict[str, float],
    by_pool: dict[str, list[dict[str, Any]]],
    model_of: dict[str, str],
    rng: random.Random,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Start jobs first-fit on shuffled nodes until ``BUSY_FILL`` of the GPUs are held."""
    free = {h["name"]: h["gpus"] for hs in by_pool.values() for h in hs}
    held: Counter[str] = Counter()
    np_held: Counter[str] = Counter()
    jobs: list[dict[str, Any]] = []
    misses = used = 0
    weights = [deserved[p] * appetite[p] for p in names]
    while used < BUSY_FILL * org.gpus and misses < 300:
        project = rng.choices(names, weights=weights)[0]
        preemptible = rng.random() >= NON_PREEMPTIBLE_SHARE
        wl = _workload(
            f"r{len(jobs):06d}", project, model_of, rng, preemptible=preemptible, tilt=RUNNING_TILT
        )
        spec = wl["spec"]
        want = spec["gpus"] * spec.get("replicas", 1)
        if not preemptible and np_held[project] + want > deserved[project]:
            spec.update(type="training", priority=50, preemptible=True)
            preemptible = True
        allowed = spec.get("gpuTypes") or sorted(set(model_of.values()))
        pools = [
            p
            for p in sorted(by_pool)
            if model_of[p] in allowed and _size(model_of[p]) >= spec["gpus"]
        ]
        pool = rng.choice(pools)
        hosts = by_pool[pool]
        start = rng.randrange(len(hosts))
        placed: list[str] = []
        for k in range(len(hosts)):
            h = hosts[(start + k) % len(hosts)]["name"]
            if free[h] >= spec["gpus"] and h not in placed:
                placed.append(h)
                if len(placed) == spec.get("replicas", 1):
                    break
        count = spec.get("replicas", 1)
        if len(placed) < spec.get("minReplicas", count):
            misses += 1
            continue
        misses = 0
        for h in placed:
            free[h] -= spec["gpus"]
        org.docs.append(wl)
        age = rng.choice([10, 120, 600, 3000, 20_000])  # minutes: some are younger than minRuntime
        at = (NOW - timedelta(minutes=age + rng.randrange(10))).isoformat()
        jobs.append(
            {
                "id": str(100_000 + len(jobs)),
                "workload": f"{project}/{wl['metadata']['name']}",
                "state": "RUNNING",
                "submittedAt": at,
                "startedAt": at,
                "pool": pool,
                "replicas": [{"node": h, "gpus": spec["gpus"]} for h in placed],
            }
        )
        gpus = spec["gpus"] * len(placed)
        used += gpus
        held[project] += gpus
        if not preemptible:
            np_held[project] += gpus
    org.running = len(jobs)
    org.held = used
    return jobs, []
