"""Load and plan at scale: an empty cluster (cold and warm), or busy orgs stage by stage.

``--busy``: busy orgs (benchmarks/busy.py: most GPUs held, projects over and under their
fair share, work of every kind waiting) planned as ``cp plan --observed`` plans them,
with today's victim search and the new one on the same input, stage by stage, with peak
memory and the plans' evictions and quota tiers (benchmarks/scale.py); ``--growth``
adds a table of the new search over doubling sizes.

Run: .venv/bin/python -m benchmarks.plan --busy [--sizes 1000:5000,4000:20000,10000:50000]
     [--cap 600] [--growth 1000,2000,4000,8000] [--memory]

Without ``--busy``, the first benchmark:

Writes a spec tree (one simulator cluster of 1,000 nodes in 4 pools, 10 departments,
60 projects, 5,000 workloads in 100 files) to a temporary directory, then measures in one
process:

- baseline: parsing every file with ruamel's round-trip loader (what a position-keeping
  loader costs on every run, DESIGN.md "Loading at scale");
- cold: load_specs with an empty cache, then reconcile.plan against an empty cluster;
- warm: load_specs again (content-hash cache hit), then plan again.

Run: .venv/bin/python benchmarks/plan.py [--nodes 1000] [--pending 5000]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml
from ruamel.yaml import YAML

from adapters.simulator import nodes_from_spec
from benchmarks.scale import NEW, TODAY, measure, print_growth, print_size
from controlplane.reconcile import plan
from solvers.policy import Policy
from specs.loader import load_specs
from specs.snapshot import ClusterState, Snapshot

T = TypeVar("T")
NOW = datetime(2026, 11, 22, 10, tzinfo=UTC)
# GPU-count mix of Microsoft ITP jobs (ElasticFlow traces): 1 GPU 83%, 2: 2%, 4: 3.4%, 8: 10%
SIZES = [1] * 83 + [2] * 2 + [4] * 4 + [8] * 11


def write_tree(root: Path, nodes: int, pending: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    per_pool = nodes // 4
    pools: list[dict[str, Any]] = [
        {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": per_pool},
        {"name": "h100", "gpuType": "h100", "gpusPerNode": 8, "nodes": per_pool},
        {"name": "v100", "gpuType": "v100", "gpusPerNode": 8, "nodes": per_pool},
        {"name": "t4", "gpuType": "t4", "gpusPerNode": 4, "nodes": nodes - 3 * per_pool},
    ]
    docs = [
        {
            "apiVersion": "controlplane/v1",
            "kind": "Cluster",
            "metadata": {"name": "big"},
            "spec": {
                "adapter": "simulator",
                "nodePools": pools,
                "gpuTypes": {
                    "a100_80": {"memoryGiB": 80},
                    "h100": {"memoryGiB": 80},
                    "v100": {"memoryGiB": 32},
                    "t4": {"memoryGiB": 16},
                },
            },
        }
    ]
    total = sum(p["gpusPerNode"] * p["nodes"] for p in pools)
    projects = [f"p{i:02d}" for i in range(60)]
    for d in range(10):
        docs.append(
            {
                "apiVersion": "controlplane/v1",
                "kind": "Department",
                "metadata": {"name": f"d{d}"},
                "spec": {"quota": {"gpus": total // 10, "overQuotaWeight": 1}},
            }
        )
    for i, p in enumerate(projects):
        docs.append(
            {
                "apiVersion": "controlplane/v1",
                "kind": "Project",
                "metadata": {"name": p},
                "spec": {
                    "department": f"d{i % 10}",
                    "quota": {"gpus": total // 60, "overQuotaWeight": rng.choice([1, 2, 4])},
                },
            }
        )
    (root / "org.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    per_file = pending // 100
    for f in range(100):
        wl = []
        for i in range(per_file):
            gpus = rng.choice(SIZES)
            spec = {
                "project": rng.choice(projects),
                "gpus": gpus,
                "walltime": "12h",
                "command": ["python", "train.py", f"--seed={i}"],
            }
            if gpus == 8 and rng.random() < 0.3:
                spec["replicas"] = 2
            wl.append(
                {
                    "apiVersion": "controlplane/v1",
                    "kind": "Workload",
                    "metadata": {"name": f"w{f:03d}-{i:04d}"},
                    "spec": spec,
                }
            )
        (root / f"workloads-{f:03d}.yaml").write_text(yaml.safe_dump_all(wl, sort_keys=False))


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pending", type=int, default=5000)
    ap.add_argument("--busy", action="store_true", help="busy orgs, stage by stage")
    ap.add_argument("--sizes", default="1000:5000,4000:20000,10000:50000", help="NODES:PENDING,...")
    ap.add_argument("--cap", type=float, default=600.0, help="time limit for today's search, s")
    ap.add_argument(
        "--growth", default="", help="node counts for the growth table (5 pending a node)"
    )
    ap.add_argument("--memory", action="store_true", help="peak memory per run (forked child)")
    ap.add_argument("--repeat", type=int, default=1, help="plans of the new search, fastest kept")
    ap.add_argument("--no-today", action="store_true", help="skip today's victim search")
    args = ap.parse_args()
    if args.busy:
        busy(args)
        return
    empty(args)


def busy(args: argparse.Namespace) -> None:
    searches = [NEW] if args.no_today else [TODAY, NEW]
    for pair in args.sizes.split(","):
        nodes, pending = (int(x) for x in pair.split(":"))
        print_size(measure(nodes, pending, searches, args.cap, args.memory, args.repeat), args.cap)
    if args.growth:
        sizes = [
            measure(n, 5 * n, [NEW], args.cap, False) for n in map(int, args.growth.split(","))
        ]
        print_growth(sizes)


def empty(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "specs"
        root.mkdir()
        write_tree(root, args.nodes, args.pending)
        files = sorted(root.glob("*.yaml"))

        def roundtrip() -> int:
            y = YAML(typ="rt")
            return sum(1 for f in files for _ in y.load_all(f.read_text()))

        ndocs, t_base = timed(roundtrip)
        cache = Path(tmp) / "cache"
        cold, t_cold = timed(lambda: load_specs(root, cache_dir=cache))
        warm, t_warm = timed(lambda: load_specs(root, cache_dir=cache))
        desired = warm.desired
        c = desired.clusters["big"]
        snap = Snapshot(now=NOW, clusters=[ClusterState(name="big", nodes=nodes_from_spec(c))])
        p1, t_plan1 = timed(lambda: plan(cold.desired, snap, now=NOW))
        p2, t_plan2 = timed(lambda: plan(desired, snap, now=NOW))
        assert p1.actions == p2.actions, "plans are deterministic"
        pk, t_kai = timed(lambda: plan(desired, snap, now=NOW, policy=Policy(engine="kai")))

    nodes = len(snap.clusters[0].nodes)
    print(
        f"spec tree: {ndocs} documents in {len(files)} files; {nodes} nodes, "
        f"{len(desired.workloads)} pending workloads"
    )
    print(
        f"plan: {len(p2.actions)} submits, {len(p2.pending)} waiting; engine {p2.solver.engine} "
        f"{p2.solver.status}, gap {100 * (p2.solver.gap or 0):.3f}% "
        f"(greedy alone: {len(pk.actions)} submits)"
    )
    print()
    print(f"{'step':<34}{'seconds':>9}{'vs baseline':>13}")
    rows = [
        ("baseline: ruamel round-trip parse", t_base),
        ("load, cold (parse+validate+cache)", t_cold),
        ("load, warm (cache hit)", t_warm),
        ("plan, greedy only (--engine kai)", t_kai),
        ("plan (first)", t_plan1),
        ("plan (again)", t_plan2),
        ("load+plan, cold", t_cold + t_plan1),
        ("load+plan, warm", t_warm + t_plan2),
    ]
    for name, t in rows:
        print(f"{name:<34}{t:>9.3f}{t / t_base:>12.2f}x")


if __name__ == "__main__":
    main()
