"""Planning while a cluster does not answer: leave it, and what may run there, alone.

An observation that fails for one cluster (its adapter raised) reports that cluster
``reachable: false`` with the error and nothing else: its nodes and jobs are unknown.
Planning as if it were empty would be wrong twice over: a workload running there would
look like one that never started, and be submitted on another cluster (double), and our
jobs there would look gone. So, before the cycle:

1. A workload is *held* when it may be on an unreachable cluster — the cluster is one it
   may use (``clusters``, and a pool of a GPU type, size and memory it accepts), and the
   store knows it may have a job there (``last_known``: submitted and not seen starting,
   or running when last seen; a snapshot without a store says nothing, and then any
   workload that may use the cluster counts) — and it has no job on any cluster that did
   answer, and it has not completed. Work never submitted there is planned as usual: held,
   its stand-in would keep other work of its project out of the quota it fills, and the
   workload itself would wait for nothing.
2. Each held workload becomes a stand-in on its unreachable cluster: a running job of its
   full size on a node of its own that takes no work, and non-preemptible. So its GPUs
   count against every quota level and limit (as if it ran: the safe side), nothing is
   placed on that cluster, and no step picks it as a victim, moves or resizes it. On no
   pool, it has no GPU type: a per-type limit counts it where every pool its workload may
   use on the silent clusters has one type (solvers/problem/standins.py).
   Holds block new work; they do not evict: a stand-in may stand for work never submitted
   (a snapshot without ``last_known``) or long ended, so the cycle is told which jobs are
   stand-ins (:func:`stand_ins`, ``Problem.stand_ins``) and no running work is taken back
   for them. A queue above a limit gives back only what work the clusters show holds
   above it (solvers/kai/limits.py); a job whose limit they fill preempts and reclaims
   nothing; they never make their project a reclaim victim (solvers/kai/reclaim.py); and
   fair shares leave their demand out, as their cluster's GPUs are (solvers/session.py).
   A workload that left the specs while its job ran there (``last_known`` with the GPUs
   it held) is held the same way, under its project, until the cluster answers and the
   job can be pruned: its GPUs are still in use (``with_gone``).
3. After the cycle the plan lists each held workload as pending with reason
   ``cluster-unreachable`` (the cluster and its error), keeps no action on an unreachable
   cluster, and names the clusters in ``unreachable``.

A cluster removed from the specs while the store knows work of ours there is observed as
one that does not answer (:func:`removed`): its adapter settings went with its document.
A fan-out workload whose candidate ran on a silent cluster when last seen is held there,
and its candidates only queued elsewhere lose (step 8 cancels them).

Everything else is planned as usual on the clusters that answered. The observed digest of
an unreachable cluster is its name and the fact (specs/snapshot.py), so a plan made while
it was down is stale once it answers. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controlplane.inventory import chain_of
from solvers import reasons
from specs.actions import Action, Pending, ReasonCode
from specs.desired import DesiredState
from specs.models import Cluster, Workload
from specs.snapshot import ClusterState, Job, JobState, Node, Replica, Snapshot

STAND_IN = "unreachable:"  # the id a held workload's stand-in job runs under


def unreachable(observed: Snapshot) -> dict[str, str]:
    """Clusters that did not answer, with their error."""
    return {c.name: c.error or "unknown error" for c in observed.clusters if not c.reachable}


def removed(desired: DesiredState, known: set[str]) -> list[ClusterState]:
    """The clusters gone from the specs of those the store knows work of ours on
    (``known``): nothing can reach them, so they are as good as unreachable (what runs
    there is held, not started a second time elsewhere) until the Cluster is back or the
    store forgets them."""
    return [
        ClusterState(
            name=name,
            reachable=False,
            error=(
                "no longer in the specs, but the store knows work of ours there: it is held "
                "until the Cluster is back in the specs (a plan then stops what no workload "
                f"needs), or until `cp store forget-cluster {name}` says the cluster is gone"
            ),
        )
        for name in sorted(known - desired.clusters.keys())
    ]


def none_answered(unreachable: Mapping[str, str], desired: DesiredState) -> str | None:
    """ "no cluster answered (a, b)" when every cluster of the specs was silent: a plan
    then observed nothing, and must not read as "no changes" (to a CI job above all)."""
    if not unreachable or not set(unreachable) >= set(desired.clusters):
        return None
    return f"no cluster answered ({', '.join(sorted(unreachable))})"


def may_use(workload: Workload, cluster: Cluster) -> bool:
    """Could the workload have been placed on ``cluster`` (one of its pools suits it)?"""
    spec = workload.spec
    if spec.clusters is not None and cluster.metadata.name not in spec.clusters:
        return False
    for pool in cluster.spec.node_pools:
        gpu = cluster.spec.gpu_types.get(pool.gpu_type)
        if spec.gpu_types is not None and pool.gpu_type not in spec.gpu_types:
            continue
        if spec.min_gpu_memory_gib is not None and (
            gpu is None or gpu.memory_gib < spec.min_gpu_memory_gib
        ):
            continue
        if pool.gpus_per_node >= spec.gpus:
            return True
    return False


def held(desired: DesiredState, observed: Snapshot) -> dict[str, list[str]]:
    """Workloads that may run on an unreachable cluster: workload -> those clusters."""
    down = unreachable(observed)
    if not down:
        return {}
    seen = {c.name for c in observed.clusters if c.reachable}
    known = {
        c.name: None if c.last_known is None else {k.workload for k in c.last_known}
        for c in observed.clusters
        if not c.reachable
    }
    ran = {(c.name, k.workload) for c in observed.clusters for k in c.last_known or [] if k.running}
    out: dict[str, list[str]] = {}
    for key, wl in sorted(desired.workloads.items()):
        jobs = observed.jobs_of(key)
        won_there = [c for c in sorted(down) if (c, key) in ran]
        if (
            wl.spec.strategy is not None
            and wl.spec.strategy.fan_out
            and won_there
            and not any(j.state.holds_gpus and c in seen for c, j in jobs)
        ):
            # a fan-out candidate that ran on a silent cluster won: one only queued where we
            # can see lost (held, the workload's stand-in runs; the plan cancels the other)
            out[key] = won_there
            continue
        if any(j.state.active and c in seen for c, j in jobs):
            continue  # it runs (or waits) where we can see it
        if any(j.state == JobState.COMPLETED for _, j in jobs):
            continue
        where = [
            c
            for c in sorted(down)
            if _may_be_there(key, known[c])
            and (
                may_use(wl, desired.clusters[c])
                if c in desired.clusters
                else known[c] is not None  # removed from the specs: what the store knows
            )
        ]
        if where:
            out[key] = where
    return out


def _may_be_there(key: str, known: set[str] | None) -> bool:
    return known is None or key in known  # None: nothing known, so it may


def stranded(desired: DesiredState, observed: Snapshot, waiting: set[str]) -> dict[str, list[str]]:
    """Waiting workloads (not held) that may use only clusters that did not answer: they
    wait for those clusters, whatever else the plan found (workload -> the clusters)."""
    down = unreachable(observed)
    out: dict[str, list[str]] = {}
    for key in sorted(waiting & desired.workloads.keys()) if down else []:
        wl = desired.workloads[key]
        names = sorted(n for n, c in desired.clusters.items() if may_use(wl, c))
        if names and all(n in down for n in names):
            out[key] = names
    return out


def with_gone(
    desired: DesiredState, observed: Snapshot
) -> tuple[DesiredState, dict[str, list[str]]]:
    """The specs with the workloads that left them while their job ran on a cluster that
    did not answer (its ``last_known``): until it answers, such a job is neither pruned
    nor forgotten; it holds its GPUs under its project (if the project is still there), as
    a held workload's stand-in does. The specs for the cycle, and those workloads."""
    gone: dict[str, list[str]] = {}
    workloads = dict(desired.workloads)
    for c in observed.clusters:
        if c.reachable:
            continue
        for k in c.last_known or []:
            project, _, name = k.workload.partition("/")
            if k.gpus <= 0 or k.workload in workloads or project not in desired.projects:
                continue
            workloads[k.workload] = Workload.model_validate(
                {
                    "apiVersion": "controlplane/v1",
                    "kind": "Workload",
                    "metadata": {"name": name},
                    "spec": {
                        "project": project,
                        "gpus": k.gpus,
                        "command": ["true"],  # never run: it stands for a job seen there
                        "preemptible": False,
                        "clusters": [c.name],
                    },
                }
            )
            gone[k.workload] = [c.name]
    return (replace(desired, workloads=workloads), gone) if gone else (desired, {})


def stand_in(
    desired: DesiredState, observed: Snapshot, holds: dict[str, list[str]]
) -> tuple[DesiredState, Snapshot]:
    """The specs and snapshot a cycle plans with: held workloads as non-preemptible jobs
    running on nodes of their own (that take no work) on their first unreachable cluster."""
    if not holds:
        return desired, observed
    extra: dict[str, tuple[list[Node], list[Job]]] = {}
    for key, where in holds.items():
        spec = desired.workloads[key].spec
        node = Node(name=f"{STAND_IN}{key}", gpus=spec.gpus * spec.replicas, state="down")
        job = Job(
            id=f"{STAND_IN}{key}",
            workload=key,
            state=JobState.RUNNING,
            replicas=[Replica(node=node.name, gpus=spec.gpus) for _ in range(spec.replicas)],
            reason="its cluster did not answer",
        )
        nodes, jobs = extra.setdefault(where[0], ([], []))
        nodes.append(node)
        jobs.append(job)
    clusters = [
        c.model_copy(
            update={"nodes": [*c.nodes, *extra[c.name][0]], "jobs": [*c.jobs, *extra[c.name][1]]}
        )
        if c.name in extra
        else c
        for c in observed.clusters
    ]
    workloads = dict(desired.workloads)
    for key in holds:
        wl = workloads[key]
        workloads[key] = wl.model_copy(
            update={"spec": wl.spec.model_copy(update={"preemptible": False})}
        )
    return replace(desired, workloads=workloads), observed.model_copy(update={"clusters": clusters})


def stand_ins(world: Snapshot) -> frozenset[str]:
    """The workloads a cycle's world holds as stand-ins (:func:`stand_in`): the solvers
    count their GPUs against quotas and limits, and take no running work back for them.
    They stand on the clusters that did not answer: only those are looked through."""
    return frozenset(
        j.workload
        for c in world.clusters
        if not c.reachable
        for j in c.jobs
        if j.workload is not None and j.id.startswith(STAND_IN)
    )


def held_gpus(
    desired: DesiredState, holds: dict[str, list[str]]
) -> tuple[dict[str, float], dict[str, float]]:
    """GPUs of the held workloads (their full size, as their stand-ins hold) per project and
    per department above it: what of each queue's allocation is held, not seen."""
    projects: dict[str, float] = {}
    departments: dict[str, float] = {}
    for key in holds:
        spec = desired.workloads[key].spec
        size = float(spec.gpus * spec.replicas)
        projects[spec.project] = projects.get(spec.project, 0.0) + size
        for dept in chain_of(desired, spec.project):
            departments[dept] = departments.get(dept, 0.0) + size
    return projects, departments


def keep_away(actions: list[Action], observed: Snapshot) -> list[Action]:
    """No action on a cluster that did not answer (a safety net: stand-ins make none)."""
    down = unreachable(observed)
    return [a for a in actions if a.cluster not in down]


def with_silent_candidates(pending: list[Pending], observed: Snapshot) -> list[Pending]:
    """A workload waiting for its fan-out candidates in the clusters' queues that has one
    submitted to a cluster that does not answer too: its reason says so (that one may
    start as well, and win)."""
    silent: dict[str, list[str]] = {}
    for c in observed.clusters:
        if not c.reachable:
            for k in c.last_known or []:
                silent.setdefault(k.workload, []).append(c.name)
    return [
        Pending(workload=p.workload, reason=reasons.also_submitted_to(p.reason, silent[p.workload]))
        if p.workload in silent and p.reason.code is ReasonCode.SUBMITTED
        else p
        for p in pending
    ]


def pending(holds: dict[str, list[str]], kinds: dict[str, str]) -> list[Pending]:
    """The held workloads (key -> the clusters that did not answer) as waiting; ``kinds``
    says which are stranded or gone (the rest are held)."""
    return [
        Pending(workload=key, reason=reasons.cluster_unreachable(where, kinds.get(key, "held")))
        for key, where in sorted(holds.items())
    ]
