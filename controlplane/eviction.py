"""What could take a running workload's GPUs, and what protects it (``cp explain``).

"Running as specified" does not tell the owner of a long training run whether it is
safe. The scheduling rules do (shared/conformance/README.md, solvers/kai/):

- non-preemptible work is never reclaimed or preempted (it runs within deserved quota on
  every level); only leaving the specs or a changed spec stops it;
- reclaim: work of another part of the tree takes GPUs back from a level of this
  workload's chain (its project, then each department above it) that holds more than it
  deserves (or than its fair share); the reclaimers are the projects under that level's
  siblings, first of all those with deserved quota they are not using;
- preemption: work of the same project with a strictly higher priority;
- consolidation may move it (its job restarts elsewhere) so that a gang fits;
- an elastic workload may shrink to ``minReplicas`` first;
- the project's ``minRuntime`` protects it from reclaim and preemption (not from
  consolidation) until that long after its start.

Pure: read off the specs, the snapshot and the plan made for it; nothing is solved again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from controlplane.plan import Plan, QueueStatus, shrinks
from solvers.order import last_completed
from solvers.reasons import gpus as n
from solvers.segments import progress_from_jobs, segments_of
from specs.actions import ReasonCode
from specs.desired import DesiredState
from specs.durations import format_duration
from specs.fit import shortfalls
from specs.models import Workload
from specs.snapshot import Job, Snapshot


@dataclass(frozen=True)
class RunningJob:
    cluster: str
    id: str
    state: str
    nodes: list[str]
    gpus: int
    started_at: datetime | None


@dataclass(frozen=True)
class Threat:
    kind: str  # reclaim | priority | consolidate | shrink | none
    message: str
    by: list[str]  # the projects (reclaim) or workloads (priority) that could do it
    waiting: list[str]  # of those, the ones with work waiting now


@dataclass(frozen=True)
class Exposure:
    workload: str
    jobs: list[RunningJob]
    segment: str | None  # "segment 3: 16h of 24h done" for checkpointed work
    preemptible: bool
    min_runtime_ends: datetime | None
    protected: bool  # minRuntime still holds at the plan's time
    threats: list[Threat]


def _hourly(desired: DesiredState) -> Callable[[str, Job], float]:
    """What a job costs an hour, its GPUs at their type's price on its cluster."""
    prices = desired.gpu_prices()
    return lambda cluster, job: job.gpus * prices.get((cluster, job.gpu_type or ""), 0.0)


def exposure(desired: DesiredState, snapshot: Snapshot, plan: Plan, key: str) -> Exposure | None:
    """Who could evict workload ``key``; None when no job of it holds GPUs."""
    workload = desired.workloads[key]
    spec = workload.spec
    held = [(c, j) for c, j in snapshot.jobs_of(key) if j.state.holds_gpus]
    if not held:
        return None
    jobs = [
        RunningJob(
            cluster=c,
            id=j.id,
            state=j.state.value,
            nodes=sorted({r.node for r in j.replicas if r.node}),
            gpus=j.gpus,
            started_at=j.started_at,
        )
        for c, j in sorted(held, key=lambda cj: cj[1].id)
    ]
    progress = next((p for p in snapshot.progress if p.workload == key), None)
    seg = segments_of(
        spec, progress or progress_from_jobs(key, snapshot.jobs_of(key), _hourly(desired))
    )
    now = plan.created_at
    project = desired.projects.get(spec.project)
    min_runtime = project.spec.min_runtime if project is not None else None
    started = min((j.started_at for j in jobs if j.started_at), default=None)
    ends = (
        started + timedelta(seconds=min_runtime)
        if spec.is_preemptible and min_runtime and started is not None
        else None
    )
    return Exposure(
        workload=key,
        jobs=jobs,
        segment=seg.describe() if seg is not None else None,
        preemptible=spec.is_preemptible,
        min_runtime_ends=ends,
        protected=ends is not None and ends > now,
        threats=(
            _threats(
                desired,
                plan,
                key,
                sum(len(j.replicas) for _, j in held),
                _done(snapshot),
                {(c, j.pool) for c, j in held},
            )
            if spec.is_preemptible
            else [_never()]
        ),
    )


def _done(snapshot: Snapshot) -> set[str]:
    """Workloads whose last job completed and that run nothing now: they preempt nobody
    (they do not run again unless their spec is edited)."""
    jobs = [j for c in snapshot.clusters for j in c.jobs]
    active = {j.workload for j in jobs if j.state.active}
    return {k for k in last_completed(jobs) if k not in active}


# waiting reasons that taking GPUs from others could end (reclaim's business)
_WAITS_FOR_ROOM = frozenset(
    {
        ReasonCode.NO_CAPACITY,
        ReasonCode.GANG_UNPLACEABLE,
        ReasonCode.FAIRSHARE,
        ReasonCode.MIN_RUNTIME,
    }
)


def _may_use(desired: DesiredState, workload: Workload, where: set[tuple[str, str | None]]) -> bool:
    """Whether ``workload`` may run in one of the pools ``where`` (an unknown pool: it may):
    only then can it preempt what runs there."""
    for cluster_name, pool_name in where:
        cluster = desired.clusters.get(cluster_name)
        if cluster is None:
            return True
        pools = [p for p in cluster.spec.node_pools if p.name == pool_name]
        if not pools or not shortfalls(workload, cluster, pools[0]):
            return True
    return False


def _never() -> Threat:
    return Threat(
        "none",
        "non-preemptible: never reclaimed or preempted (it runs within deserved quota on "
        "every level); only removing it from the specs or changing its spec stops it",
        [],
        [],
    )


def _threats(
    desired: DesiredState,
    plan: Plan,
    key: str,
    running: int,
    done: set[str],
    where: set[tuple[str, str | None]],
) -> list[Threat]:
    """Who could take GPUs from workload ``key`` (``running`` replicas now, in the pools
    ``where``: (cluster, pool)), as the plan leaves the quotas (``done``: completed
    workloads, which run no more)."""
    spec = desired.workloads[key].spec
    waiting_workloads = {p.workload for p in plan.pending}
    for_room = {
        p.workload.split("/", 1)[0] for p in plan.pending if p.reason.code in _WAITS_FOR_ROOM
    }
    out: list[Threat] = []
    # what this plan does to it comes first: the quotas below are as the plan leaves them,
    # where a victim's project may be back within its deserved quota
    evicted = [a for a in plan.actions if a.workload == key and (a.op.evicts or shrinks(a))]
    for a in evicted:
        verb = "shrinks" if shrinks(a) else f"{a.op.value}s"
        out.append(
            Threat(a.reason.code.value, f"this plan {verb} it now: {a.reason.message}", [], [])
        )

    # reclaim: each level of the chain that holds more than it deserves
    chain: list[tuple[str, str, QueueStatus]] = plan.quota_chain(spec.project)
    over = [(k, name, q) for k, name, q in chain if q.allocated > q.deserved]
    for kind, name, q in over:
        reclaimers = _projects_beside(plan, kind, name, q.department)
        # who would now: below its fair share, with work that waits for room (not for
        # its limit, its budget or a deserved quota)
        waiting = [p for p in reclaimers if p in for_room and _below_share(plan, p)]
        hungry = [p for p in reclaimers if plan.projects[p].allocated < plan.projects[p].deserved]
        fair = f", above its fair share {n(q.fair_share)}" if q.allocated > q.fair_share else ""
        if kind == "department":
            who = "projects outside it"
        elif q.department is not None:
            who = f"other projects of department {q.department}"
        else:
            who = "other projects"
        below = ""
        if hungry:
            verb = "is below its" if len(hungry) == 1 else "are below their"
            below = f" ({', '.join(hungry)} {verb} deserved)"
        out.append(
            Threat(
                "reclaim",
                f"reclaim: {kind} {name} holds {n(q.allocated)} GPUs, "
                f"{n(q.allocated - q.deserved)} above its deserved {n(q.deserved)}{fair}; "
                + (
                    f"{who} may take GPUs back: {_when(plan, reclaimers)}{below}"
                    if reclaimers
                    else "no other project could reclaim them now"
                ),
                reclaimers,
                waiting,
            )
        )
    if not over and chain and not evicted:
        names = " and ".join(f"{k} {name}" for k, name, _ in chain)
        stay = "stays within its" if len(chain) == 1 else "stay within their"
        out.append(
            Threat(
                "reclaim",
                f"safe from reclaim while {names} {stay} deserved quota",
                [],
                [],
            )
        )

    # preemption: higher-priority work of the same project
    mine = spec.effective_priority
    higher = sorted(
        k
        for k, w in desired.workloads.items()
        if w.spec.project == spec.project
        and k != key
        and k not in done
        and w.spec.effective_priority > mine
        and _may_use(desired, w, where)
    )
    if higher:
        waiting = [k for k in higher if k in waiting_workloads]
        out.append(
            Threat(
                "priority",
                f"preemption: workloads of project {spec.project} with priority above {mine}: "
                + ", ".join(higher),
                higher,
                waiting,
            )
        )
    else:
        out.append(
            Threat(
                "priority",
                f"no workload of project {spec.project} outranks its priority {mine}",
                [],
                [],
            )
        )
    out.append(
        Threat(
            "consolidate",
            "consolidation may move it (its job restarts on other nodes) so that a waiting "
            "gang fits",
            [],
            [],
        )
    )
    least = spec.effective_min_replicas
    if least < spec.replicas:
        told = (
            f"elastic: it gives back replicas down to its minReplicas {least} before it is "
            f"evicted (it runs {running})"
            if running > least
            else f"elastic, but it runs {running} replica{'s' if running != 1 else ''}, not "
            f"above its minReplicas {least}: nothing to give back before it is evicted"
        )
        out.append(Threat("shrink", told, [], []))
    return out


def _when(plan: Plan, reclaimers: list[str]) -> str:
    """The reclaimers, those below their fair share (who may reclaim now) first: one above
    its fair share may reclaim only once it is below it again."""
    now = [p for p in reclaimers if _below_share(plan, p)]
    later = [p for p in reclaimers if p not in now]
    told = []
    if now:
        told.append(f"{', '.join(now)} now (below {_its(now)} fair share)")
    if later:
        told.append(f"{', '.join(later)} only once below {_its(later)} fair share")
    return "; ".join(told)


def _its(projects: list[str]) -> str:
    return "its" if len(projects) == 1 else "their"


def _below_share(plan: Plan, project: str) -> bool:
    q = plan.projects[project]
    return q.allocated < q.fair_share


def _projects_beside(plan: Plan, kind: str, name: str, parent: str | None) -> list[str]:
    """The projects under the siblings of queue ``kind name`` (same parent, or the top)."""
    siblings = [
        ("department", d) for d, q in plan.departments.items() if q.department == parent
    ] + [("project", p) for p, q in plan.projects.items() if q.department == parent]
    out: list[str] = []
    for k, sibling in siblings:
        if (k, sibling) == (kind, name):
            continue
        out += [sibling] if k == "project" else _projects_under(plan, sibling)
    return sorted(out)


def _projects_under(plan: Plan, department: str, seen: frozenset[str] = frozenset()) -> list[str]:
    if department in seen:
        return []
    out = [p for p, q in plan.projects.items() if q.department == department]
    for d, q in plan.departments.items():
        if q.department == department:
            out += _projects_under(plan, d, seen | {department})
    return out


def describe_protection(e: Exposure, now: datetime) -> str:
    if not e.preemptible:
        return "non-preemptible"
    if e.min_runtime_ends is None:
        return "no minRuntime: no protection after its start"
    left = int((e.min_runtime_ends - now).total_seconds())
    when = e.min_runtime_ends.isoformat()
    if left > 0:
        return f"protected by minRuntime until {when} ({format_duration(left)} from now)"
    return f"minRuntime ended at {when}: it may be reclaimed or preempted"
