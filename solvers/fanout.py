"""Fan-out (rv-style): submit one workload as several candidates; the first to run wins.

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
   counts as earlier than an unknown one, two unknown starts are not compared).
   An estimate of "now" is the cluster's view before this plan: a candidate for which the
   plan's own placements leave no room counts as unknown instead.
3. Rank by (estimated start, cost, name) and choose up to ``maxParallel``. Without
   forecasts nothing is dominated and candidates rank by cost.
4. Gate on quota, as KAI would for one job: the project and its ancestors stay within
   ``limit`` and non-preemptible work within deserved, counting the workload's GPUs once
   however many candidates it has, and counting the fan-out workloads whose candidates
   still wait.

Pure and deterministic: forecasts and the time come in as arguments.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import StrEnum
from typing import Literal

from solvers import reasons
from solvers.problem import JobRequest, PoolInfo, Problem
from solvers.segments import Segments
from solvers.session import Session
from specs.actions import Action, Op, Pending, Reason, ReasonCode, SubmitDetails
from specs.durations import format_duration
from specs.models import WorkloadSpec
from specs.snapshot import Replica

Never = Literal["never"]
NEVER: Never = "never"
# a candidate's estimated start: when, never, or None (unknown)
Estimate = datetime | Never | None
_UNKNOWN = datetime.max.replace(tzinfo=timezone.utc)


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


def node_counts(problem: Problem) -> dict[tuple[str, str], int]:
    """Schedulable nodes per pool, as observed."""
    out: dict[tuple[str, str], int] = defaultdict(int)
    for n in problem.nodes.values():
        if n.pool is not None and n.schedulable:
            out[n.pool] += 1
    return dict(out)


def enumerate_candidates(
    job: JobRequest, spec: WorkloadSpec, pools: Mapping[tuple[str, str], PoolInfo],
    nodes: Mapping[tuple[str, str], int], segments: Segments | None,
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
    return ((spec.clusters is None or cluster in spec.clusters)
            and (spec.gpu_types is None or pool.gpu_type in spec.gpu_types)
            and (spec.min_gpu_memory_gib is None or pool.memory_gib >= spec.min_gpu_memory_gib)
            and pool.gpus_per_node >= spec.gpus)


def _shapes(job: JobRequest, pool: PoolInfo, available: int) -> list[tuple[int, int, int]]:
    """(nodes, GPUs per node, tasks per node): together on one node, or one replica per node."""
    shapes = []
    if job.replicas > 1 and job.gpus * job.replicas <= pool.gpus_per_node and available >= 1:
        shapes.append((1, job.gpus * job.replicas, job.replicas))
    if available >= job.replicas:
        shapes.append((job.replicas, job.gpus, 1))
    return shapes


def _modes(job: JobRequest, pool: PoolInfo, n_nodes: int, per_node: int, tasks: int,
           seg: Segments | None) -> list[Candidate]:
    limit = pool.max_walltime

    def make(mode: Mode, time: int | None, time_min: int | None = None) -> Candidate:
        hours = seg.remaining / 3600 if seg else (time / 3600 if time else 1.0)
        return Candidate(
            workload=job.key, cluster=pool.key[0], pool=pool.key[1], partition=pool.partition,
            gpu_type=pool.gpu_type, nodes=n_nodes, gpus_per_node=per_node, tasks_per_node=tasks,
            mode=mode, walltime=time, time_min=time_min, hours=round(hours, 6),
            cost_per_gpu_hour=pool.cost_per_gpu_hour, account=pool.account)

    if seg is None:
        wall = job.walltime
        if wall is not None and limit is not None and wall > limit:
            return []  # too long for this pool, and no checkpoint to split it
        return [make(Mode.DIRECT, wall)]
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


def dominates(a: Candidate, ea: Estimate, b: Candidate, eb: Estimate) -> bool:
    """``a`` starts no later and costs no more than ``b``, and is strictly better in one."""
    sa, sb = _start(ea), _start(eb)
    if sa is None:
        return False  # an unknown start is never known to be early
    no_later = sb is None or sa <= sb
    earlier = sb is None or sa < sb
    return no_later and a.cost <= b.cost and (earlier or a.cost < b.cost)


def rank_key(c: Candidate, estimate: Estimate) -> tuple[datetime, float, str]:
    return (_start(estimate) or _UNKNOWN, c.cost, c.name)


def choose(candidates: Sequence[Candidate], forecasts: Mapping[str, Estimate] | None,
           max_parallel: int) -> list[Verdict]:
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
            note = ("no forecast to show an earlier start" if forecasts is None else
                    "the forecast shows no earlier start with the shorter limit")
            verdicts[c.key] = Verdict(c, e, Status.NO_EARLIER, note)
        else:
            viable.append(c)
    chosen = 0
    for c in viable:
        e = est[c.key]
        winner = next((a for a in viable if a is not c and dominates(a, est[a.key], c, e)), None)
        if winner is not None:
            verdicts[c.key] = Verdict(c, e, Status.DOMINATED, f"dominated by {winner.name}")
        elif chosen < max_parallel:
            chosen += 1
            verdicts[c.key] = Verdict(c, e, Status.CHOSEN, f"{chosen} of up to {max_parallel}")
        else:
            verdicts[c.key] = Verdict(c, e, Status.SPARE, f"beyond maxParallel {max_parallel}")
    return [verdicts[c.key] for c in ordered]


def _earlier(e: Estimate, sibling: Candidate | None, est: Mapping[str, Estimate]) -> bool:
    """A backfill estimate beats the full-limit candidate of the same shape."""
    start = _start(e)
    if start is None:
        return False
    other = _start(est[sibling.key]) if sibling is not None else None
    return other is None or start < other


# ------------------------------------------------------------------ 4. gate, actions


def quota_gate(session: Session, job: JobRequest, gpus: int, held: Mapping[str, float],
               held_np: Mapping[str, float]) -> Reason | None:
    """KAI's hard caps for a workload the allocator does not place; ``held`` are the GPUs of
    fan-out workloads whose candidates wait, by queue id."""
    once = f" (a fan-out workload counts its {gpus} GPUs once, whatever its candidates)"
    chain = session.chain(job.queue)
    for q in chain:
        have = session.alloc[q.id] + held.get(q.id, 0.0)
        if q.limit is not None and have + gpus > q.limit:
            why = reasons.over_limit(q, have + gpus)
            return Reason(code=why.code, message=why.message + once)
    if not job.preemptible:
        for q in chain:
            have = session.alloc_np[q.id] + held_np.get(q.id, 0.0)
            if have + gpus > q.deserved:
                why = reasons.non_preemptible_over_deserved(q, have + gpus)
                return Reason(code=why.code, message=why.message + once)
    return None


def submit_action(c: Candidate, job: JobRequest, spec: WorkloadSpec, reason: Reason,
                  segment: int | None = None) -> Action:
    """The ``submit`` of one candidate: the cluster places it (replica nodes null)."""
    details = SubmitDetails.for_workload(
        spec, gpu_type=c.gpu_type, partition=c.partition, walltime=c.walltime, account=c.account,
        time_min=c.time_min, nodes=c.nodes if c.nodes != job.replicas else None,
        segment=segment, candidate=c.name)
    return Action(op=Op.SUBMIT, workload=job.key, cluster=c.cluster, pool=c.pool,
                  replicas=[Replica(node=None, gpus=job.gpus) for _ in range(job.replicas)],
                  reason=reason, submit=details)


@dataclass
class FanOutPlan:
    actions: list[Action] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    verdicts: dict[str, list[Verdict]] = field(default_factory=dict)  # by workload


def plan_fan_out(problem: Problem, session: Session, specs: Mapping[str, WorkloadSpec],
                 forecasts: Mapping[str, Estimate] | None) -> FanOutPlan:
    """Submissions for the fan-out workloads that wait for a start, in KAI's job order
    (priority, then older, then name); the GPUs of each one submitted are charged to the
    session so the next one's gate sees them."""
    out = FanOutPlan()
    held: dict[str, float] = defaultdict(float)
    held_np: dict[str, float] = defaultdict(float)
    for key in sorted(problem.candidates):
        job = problem.fan_out[key]
        for q in session.chain(job.queue):
            held[q.id] += job.replicas * job.gpus
            if not job.preemptible:
                held_np[q.id] += job.replicas * job.gpus
    counts = node_counts(problem)
    waiting = [j for k, j in problem.fan_out.items() if k not in problem.candidates]
    for job in sorted(waiting, key=lambda j: (-j.priority, j.created, j.key)):
        # a pool too short for the walltime may still take checkpoint segments
        if job.blocked is not None and job.blocked.code != ReasonCode.NO_ELIGIBLE_POOL:
            out.pending.append(Pending(workload=job.key, reason=job.blocked))
            continue
        gpus = job.replicas * job.gpus
        if (why := quota_gate(session, job, gpus, held, held_np)) is not None:
            out.pending.append(Pending(workload=job.key, reason=why))
            continue
        spec = specs[job.key]
        seg = problem.segments.get(job.key)
        candidates = enumerate_candidates(job, spec, problem.pools, counts, seg)
        parallel = spec.strategy.max_parallel if spec.strategy else 1
        verdicts = choose(candidates, _after_placements(session, candidates, forecasts), parallel)
        out.verdicts[job.key] = verdicts
        chosen = [v for v in verdicts if v.status is Status.CHOSEN]
        if not chosen:
            out.pending.append(Pending(workload=job.key, reason=_why_none(verdicts)))
            continue
        session.charge(job, gpus)
        resumed = seg is not None and seg.done > 0
        for i, v in enumerate(chosen, 1):
            text = (f"candidate {i} of {len(chosen)}: {v.candidate.describe()}; "
                    f"{describe_start(v.estimate, problem.now, forecasts is not None)}; "
                    f"{describe_cost(v.candidate)}; the first to run wins, the others are cancelled")
            reason = (Reason(code=ReasonCode.CHECKPOINT_RESUME, message=f"{seg.describe()}; {text}")
                      if resumed and seg is not None else
                      Reason(code=ReasonCode.FAN_OUT, message=text))
            out.actions.append(submit_action(v.candidate, job, spec, reason,
                                             seg.number if seg is not None else None))
    return out


def _after_placements(session: Session, candidates: Sequence[Candidate],
                      forecasts: Mapping[str, Estimate] | None) -> Mapping[str, Estimate] | None:
    """Forecasts with "now" taken back where the GPUs this plan places leave no room."""
    if forecasts is None:
        return None
    now = session.problem.now
    out = dict(forecasts)
    for c in candidates:
        start = _start(forecasts.get(c.key))
        if start is not None and start <= now + timedelta(seconds=60) and not _room(session, c):
            out[c.key] = None
    return out


def _room(session: Session, c: Candidate) -> bool:
    """Enough nodes of the candidate's pool keep its GPUs free in the session."""
    pool = (c.cluster, c.pool)
    free = [f for node, f in session.index.free.items() if session.index.pool_of[node] == pool]
    return sum(f >= c.gpus_per_node for f in free) >= c.nodes


def _why_none(verdicts: list[Verdict]) -> Reason:
    if not verdicts:
        return Reason(code=ReasonCode.NO_ELIGIBLE_POOL, message=(
            "no fan-out candidate: no node pool matches its gpuTypes, minGpuMemoryGiB, clusters "
            "and GPUs per replica with enough nodes, and a walltime within the pool's "
            "maxWalltime (or checkpoint segments to split it)"))
    names = ", ".join(v.candidate.name for v in verdicts)
    return Reason(code=ReasonCode.NO_ELIGIBLE_POOL, message=(
        f"none of its {len(verdicts)} fan-out candidates can ever start ({names})"))


def describe_start(estimate: Estimate, now: datetime, forecast: bool) -> str:
    if estimate == NEVER:
        return "never starts"
    start = _start(estimate)
    if start is None:
        return "start unknown" if forecast else "no start estimate (ranked by cost)"
    wait = int((start - now).total_seconds())
    if wait <= 60:
        return "starts now"
    rounded = -(-wait // 60) * 60
    return f"starts in ~{format_duration(rounded)} (at {start.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%SZ})"


def describe_cost(c: Candidate) -> str:
    return (f"cost {reasons.gpus(round(c.cost, 2))} ({c.gpus} GPUs x {round(c.hours, 4):g} h x "
            f"{c.cost_per_gpu_hour:g})")
