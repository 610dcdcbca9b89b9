"""The simulator adapter under an apply, as its history grows: milliseconds per action.

A user trial ran a busy 300-node org for 25 simulated days: every action loaded and
rewrote the whole state, ended jobs and their runs included, so an action took longer
the longer the cluster had run (50-110 ms at 300 nodes). This measures one apply's
actions (a preempt, then a submit onto the GPUs it freed, in turn) on a simulated cluster
of ``--nodes`` nodes, busy with one running job per node, after ``--days`` of history:
each day, ``--ended-per-day`` jobs that ran to completion and as many runs that were
preempted. The history is written as a state file of the format every version reads
(ended jobs in the queue, runs inline), as a simulator that ran that long would have
left it; the first look after it (which moves it to today's layout) is timed apart.

Then one read of the accounting, as an observation makes for the runs since the last one.

Run: .venv/bin/python -m benchmarks.apply [--nodes 300,1000] [--days 0,5,25] [--actions 60]

Ratios are against the same cluster with no history, in the same process.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from adapters.simulator import SimulatorAdapter
from adapters.simulator.engine import nodes_from_spec
from specs.actions import Action, Op, Reason, ReasonCode, SubmitDetails
from specs.models import Cluster
from specs.snapshot import Replica

NOW = datetime(2026, 11, 22, 10, tzinfo=UTC)
WHY = Reason(code=ReasonCode.RECLAIM, message="benchmark")


def spec(nodes: int) -> Cluster:
    return Cluster.model_validate(
        {
            "apiVersion": "controlplane/v1",
            "kind": "Cluster",
            "metadata": {"name": "sim"},
            "spec": {
                "adapter": "simulator",
                "gpuTypes": {"a100": {"memoryGiB": 80}},
                "nodePools": [
                    {"name": "a100", "gpuType": "a100", "gpusPerNode": 8, "nodes": nodes}
                ],
            },
        }
    )


def history(cluster: Cluster, days: int, per_day: int, seed: int = 0) -> dict[str, Any]:
    """A state file as a simulator busy for ``days`` would have left it."""
    rng = random.Random(seed)
    nodes = nodes_from_spec(cluster)
    jobs: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    next_id = 1000
    for day in range(days, 0, -1):
        for _ in range(per_day):
            start = NOW - timedelta(days=day, seconds=rng.randrange(86400))
            end = start + timedelta(hours=rng.randrange(1, 12))
            where = rng.choice(nodes).name
            common = {"workload": f"p{rng.randrange(40):02d}/w{next_id}", "gpus": 8}
            jobs.append(
                {
                    "id": str(next_id),
                    "workload": common["workload"],
                    "state": "COMPLETED",
                    "submittedAt": start.isoformat(),
                    "startedAt": start.isoformat(),
                    "endedAt": end.isoformat(),
                    "pool": "a100",
                    "gpuType": "a100",
                    "walltime": int((end - start).total_seconds()),
                    "planId": "old",
                    "replicas": [{"node": where, "gpus": 8}],
                }
            )
            runs.append(
                {
                    "job": str(next_id + 1),
                    "workload": common["workload"],
                    "startedAt": start.isoformat(),
                    "endedAt": end.isoformat(),
                    "gpus": 8,
                    "state": "CANCELLED",
                    "planId": "old",
                }
            )
            next_id += 2
    for node in nodes:  # every node busy now
        jobs.append(
            {
                "id": str(next_id),
                "workload": f"p{rng.randrange(40):02d}/w{next_id}",
                "state": "RUNNING",
                "submittedAt": (NOW - timedelta(hours=1)).isoformat(),
                "startedAt": (NOW - timedelta(hours=1)).isoformat(),
                "pool": "a100",
                "gpuType": "a100",
                "planId": "old",
                "replicas": [{"node": node.name, "gpus": 8}],
            }
        )
        next_id += 1
    return {
        "clock": NOW.isoformat(),
        "nextId": next_id,
        "state": {
            "name": "sim",
            "nodes": [n.model_dump(mode="json", by_alias=True) for n in nodes],
            "jobs": jobs,
        },
        "accounting": runs,
        "openSince": {},
    }


def measure(nodes: int, days: int, per_day: int, actions: int) -> dict[str, float]:
    cluster = spec(nodes)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "simulator").mkdir()
        (folder / "simulator" / "sim.json").write_text(
            json.dumps(history(cluster, days, per_day), indent=1)
        )
        at = [NOW + timedelta(minutes=1)]
        sim = SimulatorAdapter(cluster, state_dir=folder, clock=lambda: at[0])
        t = time.perf_counter()
        running = [j for j in sim.observe().jobs if j.state.holds_gpus]
        first = time.perf_counter() - t
        t = time.perf_counter()
        for i in range(actions // 2):
            job = running[i]
            at[0] += timedelta(seconds=1)
            sim.execute(
                Action(
                    op=Op.PREEMPT,
                    workload=job.workload or "",
                    cluster="sim",
                    job=job.id,
                    reason=WHY,
                ),
                plan_id="bench",
            )
            node = job.replicas[0].node
            sim.execute(
                Action(
                    op=Op.SUBMIT,
                    workload=f"new/w{i}",
                    cluster="sim",
                    pool="a100",
                    replicas=[Replica(node=node, gpus=8)],
                    submit=SubmitDetails(gpus_per_replica=8, gpu_type="a100"),
                    reason=WHY,
                ),
                plan_id="bench",
            )
        per_action = (time.perf_counter() - t) / (2 * (actions // 2))
        t = time.perf_counter()  # an observation's read of the runs since the last one
        recent = sim.runs(at[0] - timedelta(minutes=5), at[0])
        read = time.perf_counter() - t
        assert len(recent) >= nodes, "the runs of the jobs in the queue, and those ended"
        queue = len(sim.observe().jobs)
        size = sum(p.stat().st_size for p in (folder / "simulator").iterdir())
    return {"first": first, "action": per_action, "read": read, "queue": queue, "bytes": size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="300,1000")
    ap.add_argument("--days", default="0,5,25")
    ap.add_argument("--ended-per-day", type=int, default=800)
    ap.add_argument("--actions", type=int, default=60)
    args = ap.parse_args()
    print(
        "| nodes | days of history | ended jobs + runs | first look s | ms per action "
        "| x no history | runs of the last 5 min, ms | jobs in queue after | files MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for nodes in (int(n) for n in args.nodes.split(",")):
        base = None
        for days in (int(d) for d in args.days.split(",")):
            m = measure(nodes, days, args.ended_per_day, args.actions)
            base = base or m["action"]
            print(
                f"| {nodes:,} | {days} | {2 * days * args.ended_per_day:,} | {m['first']:.2f} "
                f"| {m['action'] * 1000:.1f} | {m['action'] / base:.2f} | {m['read'] * 1000:.1f} "
                f"| {m['queue']:,} "
                f"| {m['bytes'] / 1e6:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
