"""Fan-out candidates (rv-style): the ways to submit one workload, judged and chosen.

On a shared cluster the queue, not the hardware, decides when work starts. A workload
that could use several GPU types, partitions or shapes is therefore submitted as the few
best *candidates* at once; the cluster's own scheduler starts whichever it can first and
the control plane cancels the others (``fan-out-loser``). Choosing the candidates:

1. Enumerate: GPU type (allowed, enough memory) x pool x shape x mode. Shapes: all
   replicas on one node when their GPUs fit on one, and one replica per node. Modes:
   ``direct`` (``--time`` = the walltime); ``backfill`` (``--time`` with ``--time-min``:
   the scheduler may start it earlier, in a gap before a reservation, with a shorter
   limit), offered to segmented work only since a shorter run must end at a checkpoint;
   ``checkpoint`` (segments of the pool's ``maxWalltime``) when a segmented workload's
   walltime exceeds the pool's limit. Cost = GPUs x hours x the type's ``costPerGpuHour``,
   hours being the remaining run time of segmented work, else the walltime, else one.
2. Judge with forecasts, an input (the clusters' estimate of each candidate's start, or
   ``"never"``, or unknown): drop what can never start; drop a backfill candidate unless
   its estimate is earlier than the same shape's full-limit one; drop a candidate that
   another one dominates (no later and no dearer, one of them strictly; a known start
   counts as earlier than an unknown one, two unknown starts are not compared); and of
   candidates forecast to start together at the same cost, all but the first in rank:
   chosen both, both would run.
   An estimate of "now" is the cluster's view before this plan: a candidate for which the
   plan's own placements leave no room counts as unknown instead.
3. Rank by (estimated start, cost, name) and choose up to ``maxParallel``. Without
   forecasts nothing is dominated and candidates rank by cost.
4. Gate on quota and submit (solvers/fanout/submission.py).

Pure and deterministic: forecasts and the time come in as arguments.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from solvers.order import SAME_START
from solvers.problem import JobRequest, PoolInfo, PoolKey, Problem
from solvers.segments import Segments
from specs.actions import NEVER, Estimate
from specs.models import WorkloadSpec

_UNKNOWN = datetime.max.replace(tzinfo=UTC)


class Mode(StrEnum):
    DIRECT = "direct"
    BACKFILL = "backfill"
    CHECKPOINT = "checkpoint"


class Status(StrEnum):
    CHOSEN = "chosen"
    SPARE = "spare"  # viable, beyond maxParallel
    DOMINATED = "dominated"
    NO_EARLIER = "no-earlier"  # backfill that would not start sooner
    NEVER = "never"


@dataclass(frozen=True)
class Candidate:
    """One way to submit a workload: where, in which shape, with which time limits."""

    workload: str
    cluster: str
    pool: str
    partition: str | None
    gpu_type: str
    nodes: int
    gpus_per_node: int
    tasks_per_node: int  # replicas per node
    mode: Mode
    walltime: int | None  # --time, seconds
    time_min: int | None  # --time-min, seconds (backfill)
    hours: float  # the run time the cost is for
    cost_per_gpu_hour: float
    account: str | None = None

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def cost(self) -> float:
        return round(self.gpus * self.hours * self.cost_per_gpu_hour, 6)

    @property
    def name(self) -> str:
        """Unique among one workload's candidates; safe in job tags and file names."""
        return f"{self.cluster}.{self.pool}.{self.nodes}x{self.gpus_per_node}.{self.mode.value}"

    @property
    def key(self) -> str:
        """What forecasts are keyed by."""
        return f"{self.workload}@{self.name}"

    @property
    def shape(self) -> tuple[str, str, int, int]:
        return (self.cluster, self.pool, self.nodes, self.gpus_per_node)

    def describe(self) -> str:
        nodes = "1 node" if self.nodes == 1 else f"{self.nodes} nodes"
        where = f"{self.cluster}/{self.pool}" + (f" ({self.partition})" if self.partition else "")
        return f"{where}, {nodes} x {self.gpus_per_node} {self.gpu_type}, {self.mode.value}"


@dataclass(frozen=True)
class Verdict:
    candidate: Candidate
    estimate: Estimate
    status: Status
    note: str = ""


# ------------------------------------------------------------------ 1. enumerate


def backfill_time_min(time: int, grace: int) -> int:
    """The shortest limit a backfilled segment accepts: a quarter of the segment, at least
    twice the checkpoint grace, in whole minutes (Slurm's unit)."""
    want = max(2 * grace, time // 4)
    return min(time, -(-want // 60) * 60)


def node_counts(problem: Problem) -> dict[PoolKey, int]:
    """Schedulable nodes per pool, as observed."""
    out: dict[PoolKey, int] = defaultdict(int)
    for n in problem.nodes.values():
        if n.pool is not None and n.schedulable:
            out[n.pool] += 1
    return dict(out)


def enumerate_candidates(
    job: JobRequest,
    spec: WorkloadSpec,
    pools: Mapping[PoolKey, PoolInfo],
    nodes: Mapping[PoolKey, int],
    segments: Segments | None,
) -> list[Candidate]:
    """Every candidate of ``job``, in pool order then shape then mode."""
    out: list[Candidate] = []
    for key, pool in sorted(pools.items()):
        if not _fits_type(spec, key[0], pool):
            continue
        for n_nodes, per_node, tasks in _shapes(job, pool, nodes.get(key, 0)):
            out += _modes(job, pool, n_nodes, per_node, tasks, segments)
    return out


def _fits_type(spec: WorkloadSpec, cluster: str, pool: PoolInfo) -> bool:
    return (
        (spec.clusters is None or cluster in spec.clusters)
        and (spec.node_pools is None or pool.key[1] in spec.node_pools)
        and (spec.gpu_types is None or pool.gpu_type in spec.gpu_types)
        and (spec.min_gpu_memory_gib is None or pool.memory_gib >= spec.min_gpu_memory_gib)
        and pool.gpus_per_node >= spec.gpus
    )


def _shapes(job: JobRequest, pool: PoolInfo, available: int) -> list[tuple[int, int, int]]:
    """(nodes, GPUs per node, tasks per node): together on one node, or one replica per node."""
    shapes = []
    if job.replicas > 1 and job.gpus * job.replicas <= pool.gpus_per_node and available >= 1:
        shapes.append((1, job.gpus * job.replicas, job.replicas))
    if available >= job.replicas:
        shapes.append((job.replicas, job.gpus, 1))
    return shapes


def _modes(
    job: JobRequest, pool: PoolInfo, n_nodes: int, per_node: int, tasks: int, seg: Segments | None
) -> list[Candidate]:
    limit = pool.max_walltime

    def make(mode: Mode, time: int | None, time_min: int | None = None) -> Candidate:
        hours = seg.remaining / 3600 if seg else (time / 3600 if time else 1.0)
        return Candidate(
            workload=job.key,
            cluster=pool.key[0],
            pool=pool.key[1],
            partition=pool.partition,
            gpu_type=pool.gpu_type,
            nodes=n_nodes,
            gpus_per_node=per_node,
            tasks_per_node=tasks,
            mode=mode,
            walltime=time,
            time_min=time_min,
            hours=round(hours, 6),
            cost_per_gpu_hour=pool.cost_per_gpu_hour,
            account=pool.account,
        )

    if seg is None:
        wall = job.walltime
        if wall is not None and limit is not None and wall > limit:
            return []  # too long for this pool, and no checkpoint to split it
        return [make(Mode.DIRECT, job.time_limit(pool))]
    out = []
    time = seg.walltime_for()
    if limit is None or time <= limit:
        out.append(make(Mode.DIRECT, time))
    elif limit > seg.grace:
        time = seg.walltime_for(limit)
        out.append(make(Mode.CHECKPOINT, time))
    else:
        return []
    floor = backfill_time_min(time, seg.grace)
    if floor < time:
        out.append(make(Mode.BACKFILL, time, floor))
    return out


# ------------------------------------------------------------------ 2-3. judge and choose


def _start(estimate: Estimate) -> datetime | None:
    return estimate if isinstance(estimate, datetime) else None


def _before(a: datetime, b: datetime) -> bool:
    return a < b - SAME_START


def dominates(a: Candidate, ea: Estimate, b: Candidate, eb: Estimate) -> bool:
    """``a`` starts no later and costs no more than ``b``, and is strictly better in one
    (starts within ``SAME_START`` of each other are the same)."""
    sa, sb = _start(ea), _start(eb)
    if sa is None:
        return False  # an unknown start is never known to be early
    no_later = sb is None or not _before(sb, sa)
    earlier = sb is None or _before(sa, sb)
    return no_later and a.cost <= b.cost and (earlier or a.cost < b.cost)


def _tie(a: Candidate, ea: Estimate, b: Candidate, eb: Estimate) -> bool:
    """``a`` and ``b`` are forecast to start together (a known start), at the same cost:
    neither dominates, and chosen both, both would start, the workload running twice
    (above its project's limit; two writers of one checkpoint). One of them is enough."""
    sa, sb = _start(ea), _start(eb)
    return (
        sa is not None
        and sb is not None
        and not _before(sa, sb)
        and not _before(sb, sa)
        and a.cost == b.cost
    )


def rank_key(c: Candidate, estimate: Estimate) -> tuple[datetime, float, str]:
    """Earliest start first (to the minute), then the cheapest, then by name."""
    start = _start(estimate)
    minute = start.replace(second=0, microsecond=0) if start is not None else _UNKNOWN
    return (minute, c.cost, c.name)


def choose(
    candidates: Sequence[Candidate], forecasts: Mapping[str, Estimate] | None, max_parallel: int
) -> list[Verdict]:
    """Every candidate with its verdict, in rank order; the first ``max_parallel`` viable
    ones are chosen."""
    est = {c.key: (forecasts.get(c.key) if forecasts is not None else None) for c in candidates}
    ordered = sorted(candidates, key=lambda c: rank_key(c, est[c.key]))
    full = {c.shape: c for c in ordered if c.mode is not Mode.BACKFILL}
    verdicts: dict[str, Verdict] = {}
    viable: list[Candidate] = []
    for c in ordered:
        e = est[c.key]
        if e == NEVER:
            verdicts[c.key] = Verdict(c, e, Status.NEVER, "the cluster says it can never start")
        elif c.mode is Mode.BACKFILL and not _earlier(e, full.get(c.shape), est):
            note = (
                "no forecast to show an earlier start"
                if forecasts is None
                else "the forecast shows no earlier start with the shorter limit"
            )
            verdicts[c.key] = Verdict(c, e, Status.NO_EARLIER, note)
        else:
            viable.append(c)
    chosen: list[Candidate] = []
    for c in viable:
        e = est[c.key]
        winner = next((a for a in viable if a is not c and dominates(a, est[a.key], c, e)), None)
        twin = next((a for a in chosen if _tie(a, est[a.key], c, e)), None)
        if winner is not None:
            verdicts[c.key] = Verdict(c, e, Status.DOMINATED, f"dominated by {winner.name}")
        elif twin is not None:
            note = f"starts with {twin.name} at its cost (both would run)"
            verdicts[c.key] = Verdict(c, e, Status.DOMINATED, note)
        elif len(chosen) < max_parallel:
            chosen.append(c)
            note = f"{len(chosen)} of up to {max_parallel}"
            verdicts[c.key] = Verdict(c, e, Status.CHOSEN, note)
        else:
            verdicts[c.key] = Verdict(c, e, Status.SPARE, f"beyond maxParallel {max_parallel}")
    return [verdicts[c.key] for c in ordered]


def _earlier(e: Estimate, sibling: Candidate | None, est: Mapping[str, Estimate]) -> bool:
    """A backfill estimate beats the full-limit candidate of the same shape."""
    start = _start(e)
    if start is None:
        return False
    other = _start(est[sibling.key]) if sibling is not None else None
    return other is None or _before(start, other)
