"""Every reason a plan gives, worded in one place.

A plan's actions and waiting workloads each carry a :class:`~specs.actions.Reason`: a code
from a closed set (docs/reasons.md) and a sentence. The greedy, the CP-SAT explainer, the
disruptive steps, fan-out, site policy and the reconciler find the facts by different
routes; a user must read the same sentence for the same facts whichever found them. So
the sentences are built here, from facts passed in, and nowhere else. GPU counts are
written as people write them (``8``, not ``8.0``), times as UTC ISO 8601.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from specs.actions import Reason, ReasonCode
from specs.durations import format_duration

if TYPE_CHECKING:  # the words need only a queue's name, kind and quota
    from solvers.problem import PoolKey, Queue

# ------------------------------------------------------------------ words


def gpus(x: float | None) -> str:
    """GPU counts as people write them: ``8``, not ``8.0``; ``-`` for none."""
    if x is None:
        return "-"
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"


def shape(count: int, per_replica: int) -> str:
    unit = "GPU" if per_replica == 1 else "GPUs"
    return f"{count} x {per_replica} {unit}" if count > 1 else f"{per_replica} {unit}"


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th ... 11th, 12th, 13th ... 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pools(keys: Iterable[PoolKey]) -> str:
    return ", ".join(sorted({f"{c}/{p}" for c, p in keys}))


# ------------------------------------------------------------------ why work starts or grows


def room_made(step: str, victims: Sequence[str]) -> str:
    """What a disruptive step did for a workload it placed."""
    if victims:
        return f"{step} of {', '.join(sorted(victims))} makes room"
    return "on GPUs this plan freed"


def granted(
    q: Queue,
    held: float,
    fair: float,
    *,
    grows: tuple[int, int] | None = None,
    room: str | None = None,
    held_np: float | None = None,
) -> Reason:
    """Why a workload starts (or grows, ``grows`` = (replicas after, replicas wanted)):
    its project ``q`` holds ``held`` GPUs with it. ``room``: what was disturbed for it.
    ``held_np``: for non-preemptible work, what the project's non-preemptible work holds
    with it. Such work only ever starts within deserved and is never reclaimed or
    preempted, whatever the project's preemptible work holds beyond."""
    if grows is not None:
        where = f"; {room}" if room else f" on idle GPUs; project {q.name} holds {gpus(held)} GPUs"
        return Reason(
            code=ReasonCode.ELASTIC_EXPAND,
            message=f"grows to {grows[0]} of {grows[1]} replicas{where}",
        )
    if held_np is not None:
        return Reason(
            code=ReasonCode.WITHIN_DESERVED,
            message=(
                f"non-preemptible: project {q.name}'s non-preemptible work holds "
                f"{gpus(held_np)} of its deserved {gpus(q.deserved)} GPUs with this workload; "
                "it is never reclaimed or preempted" + (f"; {room}" if room else "")
            ),
        )
    if held <= q.deserved:
        return Reason(
            code=ReasonCode.WITHIN_DESERVED,
            message=(
                f"project {q.name} holds {gpus(held)} of its deserved {gpus(q.deserved)} GPUs with "
                "this workload" + (f"; {room}" if room else "")
            ),
        )
    return Reason(
        code=ReasonCode.OVER_QUOTA,
        message=(
            f"project {q.name} holds {gpus(held)} GPUs, {gpus(held - q.deserved)} above its deserved "
            f"{gpus(q.deserved)} (fair share {gpus(fair)}); "
            + (room if room else "runs on idle GPUs and may be reclaimed")
        ),
    )


def started_short(reason: Reason, placed: int, replicas: int, taken_back: Reason) -> Reason:
    """A workload that starts with fewer replicas than it asked: some were taken back."""
    return Reason(
        code=reason.code,
        message=(
            f"{reason.message}; starts with {placed} of {replicas} replicas: {taken_back.message}"
        ),
    )


def resumed(progress: str, reason: Reason) -> Reason:
    """The next checkpoint segment of a workload (``progress``: "segment 3: 16h of 24h done")."""
    return Reason(code=ReasonCode.CHECKPOINT_RESUME, message=f"{progress}; {reason.message}")


def fan_out_candidate(index: int, chosen: int, candidate: str, start: str, cost: str) -> Reason:
    return Reason(
        code=ReasonCode.FAN_OUT,
        message=(
            f"candidate {index} of {chosen}: {candidate}; {start}; {cost}; the first to run wins, "
            "the others are cancelled"
        ),
    )


# ------------------------------------------------------------------ why running work is disturbed


def moved(before: str, after: str, beneficiary: str, step: str) -> Reason:
    return Reason(
        code=ReasonCode.CONSOLIDATE,
        message=(f"moved from {before} to {after} so that {beneficiary} fits ({step})"),
    )


def reclaimed(
    mine: Queue,
    mine_held: float,
    mine_share: float,
    mine_within_deserved: bool,
    theirs: Queue,
    theirs_held: float,
    theirs_share: float,
    beneficiary: str,
) -> Reason:
    """Reclaim: ``mine`` (the beneficiary's side) is below its deserved (or fair) share;
    ``theirs`` holds more than its allocatable share (``theirs_share``) or deserved."""
    if mine_within_deserved:
        gains = (
            f"{mine.kind} {mine.name} is below its deserved {gpus(mine.deserved)} "
            f"(holds {gpus(mine_held)})"
        )
    else:
        gains = (
            f"{mine.kind} {mine.name} is below its fair share {gpus(mine_share)} "
            f"(holds {gpus(mine_held)})"
        )
    if theirs_held > theirs_share:
        loses = (
            f"{theirs.kind} {theirs.name} holds {gpus(theirs_held)}, "
            f"{gpus(theirs_held - theirs_share)} over its fair share {gpus(theirs_share)}"
        )
    else:
        loses = (
            f"{theirs.kind} {theirs.name} holds {gpus(theirs_held)}, "
            f"{gpus(theirs_held - theirs.deserved)} over its deserved {gpus(theirs.deserved)}"
        )
    return Reason(code=ReasonCode.RECLAIM, message=f"{gains}; {loses}; reclaimed for {beneficiary}")


def reclaimed_type(
    mine: Queue, theirs: Queue, gpu_type: str, held: float, beneficiary: str
) -> Reason:
    """Reclaim of one GPU type under per-type quotas (whatever the sums say)."""
    own = (
        f"its {gpu_type} deserved {gpus(mine.on(gpu_type).deserved)}"
        if mine.typed is not None
        else f"its deserved {gpus(mine.deserved)}"
    )
    return Reason(
        code=ReasonCode.RECLAIM,
        message=(
            f"{mine.kind} {mine.name} stays within {own} with this job; {theirs.kind} "
            f"{theirs.name} holds {gpus(held)} {gpu_type} GPUs, "
            f"{gpus(held - theirs.on(gpu_type).deserved)} over its {gpu_type} deserved "
            f"{gpus(theirs.on(gpu_type).deserved)}; reclaimed for {beneficiary}"
        ),
    )


def down_to_limit(q: Queue, held: float, victim: str) -> Reason:
    """A queue above a limit that was lowered gives back its preemptible work."""
    return Reason(
        code=ReasonCode.RECLAIM,
        message=(
            f"{q.kind} {q.name} holds {gpus(held)} GPUs, above its limit of {gpus(q.limit)}: "
            f"taken back down to it, lowest priority first ({victim})"
        ),
    )


def replacing(changes: str, old_job: str) -> Reason:
    """The submit of an edited workload's new version."""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=f"the spec changed ({changes}): the new version replaces job {old_job}",
    )


def replaced(changes: str) -> Reason:
    """The cancel of the job an edited workload's new version replaces."""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=f"the spec changed ({changes}): its running job cannot follow and is replaced",
    )


def fewer_replicas(before: int, after: int) -> Reason:
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=f"the spec changed (replicas: {before} -> {after}): the extra replicas stop",
    )


def change_waits_for_min_runtime(changes: str, min_runtime: int, until: datetime) -> Reason:
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"the spec changed ({changes}); replacing the job needs a restart, so it keeps "
            f"running the old version while its project's minRuntime "
            f"({format_duration(min_runtime)}) protects it, until {stamp(until)}"
        ),
    )


def change_does_not_fit(changes: str, why: str) -> Reason:
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"the spec changed ({changes}); the new version {why}, so the job keeps running "
            "the old version until it fits"
        ),
    )


def outranked(beneficiary: str, priority: int, victim_priority: int, project: str) -> Reason:
    return Reason(
        code=ReasonCode.PRIORITY,
        message=(
            f"{beneficiary} (priority {priority}) outranks it (priority {victim_priority}) in "
            f"project {project}"
        ),
    )


def pruned(workload: str) -> Reason:
    return Reason(code=ReasonCode.PRUNE, message=f"workload {workload} is no longer in the specs")


def fan_out_loser(workload: str, winner_job: str | None, candidate: str) -> Reason:
    return Reason(
        code=ReasonCode.FAN_OUT_LOSER,
        message=(
            f"fan-out: job {winner_job} of {workload} runs; candidate {candidate} is no longer needed"
        ),
    )


def duplicate(workload: str) -> Reason:
    return Reason(
        code=ReasonCode.FAN_OUT_LOSER,
        message=(f"another job of {workload} already holds its place; one job per workload"),
    )


# ------------------------------------------------------------------ why work waits


def over_limit(q: Queue, held: float, need: float, note: str = "") -> Reason:
    """The workload's own ``need`` against what its queue ``q`` holds now: per workload, so
    two workloads waiting on one limit read the same figures."""
    return Reason(
        code=ReasonCode.OVER_LIMIT,
        message=(
            f"needs {gpus(need)} GPUs; {q.kind} {q.name} holds {gpus(held)} of its limit of "
            f"{gpus(q.limit)}{note}"
        ),
    )


def non_preemptible_over_deserved(q: Queue, held_np: float, need: float, note: str = "") -> Reason:
    return Reason(
        code=ReasonCode.NON_PREEMPTIBLE_OVER_DESERVED,
        message=(
            f"non-preemptible, needs {gpus(need)} GPUs; the non-preemptible work of {q.kind} "
            f"{q.name} holds {gpus(held_np)} of its deserved {gpus(q.deserved)}; non-preemptible "
            f"work must fit within deserved quota{note}"
        ),
    )


def over_type_quota(need: float, bindings: Sequence[tuple[str, Queue, float, bool]]) -> Reason:
    """Every GPU type the workload may use is closed by a per-type quota: per type, the
    level that binds, what it holds of that type and whether its limit or (non-preemptible
    work) its deserved binds."""
    parts = []
    for gpu_type, q, held, by_limit in bindings:
        quota = q.on(gpu_type)
        if by_limit:
            parts.append(
                f"{gpu_type}: {q.kind} {q.name} holds {gpus(held)} of its {gpu_type} limit of "
                f"{gpus(quota.limit)}"
            )
        else:
            parts.append(
                f"{gpu_type}: its non-preemptible work holds {gpus(held)} of {q.kind} "
                f"{q.name}'s {gpu_type} deserved {gpus(quota.deserved)}"
            )
    np = any(not by_limit for *_, by_limit in bindings)
    return Reason(
        code=ReasonCode.NON_PREEMPTIBLE_OVER_DESERVED if np else ReasonCode.OVER_LIMIT,
        message=(
            f"needs {gpus(need)} GPUs; per-GPU-type quota: "
            + "; ".join(parts)
            + ("; non-preemptible work must fit within deserved quota of its type" if np else "")
        ),
    )


def counted_once(gpu_count: int) -> str:
    """The note on a fan-out workload's quota reasons."""
    return f" (a fan-out workload counts its {gpu_count} GPUs once, whatever its candidates)"


def no_room(
    count: int,
    per_replica: int,
    pool_keys: Sequence[PoolKey],
    total: int,
    largest: int,
    *,
    gang_would_fit_in_total: bool,
) -> Reason:
    """Why a gang of ``count`` x ``per_replica`` GPUs found no place in ``pool_keys``."""
    names = pools(pool_keys)
    if count > 1 and gang_would_fit_in_total:
        return Reason(
            code=ReasonCode.GANG_UNPLACEABLE,
            message=(
                f"gang of {shape(count, per_replica)} must start at once in one pool; {total} GPUs "
                f"are free in {names} but not room for {count} replicas of {per_replica} GPUs"
            ),
        )
    return Reason(
        code=ReasonCode.NO_CAPACITY,
        message=(
            f"needs {shape(count, per_replica)}; eligible pools {names} have {total} free "
            f"(largest block {largest} on one node)"
        ),
    )


def ranked_lower(count: int, per_replica: int, pool_keys: Sequence[PoolKey]) -> Reason:
    """CP-SAT left a job out although it would fit: the objective preferred other work."""
    return Reason(
        code=ReasonCode.FAIRSHARE,
        message=(
            f"needs {shape(count, per_replica)}; the free GPUs in {pools(pool_keys)} went to work "
            "the objective ranks higher (in-quota, fair share, priority) within the solver's time "
            "limit"
        ),
    )


def min_runtime_wait(need: int, protected_by: Sequence[tuple[str, tuple[int, datetime]]]) -> Reason:
    """Only ``minRuntime`` stands in the way: per project, its minRuntime and when the
    first of its protected work may be taken back."""
    parts = [
        f"project {name} (minRuntime {format_duration(seconds)}, the first free to take "
        f"at {stamp(first)})"
        for name, (seconds, first) in protected_by
    ]
    return Reason(
        code=ReasonCode.MIN_RUNTIME,
        message=(
            f"needs {gpus(need)} GPUs, held by work too young to take back: " + "; ".join(parts)
        ),
    )


def walltime_exceeds(walltime: int, project: str, limit: int) -> Reason:
    return Reason(
        code=ReasonCode.WALLTIME_EXCEEDS_LIMIT,
        message=(
            f"walltime {format_duration(walltime)} exceeds project {project}'s maxWalltime "
            f"{format_duration(limit)}"
        ),
    )


def no_eligible_pool(per_replica: int) -> Reason:
    return Reason(
        code=ReasonCode.NO_ELIGIBLE_POOL,
        message=(
            "no node pool matches its gpuTypes, minGpuMemoryGiB, clusters, "
            f"{per_replica} GPUs per replica and walltime"
        ),
    )


def no_fan_out_candidate(names: Sequence[str]) -> Reason:
    if not names:
        return Reason(
            code=ReasonCode.NO_ELIGIBLE_POOL,
            message=(
                "no fan-out candidate: no node pool matches its gpuTypes, minGpuMemoryGiB, clusters "
                "and GPUs per replica with enough nodes, and a walltime within the pool's "
                "maxWalltime (or checkpoint segments to split it)"
            ),
        )
    return Reason(
        code=ReasonCode.NO_ELIGIBLE_POOL,
        message=(
            f"none of its {len(names)} fan-out candidates can ever start ({', '.join(names)})"
        ),
    )


def over_budget_hours(project: str, used: float, budget: float, month: str) -> Reason:
    return Reason(
        code=ReasonCode.OVER_BUDGET,
        message=(
            f"project {project} used {used:,.0f} of its {budget:,.0f} GPU-hours for {month}; new "
            "work waits for next month's budget"
        ),
    )


def over_budget_cost(project: str, spent: float, budget: float, month: str) -> Reason:
    return Reason(
        code=ReasonCode.OVER_BUDGET,
        message=(
            f"project {project} spent {spent:,.2f} of its {budget:,.2f} cost units for {month}; new "
            "work waits for next month's budget"
        ),
    )


def failed(
    job: str,
    exit_code: str | None,
    ended_at: datetime,
    streak: int,
    retry_at: datetime,
    backoff: int,
) -> Reason:
    """A workload whose latest job failed waits out its retry backoff."""
    exit_info = f" (exit {exit_code})" if exit_code else ""
    return Reason(
        code=ReasonCode.FAILED,
        message=(
            f"job {job} failed{exit_info} at {stamp(ended_at)}, the {ordinal(streak)} failure in a "
            f"row; retried after {stamp(retry_at)} (backoff {format_duration(backoff)})"
        ),
    )


def submitted(job: str, cluster_reason: str | None) -> Reason:
    where = f" ({cluster_reason})" if cluster_reason else ""
    return Reason(
        code=ReasonCode.SUBMITTED, message=f"job {job} waits in the cluster's own queue{where}"
    )


def candidates_waiting(jobs: Sequence[tuple[str, str | None, str | None]]) -> Reason:
    """Fan-out candidates in the clusters' queues: (job id, candidate name, cluster's reason)."""
    listed = ", ".join(
        f"job {job} ({', '.join(filter(None, [name, why]))})" for job, name, why in jobs
    )
    return Reason(
        code=ReasonCode.SUBMITTED,
        message=(
            f"{len(jobs)} fan-out candidate(s) wait in the clusters' queues: {listed}; the first to "
            "run wins"
        ),
    )


def cluster_unreachable(clusters: Sequence[tuple[str, str]]) -> Reason:
    """A workload that may run on clusters that did not answer: (cluster, error) each."""
    one = len(clusters) == 1
    names = ", ".join(f"{c} ({e})" for c, e in sorted(clusters))
    return Reason(
        code=ReasonCode.CLUSTER_UNREACHABLE,
        message=(
            f"cluster{'' if one else 's'} {names} did not answer; the workload may run "
            "there, so it is neither started elsewhere nor stopped, and its GPUs count as "
            f"in use, until {'it answers' if one else 'they answer'}"
        ),
    )
