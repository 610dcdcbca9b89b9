"""CP-SAT class model vs the KAI-order greedy on synthetic clusters shaped like real traces.

Run: ``.venv/bin/python -m benchmarks.solver [--sizes 200:1000,1000:5000,4000:20000]``

Each size builds a :class:`~solvers.problem.Problem` directly (no specs, no snapshot):
nodes from the Alibaba openb GPU inventory, a two-level org whose project quotas follow
the SenseTime Helios virtual-cluster sizes, running jobs filling part of the nodes, and
pending jobs with the Microsoft ITP GPU-count mix. Greedy and CP-SAT run in this process
on the same problem and are scored by the same function. Not part of the test suite.

The constants below are small derived parameters, copied so the benchmark runs without
the trace files (source: shared/traces, see its README for the papers and repositories).
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from solvers.cpsat import score, solve
from solvers.kai.allocate import allocate
from solvers.policy import Policy
from solvers.problem import JobRequest, NodeInfo, PoolInfo, Problem, Queue
from solvers.session import Session

# Alibaba cluster-trace-gpu-v2023 "openb", openb_node_list_gpu_node.csv: 1,213 GPU nodes
# counted by (GPU model, GPUs per node).
OPENB_NODES: dict[tuple[str, int], int] = {
    ("A10", 1): 2,
    ("G2", 8): 549,
    ("G3", 8): 39,
    ("P100", 1): 3,
    ("P100", 2): 131,
    ("T4", 2): 387,
    ("T4", 4): 17,
    ("V100M16", 1): 19,
    ("V100M16", 4): 28,
    ("V100M16", 8): 8,
    ("V100M32", 4): 9,
    ("V100M32", 8): 21,
}
# Not in the trace: illustrative cost per GPU-hour, so the cost tier has something to do.
COST_PER_GPU_HOUR = {
    "A10": 1.1,
    "G2": 2.4,
    "G3": 3.0,
    "P100": 0.9,
    "T4": 0.5,
    "V100M16": 1.5,
    "V100M32": 2.0,
}
# openb_pod_list_gpuspec33.csv: 34% of GPU pods constrained to GPU types; qos LS 57%
# (here: non-preemptible, priority 100) vs BE 42% (preemptible training, priority 50).
CONSTRAINED_SHARE = 0.34
NON_PREEMPTIBLE_SHARE = 0.57
# SenseTime Helios (HeliosData), Venus, GPUs per virtual cluster on 2020-09-28 (1,080 GPUs,
# 16 non-empty VCs): the shape of the project quotas.
HELIOS_VC_GPUS = [256, 160, 88, 88, 80, 72, 64, 64, 48, 40, 32, 32, 24, 16, 8, 8]
# Microsoft ITP (ElasticFlow traces), GPUs per job over all 69,351 jobs, in percent.
# 16/32/64-GPU jobs become gangs of 8-GPU replicas.
ITP_GPU_MIX = {1: 83.17, 2: 2.14, 4: 3.42, 8: 10.11, 16: 0.55, 32: 0.51, 64: 0.10}

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
DEPARTMENTS = 4
RUNNING_FILL = 0.6  # share of GPUs running jobs hold before the pass
QUOTA_SHARE = 0.9  # deserved quotas add up to this share of the cluster


@dataclass(frozen=True)
class Row:
    nodes: int
    pending: int
    gpus: int
    free: int
    greedy_seconds: float
    cpsat_seconds: float
    lp_seconds: float
    status: str
    greedy_objective: float
    objective: float
    bound: float
    gap: float
    greedy_placed: int
    placed: int
    greedy_in_quota: int
    in_quota: int
    greedy_partly: int
    partly: int
    frag_bound: float
    model: str


def make_problem(n_nodes: int, n_pending: int, seed: int = 0) -> Problem:
    rng = random.Random(seed)
    pools, nodes = _inventory(n_nodes)
    total = sum(n.capacity for n in nodes.values())
    queues, top = _org(total, rng)
    projects = sorted(q for q in queues if q.startswith("project:"))
    weights = [queues[p].deserved for p in projects]  # bigger projects submit more
    jobs: dict[str, JobRequest] = {}
    _running(jobs, nodes, pools, queues, projects, weights, total, rng)
    for i in range(n_pending):
        job = _job(f"pend-{i:05d}", projects, weights, pools, rng)
        jobs[job.key] = job
    order = {qid: i for i, qid in enumerate(sorted(queues))}
    return Problem(NOW, queues, top, nodes, pools, jobs, {}, set(), [], [], order)


def _inventory(n_nodes: int) -> tuple[dict[tuple[str, str], PoolInfo], dict[str, NodeInfo]]:
    scale = n_nodes / sum(OPENB_NODES.values())
    counts = {k: max(1, round(v * scale)) for k, v in OPENB_NODES.items()}
    pools: dict[tuple[str, str], PoolInfo] = {}
    nodes: dict[str, NodeInfo] = {}
    for (model, size), count in sorted(counts.items()):
        key = ("bench", f"{model.lower()}-{size}")
        pools[key] = PoolInfo(key, model, 32.0, size, None, None, COST_PER_GPU_HOUR[model], None)
        for i in range(count):
            name = f"{key[1]}-{i:04d}"
            nodes[f"bench/{name}"] = NodeInfo(name, "bench", key, size, 0, True)
    return pools, nodes


def _org(total_gpus: int, rng: random.Random) -> tuple[dict[str, Queue], list[str]]:
    queues: dict[str, Queue] = {}
    scale = QUOTA_SHARE * total_gpus / sum(HELIOS_VC_GPUS)
    top = []
    for d in range(DEPARTMENTS):
        did = f"department:d{d}"
        top.append(did)
        children = []
        for v in range(d, len(HELIOS_VC_GPUS), DEPARTMENTS):
            deserved = max(1, round(HELIOS_VC_GPUS[v] * scale))
            pid = f"project:vc{v:02d}"
            limit = float(3 * deserved) if v % 3 == 0 else None
            queues[pid] = Queue(
                pid,
                f"vc{v:02d}",
                "project",
                did,
                float(deserved),
                limit,
                float(rng.choice([1, 1, 2])),
                100,
            )
            children.append(pid)
        dq = sum(queues[c].deserved for c in children)
        queues[did] = Queue(
            did, f"d{d}", "department", None, dq, None, dq, 110 if d == 0 else 100, sorted(children)
        )
    return queues, top


def _job(
    name: str,
    projects: list[str],
    weights: list[float],
    pools: dict[tuple[str, str], PoolInfo],
    rng: random.Random,
) -> JobRequest:
    queue = rng.choices(projects, weights=weights)[0]
    total = rng.choices(list(ITP_GPU_MIX), weights=list(ITP_GPU_MIX.values()))[0]
    gpus, replicas = (8, total // 8) if total > 8 else (total, 1)
    fits = sorted(k for k, p in pools.items() if p.gpus_per_node >= gpus)
    if rng.random() < CONSTRAINED_SHARE:
        model = rng.choice(sorted({pools[k].gpu_type for k in fits}))
        fits = [k for k in fits if pools[k].gpu_type == model]
    preemptible = rng.random() >= NON_PREEMPTIBLE_SHARE
    return JobRequest(
        key=f"{queue.split(':')[1]}/{name}",
        queue=queue,
        priority=50 if preemptible else 100,
        preemptible=preemptible,
        gpus=gpus,
        replicas=replicas,
        min_replicas=replicas,
        created=NOW - timedelta(seconds=rng.randrange(86_400)),
        pools=fits,
        walltime=None,
    )


def _running(
    jobs: dict[str, JobRequest],
    nodes: dict[str, NodeInfo],
    pools: dict[tuple[str, str], PoolInfo],
    queues: dict[str, Queue],
    projects: list[str],
    weights: list[float],
    total: int,
    rng: random.Random,
) -> None:
    """Start jobs first-fit on shuffled nodes until ``RUNNING_FILL`` of the GPUs are held."""
    by_pool: dict[tuple[str, str], list[str]] = {}
    for key, n in sorted(nodes.items()):
        assert n.pool is not None
        by_pool.setdefault(n.pool, []).append(key)
    np_held: Counter[str] = Counter()
    used = misses = 0
    while used < RUNNING_FILL * total and misses < 200:  # 200 misses in a row: full enough
        job = _job(f"run-{len(jobs):05d}", projects, weights, pools, rng)
        if (
            not job.preemptible
            and np_held[job.queue] + job.gpus * job.replicas > queues[job.queue].deserved
        ):
            job.preemptible, job.priority = True, 50
        pool = rng.choice(job.pools)
        candidates = by_pool[pool][:]
        rng.shuffle(candidates)
        placed: list[str] = []
        for key in candidates:
            while len(placed) < job.replicas and nodes[key].free >= job.gpus:
                nodes[key].used += job.gpus
                placed.append(key)
        if len(placed) < job.replicas:
            for key in placed:
                nodes[key].used -= job.gpus
            misses += 1
            continue
        misses = 0
        job.job_id, job.cluster, job.pool, job.placed = f"{len(jobs)}", "bench", pool, placed
        job.started_at = job.created
        if not job.preemptible:
            np_held[job.queue] += job.gpus * job.replicas
        jobs[job.key] = job
        used += job.gpus * job.replicas


def run(n_nodes: int, n_pending: int, policy: Policy, seed: int) -> Row:
    problem = make_problem(n_nodes, n_pending, seed)
    started = time.perf_counter()
    greedy_session = Session.open(problem, k=policy.k)
    greedy = allocate(greedy_session)
    greedy_seconds = time.perf_counter() - started
    started = time.perf_counter()
    session = Session.open(problem, k=policy.k)
    result = solve(problem, session, policy, greedy=greedy.grants)
    cpsat_seconds = time.perf_counter() - started - result.report.lp_seconds
    report = result.report
    greedy_score = score(problem, session, greedy.grants)
    frag = next(t for t in report.tiers if t.name == "partly_used")
    size = report.model_size
    return Row(
        nodes=n_nodes,
        pending=n_pending,
        gpus=problem.total_gpus,
        free=sum(n.free for n in problem.nodes.values()),
        greedy_seconds=greedy_seconds,
        cpsat_seconds=cpsat_seconds,
        lp_seconds=report.lp_seconds,
        status=report.status,
        greedy_objective=report.greedy_objective or 0.0,
        objective=report.objective,
        bound=report.bound,
        gap=report.gap,
        greedy_placed=sum(len(g.nodes) * problem.jobs[k].gpus for k, g in greedy.grants.items()),
        placed=sum(len(g.nodes) * problem.jobs[k].gpus for k, g in result.grants.items()),
        greedy_in_quota=greedy_score.in_quota,
        in_quota=result.score.in_quota,
        greedy_partly=greedy_score.partly_used,
        partly=result.score.partly_used,
        frag_bound=-frag.bound,
        model=f"{size['classes']} classes, {size['groups']} groups, {size['patterns']} patterns, "
        "stages " + ", ".join(f"{s.tier} {s.status} {s.seconds:.2f}s" for s in report.stages),
    )


HEADER = (
    "| nodes / pending | GPUs (free) | greedy s | greedy objective | CP-SAT s "
    "| CP-SAT objective | LP bound | gap | status | objective greedy/CP-SAT "
    "| time greedy/CP-SAT | LP s | placed GPUs g / c | in-quota g / c "
    "| partly-used nodes g / c (LP bound) |"
)


def markdown(row: Row) -> str:
    ratio = row.greedy_objective / row.objective if row.objective else 1.0
    return (
        f"| {row.nodes:,} / {row.pending:,} | {row.gpus:,} ({row.free:,}) "
        f"| {row.greedy_seconds:.2f} | {row.greedy_objective:.6e} | {row.cpsat_seconds:.2f} "
        f"| {row.objective:.6e} | {row.bound:.6e} | {100 * row.gap:.4f}% | {row.status} "
        f"| {ratio:.6f} | {row.greedy_seconds / row.cpsat_seconds:.2f} | {row.lp_seconds:.2f} "
        f"| {row.greedy_placed:,} / {row.placed:,} | {row.greedy_in_quota:,} / {row.in_quota:,} "
        f"| {row.greedy_partly} / {row.partly} ({max(0.0, row.frag_bound):.1f}) |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument(
        "--sizes",
        default="200:1000,1000:5000,4000:20000",
        help="comma-separated NODES:PENDING pairs",
    )
    parser.add_argument("--seed", type=int, default=0, help="instance seed")
    parser.add_argument("--time-limit", type=float, default=Policy().cpsat_time_limit)
    parser.add_argument("--workers", type=int, default=Policy().workers)
    args = parser.parse_args()
    policy = Policy(cpsat_time_limit=args.time_limit, workers=args.workers)
    print(HEADER)
    print("|" + "---|" * (HEADER.count(" | ") + 1))
    details: list[str] = []
    for pair in args.sizes.split(","):
        n_nodes, n_pending = (int(x) for x in pair.split(":"))
        row = run(n_nodes, n_pending, policy, args.seed)
        print(markdown(row), flush=True)
        details.append(f"- {row.nodes:,} / {row.pending:,}: {row.model}")
    print("\n".join(details))


if __name__ == "__main__":
    main()
