"""How much the Slurm adapter costs per submission, against raw ``sbatch --wrap`` calls.

Starts (or reuses) the local test cluster from adapters/slurm/local/, then:

1. applies N submit actions through ``SlurmAdapter.execute`` (1-GPU jobs spread over
   the gpu-a100 and gpu-v100 partitions; most of them pend, which is fine),
2. times one ``observe()`` with all of them in the queue,
3. runs N plain ``sbatch --parsable --wrap`` calls with the same partitions and GRES,
   in this process, as the baseline,

prints total seconds, ms per submission and the ratio, and cancels every job. What the
adapter adds per submission: the idempotency lookup (one ``squeue`` over the whole
queue — it grows with the queue), writing the job script, and parsing.

Run: ``.venv/bin/python benchmarks/slurm_submit.py [-n 1000] [--keep] [--reuse]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from adapters.slurm import SlurmAdapter
from adapters.slurm.localcluster import LocalSlurm
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.models import Cluster
from specs.snapshot import Replica

PARTITIONS = [("a100", "gpu-a100", "a100_80"), ("v100", "gpu-v100", "v100")]


def cluster_spec() -> Cluster:
    return Cluster.model_validate(
        {
            "apiVersion": "controlplane/v1",
            "kind": "Cluster",
            "metadata": {"name": "bench"},
            "spec": {
                "adapter": "slurm",
                "gpuTypes": {"a100_80": {"memoryGiB": 80}, "v100": {"memoryGiB": 32}},
                "nodePools": [
                    {"name": p, "gpuType": t, "gpusPerNode": 8, "partition": part}
                    for p, part, t in PARTITIONS
                ],
            },
        }
    )


def submit_action(i: int) -> Action:
    pool, partition, gpu_type = PARTITIONS[i % len(PARTITIONS)]
    return Action(
        op=Op.SUBMIT,
        workload=f"bench/w-{i:05d}",
        cluster="bench",
        pool=pool,
        replicas=[Replica(node=None, gpus=1)],
        reason=Reason(code=ReasonCode.WITHIN_DESERVED, message="benchmark"),
        submit=SubmitDetails(
            gpu_type=gpu_type, gpus_per_replica=1, partition=partition, walltime=600
        ),
    )


def cancel_all() -> None:
    ids = subprocess.run(
        ["squeue", "-h", "-o", "%i"], check=True, capture_output=True, text=True
    ).stdout.split()
    for start in range(0, len(ids), 500):
        subprocess.run(["scancel", *ids[start : start + 500]], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="submissions per phase")
    parser.add_argument("--state-dir", type=Path, default=Path("/tmp/cp-slurm-bench"))
    parser.add_argument("--port-base", type=int, default=26917)
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    parser.add_argument(
        "--reuse", action="store_true", help="keep a running cluster and its remembered jobs"
    )
    args = parser.parse_args()

    cluster = LocalSlurm(args.state_dir, port_base=args.port_base)
    t0 = time.perf_counter()
    # fresh by default: jobs slurmctld still remembers (MinJobAge) would slow every squeue
    os.environ |= cluster.start(fresh=not args.reuse)
    print(f"cluster ready in {time.perf_counter() - t0:.1f}s ({args.state_dir})")
    cancel_all()
    try:
        with tempfile.TemporaryDirectory(prefix="cp-bench-") as work:
            adapter = SlurmAdapter(cluster_spec(), work_dir=Path(work))

            t0 = time.perf_counter()
            for i in range(args.n):
                adapter.execute(submit_action(i), plan_id="bench-plan")
            adapter_s = time.perf_counter() - t0

            t0 = time.perf_counter()
            state = adapter.observe()
            observe_s = time.perf_counter() - t0
            ours = sum(1 for j in state.jobs if j.workload and j.state.active)

            cancel_all()
            t0 = time.perf_counter()
            for i in range(args.n):
                _, partition, gpu_type = PARTITIONS[i % len(PARTITIONS)]
                subprocess.run(
                    [
                        "sbatch", "--parsable", f"--partition={partition}",
                        f"--gres=gpu:{gpu_type}:1", "--time=10:00", "--output=/dev/null",
                        "--wrap", "sleep infinity",
                    ],
                    check=True, capture_output=True, text=True,
                )  # fmt: skip
            raw_s = time.perf_counter() - t0
    finally:
        cancel_all()
        if not args.keep:
            cluster.stop()

    n = args.n
    print(f"adapter: {n} submissions in {adapter_s:.2f}s = {1000 * adapter_s / n:.2f} ms each")
    print(f"raw sbatch --wrap: {n} in {raw_s:.2f}s = {1000 * raw_s / n:.2f} ms each")
    print(f"ratio adapter/raw: {adapter_s / raw_s:.2f}x")
    print(f"observe() with {len(state.jobs)} jobs ({ours} ours, active): {1000 * observe_s:.0f} ms")


if __name__ == "__main__":
    main()
