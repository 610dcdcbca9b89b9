"""What there is, kubectl-style: workloads with their state, jobs, nodes, projects and
departments, read off the specs, an observation and the plan made for it (``cp get``).

A workload's state answers "is it running, and if not, will it?":

- ``running``: a job of it holds GPUs;
- ``ending``: its job winds down and none runs (``COMPLETING``: a replica failed, it was
  cancelled, it saves a checkpoint); it holds GPUs until it ends;
- ``submitted``: its job waits in the cluster's own queue (Slurm ``PENDING``);
- ``pending``: no job yet; it waits for GPUs (no capacity, gang shape, fair share), or the
  plan starts it (``next`` says ``submit``);
- ``blocked``: it waits for a reason more GPUs would not fix: a limit, the budget, no
  eligible pool, a walltime above the project's, non-preemptible work over deserved;
- ``failed``: its latest job failed and it waits out the retry backoff;
- ``completed``: it ran to completion.

Pure: data in, rows out; the command line renders them (controlplane/cli/views/get.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from controlplane.completions import EARLIER
from controlplane.plan import Plan, QueueStatus
from controlplane.reservations import Window, under_way, upcoming
from solvers.order import job_id_order
from specs.actions import Action, Op, Pending, Reason, ReasonCode
from specs.desired import DesiredState
from specs.models import total_quota
from specs.snapshot import Job, JobState, Snapshot

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.store.runs import Ended

STATES = ("running", "ending", "submitted", "pending", "blocked", "failed", "completed")

# waiting reasons that more free GPUs would not cure
_BLOCKING = {
    ReasonCode.OVER_LIMIT,
    ReasonCode.OVER_BUDGET,
    ReasonCode.NO_ELIGIBLE_POOL,
    ReasonCode.WALLTIME_EXCEEDS_LIMIT,
    ReasonCode.NON_PREEMPTIBLE_OVER_DESERVED,
}


@dataclass(frozen=True)
class WorkloadRow:
    name: str  # project/name
    project: str
    state: str  # one of STATES
    type: str
    priority: int
    preemptible: bool
    gpus: int  # GPUs it holds (running), ran with (completed), or asks at least (otherwise)
    cluster: str | None
    pool: str | None
    job: str | None
    nodes: list[str]
    since: datetime | None  # started (running), queued (waiting), ended (completed), or None
    reason: Reason | None  # why it waits, from the plan
    next: Action | None  # what the plan does to it


@dataclass(frozen=True)
class JobRow:
    id: str
    cluster: str
    workload: str | None  # None: not ours
    state: str
    gpus: int
    nodes: list[str]
    pool: str | None
    partition: str | None
    started_at: datetime | None
    submitted_at: datetime | None
    plan: str | None
    reason: str | None
    owner: str | None = None  # who a job that is not ours belongs to, when known
    ended_at: datetime | None = None  # an ended job's end


Ran = tuple[int, datetime, str | None]  # a run's GPUs, start and the plan that submitted it


@dataclass(frozen=True)
class NodeRow:
    name: str
    cluster: str
    pool: str | None
    gpu_type: str | None
    partition: str | None
    gpus: int
    used: int  # GPUs held by any job on it, ours or not
    state: str
    jobs: list[str]
    # its jobs hold more GPUs than it reports (``used`` > ``gpus``): one fell off the bus
    # under them, the device plugin restarted; nothing evicts them, so they keep all of it
    overcommitted: bool
    # a reservation (an announced maintenance) under way: it takes no new work, whatever
    # its state says (Slurm shows it idle); its work runs on
    reserved: bool = False
    # its windows not over yet, earliest first (controlplane/reservations.py)
    reservations: list[Window] = field(default_factory=list)


@dataclass(frozen=True)
class QueueRow:
    name: str
    kind: str  # project | department
    parent: str | None  # a project's department, a department's parent
    rank: int
    weight: float
    status: QueueStatus
    workloads: int  # workloads under it in the specs (departments: all their projects')


def workloads(
    desired: DesiredState,
    snapshot: Snapshot,
    plan: Plan,
    ran: Mapping[tuple[str, str], Ran] | None = None,
) -> list[WorkloadRow]:
    """Every workload of the specs with its state. ``ran``: as for :func:`jobs`, what a
    completed job the cluster forgot held (the GPUs shown are its job's, not its ask)."""
    actions: dict[str, Action] = {}
    for a in plan.actions:  # the first action on a workload is the one that matters most
        actions.setdefault(a.workload, a)
    pending: dict[str, Pending] = {p.workload: p for p in plan.pending}
    queued = {q.workload: q.since for q in snapshot.queue}
    rows = []
    for key, wl in sorted(desired.workloads.items()):
        spec = wl.spec
        jobs = snapshot.jobs_of(key)
        holding = [(c, j) for c, j in jobs if j.state.holds_gpus]
        waiting = [(c, j) for c, j in jobs if j.state.active and not j.state.holds_gpus]
        why = pending.get(key)
        cluster: str | None = None
        job: Job | None = None
        if holding:
            running = [(c, j) for c, j in holding if j.state != JobState.COMPLETING]
            state = "running" if running else "ending"
            cluster, job = min(running or holding, key=lambda cj: cj[1].id)
        elif waiting:
            state, (cluster, job) = "submitted", min(waiting, key=lambda cj: cj[1].id)
        elif why is not None and why.reason.code == ReasonCode.FAILED:
            state = "failed"
        elif why is not None and why.reason.code in _BLOCKING:
            state = "blocked"
        elif (
            why is None
            and key not in actions
            and any(j.state.value == "COMPLETED" for _, j in jobs)
        ):
            state = "completed"  # the job that completed, since it ended
            cluster, job = max(
                ((c, j) for c, j in jobs if j.state.value == "COMPLETED"),
                key=lambda cj: job_id_order(cj[1].id),
            )
        else:
            state = "pending"
        step = actions.get(key)
        held = job.gpus if job is not None else 0
        if job is not None and cluster is not None and not job.replicas and ran:
            held = ran[cluster, job.id][0] if (cluster, job.id) in ran else 0
        shown = held > 0 and (bool(holding) or state == "completed")
        gpus = held if shown else spec.gpus * spec.effective_min_replicas
        if not shown and step is not None and step.op is Op.SUBMIT and step.replicas:
            gpus = sum(r.gpus for r in step.replicas)  # what the plan starts it with
        rows.append(
            WorkloadRow(
                name=key,
                project=spec.project,
                state=state,
                type=spec.type,
                priority=spec.effective_priority,
                preemptible=spec.is_preemptible,
                gpus=gpus,
                cluster=cluster or (step.cluster if step else None),
                pool=_pool(snapshot, cluster, job) or (step.pool if step else None),
                job=job.id if job is not None else None,
                nodes=sorted({r.node for r in job.replicas if r.node}) if job is not None else [],
                since=_since(state, job) if job is not None else queued.get(key),
                reason=why.reason if why is not None else None,
                next=step,
            )
        )
    return rows


def _since(state: str, job: Job) -> datetime | None:
    if state == "completed":
        return job.ended_at
    return job.started_at or job.submitted_at


def _pool(snapshot: Snapshot, cluster: str | None, job: Job | None) -> str | None:
    """The job's pool as reported, else that of the first node it runs on."""
    if job is None or job.pool is not None:
        return job.pool if job is not None else None
    state = snapshot.cluster(cluster) if cluster else None
    on = {r.node for r in job.replicas if r.node}
    return next((n.pool for n in state.nodes if n.name in on), None) if state else None


def jobs(snapshot: Snapshot, ran: Mapping[tuple[str, str], Ran] | None = None) -> list[JobRow]:
    """Every job the clusters show, ours and others', active or recently ended, by cluster
    and id (numbers in numeric order). ``ran``: (cluster, job) -> the GPUs, start and plan
    of its latest run, as the store keeps them, shown for an ended job the snapshot holds without
    its replicas (one the cluster forgot, remembered by the store; one known from the
    accounting alone)."""
    ran = ran or {}
    out = []
    for c in sorted(snapshot.clusters, key=lambda c: c.name):
        for j in sorted(c.jobs, key=_listed):
            gpus, started, plan = j.gpus, j.started_at, j.plan_id
            if not j.replicas and not j.state.active and (c.name, j.id) in ran:
                gpus, run_start, run_plan = ran[c.name, j.id]
                started, plan = started or run_start, plan or run_plan
            out.append(
                JobRow(
                    id=j.id,
                    cluster=c.name,
                    workload=j.workload,
                    state=j.state.value,
                    gpus=gpus,
                    nodes=sorted({r.node for r in j.replicas if r.node}),
                    pool=j.pool,
                    partition=j.partition,
                    started_at=started,
                    submitted_at=j.submitted_at,
                    plan=plan,
                    reason=j.reason,
                    owner=j.owner,
                    ended_at=j.ended_at,
                )
            )
    return out


def _listed(job: Job) -> tuple[tuple[int, int, str], bool]:
    """A job's place in a listing: by id, a remembered "ID (earlier)" just before ID."""
    return job_id_order(job.id.removesuffix(EARLIER)), not job.id.endswith(EARLIER)


def forgotten(snapshot: Snapshot) -> dict[tuple[str, str], Ended]:
    """The ended jobs the snapshot holds without their replicas, by (cluster, id), with
    what the store's runs are asked for them (:meth:`~controlplane.store.runs.Runs.last_runs`):
    the id the cluster gave (a remembered job whose id names another now is shown as
    "ID (earlier)"), its workload and its end."""
    return {
        (c.name, j.id): (c.name, j.id.removesuffix(EARLIER), j.workload, j.ended_at)
        for c in snapshot.clusters
        for j in c.jobs
        if not j.state.active and not j.replicas
    }


def nodes(snapshot: Snapshot, now: datetime | None = None) -> list[NodeRow]:
    """Every node the clusters report, with what its jobs hold and its reservations not
    over at ``now`` (default: the snapshot's)."""
    now = now or snapshot.now
    out = []
    for c in sorted(snapshot.clusters, key=lambda c: c.name):
        on: dict[str, list[tuple[str, int]]] = {}
        for j in c.jobs:
            if j.state.holds_gpus:
                for r in j.replicas:
                    if r.node:
                        on.setdefault(r.node, []).append((j.id, r.gpus))
        for n in sorted(c.nodes, key=lambda n: n.name):
            held = on.get(n.name, [])
            used = sum(g for _, g in held)
            out.append(
                NodeRow(
                    name=n.name,
                    cluster=c.name,
                    pool=n.pool,
                    gpu_type=n.gpu_type,
                    partition=n.partition,
                    gpus=n.gpus,
                    used=used,
                    state=n.state,
                    jobs=sorted({job for job, _ in held}),
                    overcommitted=used > n.gpus,
                    reserved=under_way(n, now),
                    reservations=upcoming(n, now),
                )
            )
    return out


def projects(desired: DesiredState, plan: Plan) -> list[QueueRow]:
    count: dict[str, int] = {}
    for wl in desired.workloads.values():
        count[wl.spec.project] = count.get(wl.spec.project, 0) + 1
    rows = []
    for name, project in sorted(desired.projects.items()):
        status = plan.projects.get(name)
        if status is None:
            continue
        rows.append(
            QueueRow(
                name=name,
                kind="project",
                parent=project.spec.department,
                rank=project.spec.rank,
                weight=total_quota(project.spec.quota).over_quota_weight,
                status=status,
                workloads=count.get(name, 0),
            )
        )
    return rows


def departments(desired: DesiredState, plan: Plan) -> list[QueueRow]:
    under: dict[str, int] = {}
    for row in projects(desired, plan):
        dept = row.parent
        seen: set[str] = set()
        while dept is not None and dept in desired.departments and dept not in seen:
            seen.add(dept)
            under[dept] = under.get(dept, 0) + row.workloads
            dept = desired.departments[dept].spec.parent
    rows = []
    for name, dept_spec in sorted(desired.departments.items()):
        status = plan.departments.get(name)
        if status is None:
            continue
        rows.append(
            QueueRow(
                name=name,
                kind="department",
                parent=dept_spec.spec.parent,
                rank=dept_spec.spec.rank,
                weight=total_quota(dept_spec.spec.quota).over_quota_weight,
                status=status,
                workloads=under.get(name, 0),
            )
        )
    return rows


def chain_of(desired: DesiredState, project: str) -> list[str]:
    """The departments above ``project``, nearest first."""
    out: list[str] = []
    p = desired.projects.get(project)
    dept = p.spec.department if p is not None else None
    while dept is not None and dept in desired.departments and dept not in out:
        out.append(dept)
        dept = desired.departments[dept].spec.parent
    return out
