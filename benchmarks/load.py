"""Spec loading at scale (DESIGN "Loading at scale"): ruamel round-trip vs our cold and warm loads.

Generates a large organisation's spec repo (1 cluster with several pools, ~10 departments,
~60 projects, ~7,000 workloads over ~100 files) in a temporary directory, then times in
this one process:

  (a) baseline: ruamel.yaml's round-trip loader over every file — the position-keeping
      parse a naive loader would pay on every plan;
  (b) cold load_specs: compose with libyaml, validate, cross-check, fill the cache;
  (c) warm load_specs: the same repo again, every file served from the cache;

and prints each time with its ratio to the baseline. PyYAML's C loader (parse only, no
positions, no validation) is printed for reference.

Run: .venv/bin/python benchmarks/load.py [--workloads 7000] [--files 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from ruamel.yaml import YAML

from specs.loader import load_specs

_CLUSTER = """\
# The one cluster: pools of different GPU generations.
apiVersion: controlplane/v1
kind: Cluster
metadata: {name: rivanna}
spec:
  adapter: slurm
  slurm: {account: research}
  gpuTypes:
    a100_80: {memoryGiB: 80, costPerGpuHour: 508.89}
    a100_40: {memoryGiB: 40, costPerGpuHour: 300}
    v100: {memoryGiB: 32, costPerGpuHour: 20.96}
    h100: {memoryGiB: 80, costPerGpuHour: 900}
  nodePools:
    - {name: a100-80, gpuType: a100_80, gpusPerNode: 8, nodes: 20, partition: gpu-a100, maxWalltime: 3d}
    - {name: a100-40, gpuType: a100_40, gpusPerNode: 8, nodes: 20, partition: gpu-a100}
    - {name: v100, gpuType: v100, gpusPerNode: 4, nodes: 40, partition: gpu-v100, maxWalltime: 7d}
    - name: h100
      gpuType: h100
      gpusPerNode: 8
      nodes: 10
      partition: gpu-h100
      labels: {interconnect: infiniband}
"""


def generate(
    root: Path,
    *,
    workloads: int,
    files: int,
    departments: int = 10,
    projects: int = 60,
    seed: int = 7,
) -> int:
    """Write the spec repo; return the number of documents."""
    rng = random.Random(seed)
    (root / "clusters").mkdir(parents=True)
    (root / "clusters" / "rivanna.yaml").write_text(_CLUSTER)
    org = []
    for d in range(departments):
        org.append(
            f"apiVersion: controlplane/v1\nkind: Department\nmetadata: {{name: dept-{d}}}\n"
            f"spec: {{rank: {100 + d}, quota: {{gpus: 64, overQuotaWeight: 2}}}}\n"
        )
    for p in range(projects):
        org.append(
            "apiVersion: controlplane/v1\nkind: Project\nmetadata:\n"
            f"  name: proj-{p}\n  labels: {{owner: team-{p}}}\nspec:\n"
            f"  department: dept-{p % departments}\n"
            f"  quota: {{gpus: {rng.choice([4, 8])}, overQuotaWeight: 1, limit: 64}}\n"
            "  fairshare: {halfLife: 14d, k: 1.0}\n  maxWalltime: 7d\n  minRuntime: 30m\n"
        )
    (root / "org.yaml").write_text("---\n".join(org))
    per_file = -(-workloads // files)
    written = 0
    for f in range(files):
        docs = []
        for _ in range(min(per_file, workloads - written)):
            p = rng.randrange(projects)
            kind = rng.random()
            if kind < 0.85:
                docs.append(
                    f"apiVersion: controlplane/v1\nkind: Workload\nmetadata:\n  name: train-{written}\n"
                    f"  labels: {{experiment: exp-{rng.randrange(500)}}}\nspec:\n  project: proj-{p}\n"
                    f"  type: training\n  replicas: {rng.choice([1, 2, 4])}\n  gpus: {rng.choice([1, 2, 4, 8])}\n"
                    f"  gpuTypes: [a100_80, a100_40, h100]\n  minGpuMemoryGiB: 40\n  walltime: 2h59m\n"
                    f"  command: [python, train.py, --seed, '{written}']\n"
                    "  checkpoint: {signal: USR1, grace: 10m, total: 24h}\n"
                    "  strategy: {fanOut: true, maxParallel: 2}\n"
                )
            else:
                docs.append(
                    f"apiVersion: controlplane/v1\nkind: Workload\nmetadata: {{name: nb-{written}}}\n"
                    f"spec: {{project: proj-{p}, type: interactive, preemptible: true, gpus: 1, "
                    f"walltime: '1-00:00:00', clusters: [rivanna]}}\n"
                )
            written += 1
        folder = root / "workloads" / f"team-{f % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"batch-{f:03d}.yaml").write_text("---\n".join(docs))
    return 1 + departments + projects + written


def timed(action: Callable[[], object], repeat: int = 1) -> float:
    """Best wall time of ``repeat`` runs (the least disturbed by the machine's other work)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", type=int, default=7000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of the cold and warm loads (best is shown)"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "specs"
        documents = generate(root, workloads=args.workloads, files=args.files)
        paths = sorted(root.rglob("*.yaml"))
        size = sum(p.stat().st_size for p in paths)
        print(f"spec repo: {documents} documents in {len(paths)} files, {size / 1e6:.1f} MB")

        round_trip = YAML(typ="rt")

        def ruamel_all() -> None:
            for path in paths:
                list(round_trip.load_all(path.read_text()))

        def pyyaml_all() -> None:
            for path in paths:
                list(
                    yaml.load_all(
                        path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
                    )
                )

        caches = iter(range(args.repeat + 1))

        def cold() -> None:
            load_specs(root, cache_dir=Path(folder) / f"cold-{next(caches)}")

        warm_cache = Path(folder) / "warm"
        load_specs(root, cache_dir=warm_cache)  # fill

        baseline = timed(ruamel_all)
        rows = [
            ("(a) ruamel round-trip parse (baseline)", baseline),
            ("    PyYAML C loader, parse only", timed(pyyaml_all, args.repeat)),
            ("(b) cold load_specs (parse+validate+cache)", timed(cold, args.repeat)),
            ("    load_specs without a cache", timed(lambda: load_specs(root), args.repeat)),
            (
                "(c) warm load_specs (cache hits)",
                timed(lambda: load_specs(root, cache_dir=warm_cache), args.repeat),
            ),
        ]
        for label, seconds in rows:
            ratio = (
                "baseline" if seconds is baseline else f"{baseline / seconds:.1f}x faster than (a)"
            )
            print(
                f"{label:<45} {seconds:8.3f} s  {seconds / documents * 1e3:7.3f} ms/doc   {ratio}"
            )
        print(f"warm vs cold: {rows[2][1] / rows[4][1]:.1f}x faster")


if __name__ == "__main__":
    main()
