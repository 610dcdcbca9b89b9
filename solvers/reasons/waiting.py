"""Why work waits: limits, deserved quotas, room, minRuntime, walltime, budgets,
retries, the clusters' own queues, a cluster that did not answer."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from solvers.reasons.words import gpu_count, gpus, ordinal, pools, shape, stamp
from specs.actions import Reason, ReasonCode
from specs.durations import format_duration
from specs.snapshot import JobState

if TYPE_CHECKING:  # the words need only a queue's name, kind and quota
    from solvers.problem import PoolKey, Queue


# ------------------------------------------------------------------ why work waits


def over_limit(q: Queue, held: float, need: float, note: str = "") -> Reason:
    """The workload's own ``need`` against what its queue ``q`` holds now: per workload, so
    two workloads waiting on one limit read the same figures."""
    return Reason(
        code=ReasonCode.OVER_LIMIT,
        message=(
            f"needs {gpu_count(need)}; {q.kind} {q.name} holds {gpus(held)} of its limit of "
            f"{gpus(q.limit)} ({gpus(held + need)} with it){note}"
        ),
    )


def beyond_deserved(chain: Iterable[Queue], need: float) -> Queue | None:
    """The first queue of ``chain`` whose deserved quota a non-preemptible ask of ``need``
    exceeds on its own: it never starts there whatever runs, so that queue is the reason
    to name (both engines), not a limit or a deserved quota other work fills today."""
    return next((q for q in chain if need > q.deserved), None)


def non_preemptible_over_deserved(q: Queue, held_np: float, need: float, note: str = "") -> Reason:
    return Reason(
        code=ReasonCode.NON_PREEMPTIBLE_OVER_DESERVED,
        message=(
            f"non-preemptible, needs {gpu_count(need)}; the non-preemptible work of {q.kind} "
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
            f"needs {gpu_count(need)}; per-GPU-type quota: "
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
    down: tuple[int, int] = (0, 0),
) -> Reason:
    """Why a gang of ``count`` x ``per_replica`` GPUs found no place in ``pool_keys``;
    ``down``: the nodes there that take no work now, and their GPUs. (Reasons are frozen:
    thousands of waiting jobs of one shape share one.)"""
    return _no_room(
        count, per_replica, tuple(pool_keys), total, largest, gang_would_fit_in_total, down
    )


@lru_cache(maxsize=4096)
def _no_room(
    count: int,
    per_replica: int,
    pool_keys: tuple[PoolKey, ...],
    total: int,
    largest: int,
    gang_would_fit_in_total: bool,
    down: tuple[int, int],
) -> Reason:
    names = pools(pool_keys)
    nodes, gpus = down
    idle = (
        f"; {nodes} node{'s' if nodes != 1 else ''} ({gpus} GPUs) there "
        f"{'takes' if nodes == 1 else 'take'} no work now (down, drained or reserved)"
        if nodes
        else ""
    )
    if count > 1 and gang_would_fit_in_total:
        return Reason(
            code=ReasonCode.GANG_UNPLACEABLE,
            message=(
                f"gang of {shape(count, per_replica)} must start at once in one pool; {total} GPUs "
                f"are free in {names} but not room for {count} replicas of {per_replica} GPUs"
                + idle
            ),
        )
    return Reason(
        code=ReasonCode.NO_CAPACITY,
        message=(
            f"needs {shape(count, per_replica)}; eligible pools {names} have {total} free "
            f"(largest block {largest} on one node)" + idle
        ),
    )


def unmovable_wait(no_room: Reason, per_replica: int, count: int, fits: int, held: int) -> Reason:
    """``no_room``, and that no eviction could make room for the job's shape: with every
    preemptible job of its pools gone, ``fits`` of its ``count`` replicas would fit in one
    pool at most; work no step evicts holds ``held`` GPUs on those nodes."""
    room = (
        f"no node there would have room for a replica of {per_replica} GPUs"
        if fits == 0
        else f"only {fits} of its {count} replicas of {per_replica} GPUs would fit in one pool"
    )
    return Reason(
        code=no_room.code,
        message=(
            f"{no_room.message}; even with every preemptible job of its pools evicted, {room}: "
            "work no eviction frees (non-preemptible work, jobs the cluster refused to evict "
            f"lately, jobs not ours) holds {held} GPUs on those nodes"
        ),
    )


def ending(job: str | None, why: str | None) -> Reason:
    """A workload whose job winds down (COMPLETING) and that nothing in the plan replaces:
    what it comes to is known once the job has ended."""
    return Reason(
        code=ReasonCode.ENDING,
        message=(
            f"job {job} winds down ({why or 'COMPLETING'}); the next plan sees how it ended "
            "and starts it again if it did not complete"
        ),
    )


def leaving_wait(no_room: Reason, held: int, leaving: list[tuple[str | None, str]]) -> Reason:
    """A wait for room that work on its way out causes: ``leaving`` (job id, workload)
    holds ``held`` GPUs the job would start on once it has ended."""
    names = ", ".join(f"job {j} of {w}" if j else w for j, w in leaving)
    return Reason(
        code=no_room.code,
        message=(
            f"{no_room.message}; {gpu_count(held)} there are held by work winding down "
            f"({names}), free once it has ended"
        ),
    )


def at_fair_share(no_room: Reason, q: Queue, held: float, fair: float) -> Reason:
    """A wait for room (``no_room``) that the project's past usage causes: its fair share,
    bent down by that usage, leaves it nothing to take back (reclaim is for projects within
    theirs)."""
    return Reason(
        code=ReasonCode.FAIRSHARE,
        message=(
            f"{no_room.message}; {q.kind} {q.name} holds {gpu_count(held)}, and its fair "
            f"share is {gpus(fair)}, bent down by its past usage (fairshare): it takes no GPUs "
            "back while other projects are further below their fair share"
        ),
    )


@lru_cache(maxsize=4096)
def beyond_fair_share(no_room: Reason, kind: str, name: str, would: float, fair: float) -> Reason:
    """A wait for room (``no_room``) of work that would take its project beyond its fair
    share: reclaim takes nothing back for it (a victim of an earlier reclaim, typically)."""
    return Reason(
        code=no_room.code,
        message=(
            f"{no_room.message}; {kind} {name} would hold {gpu_count(would)} with it, above its "
            f"fair share {gpus(fair)}: GPUs are reclaimed only for work within fair share"
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
            f"needs {gpu_count(need)}, held by work too young to take back: " + "; ".join(parts)
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


def walltime_exceeds_cluster(
    walltime: int, pools: Sequence[tuple[tuple[str, str], str | None, int]]
) -> Reason:
    """Every pool that could hold the work has a shorter time limit on its cluster (a
    Slurm partition's MaxTime): submitted, it would wait there for ever."""
    where = ", ".join(
        f"{cluster}/{pool}"
        + (f" (partition {partition})" if partition else "")
        + f" {format_duration(limit)}"
        for (cluster, pool), partition, limit in pools
    )
    return Reason(
        code=ReasonCode.WALLTIME_EXCEEDS_LIMIT,
        message=(
            f"walltime {format_duration(walltime)} is longer than the time limit the "
            f"cluster sets on every pool that could hold it: {where}; shorten it "
            "(checkpoint segments split it) or ask for a longer MaxTime"
        ),
    )


def partition_missing(pool: PoolKey, partition: str, has: Sequence[str]) -> Reason:
    """A pool whose partition its cluster does not have (a typo in the specs)."""
    cluster = pool[0]
    return Reason(
        code=ReasonCode.NO_ELIGIBLE_POOL,
        message=(
            f"pool {cluster}/{pool[1]} asks for partition {partition}, which cluster {cluster} "
            f"does not have (it has {', '.join(has)}): fix the pool's partition in the specs"
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
            f"project {project} used {_hours(used)} of its {_hours(budget)} GPU-hours for "
            f"{month}; new work waits for next month's budget"
        ),
    )


def not_grown(why: Reason, runs: int, wants: int) -> Reason:
    """Running elastic work that ``why`` keeps below its replicas (a replica added is new
    work)."""
    return Reason(code=why.code, message=f"runs {runs} of its {wants} replicas: {why.message}")


def _hours(value: float) -> str:
    """Whole hours from 10 up; below, as many digits as show it (0.4, 0.05), not 0."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


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
    state: JobState | None,
    exit_code: str | None,
    ended_at: datetime,
    streak: int,
    retry_at: datetime,
    backoff: int,
) -> Reason:
    """A workload whose latest job failed (``state``: FAILED, NODE_FAIL, or TIMEOUT, when it
    ran out of its walltime) waits out its retry backoff."""
    return Reason(
        code=ReasonCode.FAILED,
        message=(
            f"{_failure(job, state, exit_code, ended_at, streak)}; retried after "
            f"{stamp(retry_at)} (backoff {format_duration(backoff)})"
        ),
    )


def retry(
    start: Reason,
    job: str,
    state: JobState | None,
    exit_code: str | None,
    ended_at: datetime,
    streak: int,
) -> Reason:
    """The reason of a start that retries a failed job (its backoff over, or none)."""
    failure = _failure(job, state, exit_code, ended_at, streak)
    return start.model_copy(update={"message": f"{start.message}; a retry: {failure}"})


def _failure(
    job: str, state: JobState | None, exit_code: str | None, ended_at: datetime, streak: int
) -> str:
    exit_info = f"exit {exit_code}" if exit_code else ""
    if state == JobState.TIMEOUT:
        how = f"ran out of its walltime (TIMEOUT{', ' + exit_info if exit_info else ''})"
    else:
        detail = ", ".join(x for x in ("NODE_FAIL" * (state == JobState.NODE_FAIL), exit_info) if x)
        how = f"failed ({detail})" if detail else "failed"
    return f"job {job} {how} at {stamp(ended_at)}, the {ordinal(streak)} failure in a row"


def submitted(job: str | None, cluster_reason: str | None) -> Reason:
    """A job waiting in its cluster's queue (``job`` None: the one this plan submits)."""
    where = f" ({cluster_reason})" if cluster_reason else ""
    which = f"job {job}" if job is not None else "the job this plan submits"
    return Reason(
        code=ReasonCode.SUBMITTED, message=f"{which} waits in the cluster's own queue{where}"
    )


def also_submitted_to(waiting: Reason, clusters: Sequence[str]) -> Reason:
    """Fan-out candidates waiting in the clusters' queues (``waiting``), and one submitted
    to ``clusters`` too, which do not answer."""
    return Reason(
        code=waiting.code,
        message=(
            f"{waiting.message}; and one submitted to {', '.join(clusters)}, which does not "
            "answer (it may have started there)"
        ),
    )


def candidates_waiting(jobs: Sequence[tuple[str | None, str | None, str | None]]) -> Reason:
    """Fan-out candidates in the clusters' queues: (job id, candidate name, cluster's
    reason); a job id None is a candidate this plan submits."""
    listed = ", ".join(
        f"job {job} ({', '.join(filter(None, [name, why]))})"
        if job is not None
        else f"{name or 'a candidate'} (this plan submits it)"
        for job, name, why in jobs
    )
    return Reason(
        code=ReasonCode.SUBMITTED,
        message=(
            f"{len(jobs)} fan-out candidate(s) wait in the clusters' queues: {listed}; the first to "
            "run wins"
        ),
    )


def cluster_unreachable(clusters: Sequence[str], kind: str = "held") -> Reason:
    """A workload waiting for clusters that did not answer: ``held``, it may run there;
    ``stranded``, it may run only there (and was never submitted there); ``gone``, it left
    the specs while its job there ran. The clusters' errors are the plan's
    (``unreachable``), said once there, not again for every workload."""
    one = len(clusters) == 1
    names = ", ".join(sorted(clusters))
    until = "it answers" if one else "they answer"
    why = {
        "held": "the workload may run there, so it is neither started elsewhere nor stopped, "
        f"and its GPUs count as in use, until {until}",
        "stranded": f"the workload may run only there, so it waits until {until}",
        "gone": "the workload left the specs, but its job there was running when last seen: "
        f"it is pruned once {until}, and its GPUs count as in use until then",
    }[kind]
    return Reason(
        code=ReasonCode.CLUSTER_UNREACHABLE,
        message=(
            f"cluster{'' if one else 's'} {names} did not answer (the error is among the "
            f"plan's unreachable clusters); {why}"
        ),
    )
