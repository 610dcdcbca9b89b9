"""Drift: running work whose spec was edited after its job was submitted.

A GitOps tool acts on every change to the specs. A job carries the digest of the spec it
was made of, and the snapshot carries that version (``Snapshot.versions``, from the
store), so an edit is seen field by field (specs/diff.py) and sorted as Terraform sorts
a plan's changes:

- in place: what the running job already satisfies (priority, preemptible, a wider list
  of GPU types that still holds its pool) needs nothing; an elastic workload grows into
  new replicas through the allocator as usual, and one whose ``replicas`` went below what
  runs gives the extra replicas back here (a ``resize``);
- must be replaced: a change the job cannot follow (``gpus``, ``command``, ``image`` on
  Kubernetes, ``walltime``, ``checkpoint``; on Kubernetes also an image or namespace the job runs
  with that the specs no longer give it, through the cluster's default image or the
  project's namespace; a placement constraint its pool no longer meets; a node the
  Cluster spec removed, for a simulated cluster, whose hardware the spec is; a gang
  that needs more replicas than run, or a fixed gang given fewer: none of its replicas
  may stop while the others run) cancels the job and submits the new version. The
  new version is placed before anything else in the cycle, on the GPUs the old job
  leaves and whatever else is free, within the limits of its queues (and, if it is
  non-preemptible, their deserved quotas). Where it does not fit there, it waits in the
  cycle as a new job of its project and priority would, with its old job's GPUs free:
  the cycle's allocate, reclaim or preempt may place it (then the old job is cancelled),
  and if none does, the cycle runs again with the old version kept
  (controlplane/reconcile.py). Where nothing places it, or a preemptible job is still
  inside its project's ``minRuntime``, the old version keeps running, as the old shape,
  and the plan says why and until when.

Pure: the problem is changed in place for the cycle that follows (a replacement runs at
its new nodes with its new shape, the GPUs it leaves are free), and what must be said
about it is returned.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from solvers import reasons
from solvers.leaving import must_leave
from solvers.order import last_completed
from solvers.placement import FreeIndex
from solvers.problem import JobRequest, Problem, node_key
from solvers.problem.edits import edited_while_running, fields_of, forcing
from specs.actions import Reason
from specs.diff import Change, Scalar, changes, describe, show
from specs.kubernetes import Runs
from specs.models import WorkloadSpec
from specs.snapshot import Job, Snapshot


@dataclass(frozen=True)
class Replacement:
    """A running job to be cancelled for its workload's new version."""

    job_id: str
    cluster: str
    submit: Reason
    cancel: Reason
    # it checkpoints: cancelled now, with its grace to save; the new version starts in a
    # later plan, once it has ended (not beside it, before the checkpoint is written)
    saves_first: bool = False


@dataclass
class Drift:
    """What the edits to running work come to in this cycle."""

    replaced: dict[str, Replacement] = field(default_factory=dict)
    # workload -> (the replicas that ran before, why fewer now)
    shrunk: dict[str, tuple[list[str], Reason]] = field(default_factory=dict)
    waiting: dict[str, Reason] = field(default_factory=dict)  # the old version keeps running
    # of those: the GPUs their new version needs at least (what waits, in the quota table)
    needs: dict[str, float] = field(default_factory=dict)
    # replacements waiting in the cycle as new jobs, their old jobs' GPUs free: each is
    # replaced if the cycle places it (the caller checks, and runs the cycle again
    # with the others kept if it did not)
    trials: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Trial:
    """What a replacement that does not fit beside its old job needs to wait as a new job."""

    # tried in an earlier run of this cycle and not placed, and why (if known)
    kept: Mapping[str, Reason | None]
    since: Mapping[str, datetime]  # when each edit was first seen: its place in the queue
    saving: frozenset[str] = frozenset()  # workloads whose running job checkpoints


def reconcile_drift(
    problem: Problem,
    observed: Snapshot,
    specs: Mapping[str, WorkloadSpec],
    now: datetime,
    held: tuple[Mapping[str, float], Mapping[str, float]],
    kept: Mapping[str, Reason | None] | None = None,
    kube: Mapping[str, Runs] | None = None,
) -> Drift:
    """Sort every edit to a running workload into in place, shrink or replacement (module
    docstring), changing ``problem`` to match. ``held``: what each queue holds now, all
    work and non-preemptible (:func:`~solvers.problem.held_now`). ``kept``: replacements
    an earlier run of this cycle tried as new jobs and could not place. ``kube``: per
    Kubernetes cluster, its default image and each project's namespace there."""
    drift = Drift()
    running = {(c.name, j.id): j for c in observed.clusters for j in c.jobs if j.workload}
    # nodes a simulated cluster's spec removes or shrinks: what must leave them moves off
    leave = {
        c.name: must_leave(c) for c in observed.clusters if c.removed_nodes or c.shrinking_nodes
    }
    replace: list[tuple[JobRequest, Job, WorkloadSpec | None, reasons.Cause]] = []
    saving: set[str] = set()  # of those, workloads whose running job checkpoints
    flips: list[tuple[JobRequest, float, str]] = []  # made non-preemptible in place
    # only running work can have drifted: waiting work is built from the specs as they are
    for key in sorted(k for k, r in problem.jobs.items() if r.job_id is not None):
        req = problem.jobs[key]
        job = running.get((req.cluster or "", req.job_id or ""))
        if job is None or key not in specs:
            continue
        new = specs[key]
        old = (
            observed.versions.get(job.spec_digest or "") if job.spec_digest != new.digest else None
        )
        if old is None and job.spec_digest not in (None, new.digest):
            # left running as it runs, and counted so (not as the spec's new shape)
            _keep_old(drift, req, job, None, reasons.unknown_version(job.id))
            continue
        found = changes(old, new) if old is not None else []
        runs = (kube or {}).get(req.cluster or "")
        # what it runs is known: that, not the spec's past, counts; and off Kubernetes no
        # container runs it (the adapters there do not read spec.image)
        if job.image is not None or runs is None:
            found = [c for c in found if c[0] != "image"]
        else:
            found = _running_image(found, runs.image if runs is not None else None)
        found += _observed(job, new, runs)
        fields = fields_of(found)
        leaving = leave.get(req.cluster or "", {}).get(job.id, [])
        if req.fan_out:  # never replaced: the new version runs once this job has ended
            if _forcing(req, fields) or leaving:
                cause = reasons.Cause(
                    _described(found, old, new) if _forcing(req, fields) else "",
                    "; ".join(why for _, why in leaving),
                )
                drift.waiting[key] = reasons.fan_out_edited(job.id, cause)
            continue
        if req.ending and (job.spec_digest not in (None, new.digest) or found):
            # its job winds down (saving its checkpoint, its pods being deleted): the new
            # version starts once it has ended
            saves = (old or new).checkpoint is not None
            drift.waiting[key] = reasons.saves_first(job.id, saves=saves)
            drift.needs[key] = new.gpus * new.effective_min_replicas
            continue
        needed = _forcing(req, fields, old)
        if (needed or leaving) and req.refused is not None and req.refused_until is not None:
            why = reasons.replacement_refused(job.id, req.refused, req.refused_until)
            _keep_old(drift, req, job, old, why)  # its cancel would only fail again
            continue
        if needed or leaving:
            nodes = "; ".join(why for _, why in leaving)
            # the fields that need the new job, not edits the running job followed
            shown = [c for c in found if fields_of([c]) & needed] or found
            cause = reasons.Cause(_described(shown, old, new) if shown else "", nodes)
            replace.append((req, job, old, cause))
            if (old or new).checkpoint is not None:
                saving.add(key)
            continue
        if old is not None and old.is_preemptible and not new.is_preemptible:
            flips.append((req, sum(r.gpus for r in job.replicas), _described(found, old, new)))
        if len(req.placed) > req.replicas:
            drift.shrunk[key] = (
                list(req.placed),
                reasons.fewer_replicas(len(req.placed), req.replicas),
            )
            for n in req.placed[req.replicas :]:
                problem.nodes[n].used -= req.gpus
            req.placed = req.placed[: req.replicas]
    held = (held[0], _made_non_preemptible(problem, flips, held[1], drift))
    if replace:
        trial = Trial(kept or {}, observed.spec_since, frozenset(saving))
        _replace(problem, replace, now, drift, held, trial)
    return drift


def _made_non_preemptible(
    problem: Problem,
    flips: list[tuple[JobRequest, float, str]],
    held_np: Mapping[str, float],
    drift: Drift,
) -> dict[str, float]:
    """Running jobs edited to non-preemptible become so in workload order while their
    queues' non-preemptible work stays within deserved on every level (the rule a
    non-preemptible job starts by); the others stay preemptible, as they ran, and the plan
    says why. Returns the non-preemptible GPUs held per queue after that."""
    held = defaultdict(float, held_np)
    for req, gpus, _ in flips:  # counted as non-preemptible by held_now: not yet
        for qid in problem.chain(req.queue):
            held[qid] -= gpus
    for req, gpus, text in flips:
        over = next(
            (
                problem.queues[q]
                for q in problem.chain(req.queue)
                if held[q] + gpus > problem.queues[q].deserved
            ),
            None,
        )
        if over is None:
            for qid in problem.chain(req.queue):
                held[qid] += gpus
            continue
        req.preemptible = True
        drift.waiting[req.key] = reasons.stays_preemptible(
            text, over.kind, over.name, held[over.id] + gpus, over.deserved
        )
        drift.needs[req.key] = 0  # it waits for no GPUs: it holds them
    return held


def finished_edits(
    problem: Problem, observed: Snapshot, specs: Mapping[str, WorkloadSpec]
) -> dict[str, Reason]:
    """Completed workloads whose spec changed after their last job completed (known where
    the job carries its spec's digest): they do not run again, and the plan says so. (An
    edit made while the job ran, and the workload completed: the job followed it.)"""
    last = last_completed(j for c in observed.clusters for j in c.jobs)
    found: dict[str, Reason] = {}
    for key, job in sorted(last.items()):
        new = specs.get(key)
        if key not in problem.completed or new is None or job.spec_digest in (None, new.digest):
            continue
        if edited_while_running(job, new.digest, observed.spec_since.get(key)):
            continue  # and it completed all the same: the job followed the edit in place
        old = observed.versions.get(job.spec_digest or "")
        found_here = changes(old, new) if old is not None else []
        if old is not None and _renamed_only(found_here, problem):
            continue  # its project was renamed (renamedFrom since dropped): no edit
        found[key] = reasons.edited_after_completion(_described(found_here, old, new))
    return found


def _renamed_only(found: list[Change], problem: Problem) -> bool:
    """The one change is the project, and the old one is gone from the specs: a rename
    whose ``renamedFrom`` was dropped (a workload's key names its project, so only a
    rename relabels its job under the new one)."""
    return (
        len(found) == 1
        and found[0][0] == "project"
        and f"project:{found[0][1]}" not in problem.queues
    )


# fields whose default depends on others: an unset one is told by the value it stood for
_DEFAULTS: dict[str, Callable[[WorkloadSpec], Scalar]] = {
    "priority": lambda s: s.effective_priority,
    "preemptible": lambda s: s.is_preemptible,
    "minReplicas": lambda s: s.effective_min_replicas,
}


def _described(found: list[Change], old: WorkloadSpec | None, new: WorkloadSpec) -> str:
    """``gpus: 2 -> 4``, an unset field as ``default (50)`` where its default depends on
    the rest of the spec (``priority: default (50) -> 70``, not ``none -> 70``)."""
    if old is None:
        return describe(found)
    spelled = []
    for f, a, b in found:
        if f in _DEFAULTS:
            a = a if a is not None else f"default ({show(_DEFAULTS[f](old))})"
            b = b if b is not None else f"default ({show(_DEFAULTS[f](new))})"
        spelled.append((f, a, b))
    return describe(spelled)


def _running_image(found: list[Change], default: str | None) -> list[Change]:
    """An image change as the container sees it: none stands for the cluster's default, so
    writing the default down changes nothing (it restarted the job), and a change from it
    says what it was."""
    if default is None:
        return found
    out: list[Change] = []
    for f, a, b in found:
        if f == "image" and (a or default) == (b or default):
            continue
        if f == "image":
            a = a if a is not None else f"default ({default})"
            b = b if b is not None else f"default ({default})"
        out.append((f, a, b))
    return out


def _observed(job: Job, new: WorkloadSpec, runs: Runs | None) -> list[Change]:
    """Where and what the job runs (as observed) against what the specs now give it, for
    what the workload's spec does not hold: its project's namespace, the cluster's default
    image. Jobs observed without them (not on Kubernetes) have none."""
    if runs is None:
        return []
    out: list[Change] = []
    namespace = runs.namespaces.get(new.project)
    if job.namespace is not None and namespace is not None and job.namespace != namespace:
        out.append(("namespace", job.namespace, namespace))
    image = new.image or runs.image
    if job.image is not None and image is not None and job.image != image:
        out.append(("image", job.image, new.image or f"default ({image})"))
    return out


def _forcing(req: JobRequest, fields: set[str], old: WorkloadSpec | None = None) -> set[str]:
    """Of the edited ``fields``, those its running job cannot follow (a fixed gang given
    fewer replicas only where ``old``, the version it runs, is known)."""
    return forcing(
        fields,
        pool_qualifies=req.pool in req.pools,
        ran=len(req.placed),
        wanted=req.replicas,
        at_least=req.min_replicas,
        gang=old is not None and old.effective_min_replicas >= old.replicas,
    )


def _replace(
    problem: Problem,
    todo: list[tuple[JobRequest, Job, WorkloadSpec | None, reasons.Cause]],
    now: datetime,
    drift: Drift,
    held_now: tuple[Mapping[str, float], Mapping[str, float]],
    trial: Trial,
) -> None:
    """Each replacement in workload order, on the GPUs its old job leaves and what is free;
    where it does not fit there, it waits in the cycle as a new job would (``Trial``); the
    old version stays where the new one may not start."""
    distinct = frozenset(k for k, p in problem.pools.items() if p.one_replica_per_node)
    index = FreeIndex(
        problem.nodes, distinct, {k: p.max_walltime for k, p in problem.pools.items()}
    )
    held, held_np = defaultdict(float, held_now[0]), defaultdict(float, held_now[1])
    for req, job, old, cause in todo:
        spent = problem.spent.get(req.queue)
        if spent is not None and cause.fields:  # a new version is new work
            _keep_old(drift, req, job, old, reasons.change_over_budget(cause, spent))
            continue
        if req.preemptible and req.min_runtime and req.started_at is not None:
            until = req.started_at + timedelta(seconds=req.min_runtime)
            if now < until:
                waits = reasons.change_waits_for_min_runtime(cause, req.min_runtime, until)
                _keep_old(drift, req, job, old, waits)
                continue
        cluster = req.cluster or ""
        leaves = [(node_key(cluster, r.node), r.gpus) for r in job.replicas if r.node]
        # the new version starts as any new job of it does: an elastic one with its minimum
        before, after = sum(g for _, g in leaves), req.min_replicas * req.gpus
        why = _over_quota(problem, req, held, held_np, after - before)
        if why is not None:
            _keep_old(drift, req, job, old, reasons.change_does_not_fit(cause, why))
            continue
        if req.key in trial.kept:  # a cycle that tried it as a new job did not place it
            _keep_old(drift, req, job, old, reasons.change_not_placed(cause, trial.kept[req.key]))
            continue
        saves_first = req.key in trial.saving
        drift.replaced[req.key] = Replacement(
            job_id=job.id,
            cluster=cluster,
            submit=reasons.replacing(cause, job.id),
            cancel=reasons.replaced(cause),
            saves_first=saves_first,
        )
        if saves_first:  # placed as any replacement is, but only cancelled in this plan
            drift.waiting[req.key] = reasons.saves_first(job.id, cause)
            drift.needs[req.key] = req.min_replicas * req.gpus
        for n, g in leaves:
            if n in index.free:
                index.give(n, g)
        nodes = index.place_gang(req.pools, req.gpus, req.replicas, lasts=req.walltime)
        if nodes is None:
            for n, g in leaves:
                if n in index.free:
                    index.take(n, g)
            _try_as_new(problem, req, leaves, trial.since.get(req.key, now))
            drift.trials.add(req.key)
            continue
        for n, g in leaves:
            if n in problem.nodes:
                problem.nodes[n].used -= g
        for n in nodes:
            problem.nodes[n].used += req.gpus
        for q in problem.chain(req.queue):
            held[q] += after - before
            if not req.preemptible:
                held_np[q] += after - before
        pool = index.pool_of[nodes[0]]
        req.placed, req.pool, req.cluster, req.started_at = nodes, pool, pool[0], now


def _try_as_new(
    problem: Problem, req: JobRequest, leaves: list[tuple[str, int]], since: datetime
) -> None:
    """The new version as a new job would wait (queued since the edit was first seen),
    with the GPUs its old job holds free: the cycle's allocate, reclaim and preempt may
    place it; if none does, the cycle is run again with the old version kept."""
    for n, g in leaves:
        if n in problem.nodes:
            problem.nodes[n].used -= g
    req.job_id = req.cluster = req.pool = req.started_at = None
    req.placed = []
    req.created = since.astimezone(UTC)


def _keep_old(
    drift: Drift, req: JobRequest, job: Job, old: WorkloadSpec | None, why: Reason
) -> None:
    """The old version keeps running, and the new one waits: the request becomes the shape
    that runs (nothing grows, shrinks or moves it)."""
    drift.waiting[req.key] = why
    drift.needs[req.key] = req.min_replicas * req.gpus
    count = len(req.placed)
    if old is not None:
        req.gpus, req.walltime = old.gpus, old.walltime
    elif count:  # a version the store does not hold: what the job holds, per replica
        req.gpus = sum(r.gpus for r in job.replicas) // count
    req.replicas = req.min_replicas = count
    req.pools = [req.pool] if req.pool is not None else req.pools


def _over_quota(
    problem: Problem,
    req: JobRequest,
    held: Mapping[str, float],
    held_np: Mapping[str, float],
    more: float,
) -> str | None:
    """Why the new version would break a limit (or, non-preemptible, a deserved quota)."""
    for qid in problem.chain(req.queue):
        q = problem.queues[qid]
        if q.limit is not None and held[qid] + more > q.limit:
            return (
                f"would take {q.kind} {q.name} to {reasons.gpus(held[qid] + more)} GPUs, "
                f"above its limit of {reasons.gpus(q.limit)}"
            )
        if not req.preemptible and held_np[qid] + more > q.deserved:
            return (
                f"is non-preemptible and would take {q.kind} {q.name} to "
                f"{reasons.gpus(held_np[qid] + more)} such GPUs, above its deserved "
                f"{reasons.gpus(q.deserved)}"
            )
    return None
