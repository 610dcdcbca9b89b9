"""Raw Kubernetes objects (JSON, as listed) turned into the snapshot's Node and Job objects.

Nodes: a node belongs to the first spec pool (spec order) whose ``labels`` it carries —
on Kubernetes a pool's labels are its node selector; a cluster with a single pool without
labels takes every GPU node. Its GPUs are the allocatable count of the cluster's GPU
resource; a node that is cordoned or not Ready is reported ``drain`` (nothing new is
placed there, what runs is left alone); a node no pool selects keeps its GPU model label
as ``gpuType`` and is never planned on.

Jobs: one snapshot job per submission of ours (a batch/v1 Job and its pod, or the pods
of a gang), with one replica per pod; every other pod that is bound to a node and asks
for GPUs is a job with ``workload: null`` (its GPUs count as used, it is never touched).
Pure functions, so the mapping is tested without a server.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from adapters.kubernetes.identity import Identity, identity_of, replica_index
from specs.models import NodePool
from specs.snapshot import Job, JobState, Node, Replica

Obj = Mapping[str, Any]
# field selector: pods bound to a node that have not ended (they hold what they asked for)
BOUND_ACTIVE = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
_ENDED = ("Succeeded", "Failed")
_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9}


# ----------------------------------------------------------------------------- values


def quantity(text: str | int | None) -> int:
    """A resource quantity as a whole number (GPUs are whole): "8", "8000m", "1k"."""
    if text is None:
        return 0
    s = str(text).strip()
    try:
        if s.endswith("m"):
            return int(Decimal(s[:-1]) / 1000)
        for suffix, factor in _SUFFIX.items():
            if s.endswith(suffix):
                return int(Decimal(s[: -len(suffix)]) * factor)
        return int(Decimal(s))
    except InvalidOperation:
        return 0


def timestamp(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def pod_gpus(pod: Obj, resource: str) -> int:
    """GPUs a pod holds: the sum over its containers (limits, else requests), at least
    the largest init container's, as the scheduler and the kubelet count them."""
    spec = pod.get("spec") or {}

    def ask(c: Obj) -> int:
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        return quantity(limits.get(resource, requests.get(resource)))

    main = sum(ask(c) for c in spec.get("containers") or [])
    init = max((ask(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def holds(pod: Obj) -> bool:
    """Bound to a node and not ended: its resources are taken there (also while terminating)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and _phase(pod) not in _ENDED


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


# ----------------------------------------------------------------------------- nodes


def match_pool(pools: Sequence[NodePool], labels: Mapping[str, str]) -> NodePool | None:
    """The first pool (spec order) whose labels the node carries."""
    for pool in pools:
        if pool.labels and all(labels.get(k) == v for k, v in pool.labels.items()):
            return pool
    if len(pools) == 1 and not pools[0].labels:
        return pools[0]  # the one pool, without a selector: every GPU node
    return None


def _fenced(spec: Obj, resource: str) -> bool:
    """A taint that keeps other pods off the node (NoSchedule, NoExecute), other than the
    GPU resource's own (GPU nodes for GPU pods, which ours are). Our pods are bound by
    name: the scheduler, which would honour it, never sees them."""
    return any(
        t.get("effect") in ("NoSchedule", "NoExecute") and t.get("key") != resource
        for t in spec.get("taints") or []
    )


def build_nodes(
    nodes: Iterable[Obj],
    pods: Iterable[Obj],
    pools: Sequence[NodePool],
    *,
    resource: str,
    type_label: str,
) -> list[Node]:
    """GPU nodes (and nodes a pool selects), their state from readiness and GPU use."""
    used: dict[str, int] = {}
    for p in pods:
        if holds(p):
            node = p["spec"]["nodeName"]
            used[node] = used.get(node, 0) + pod_gpus(p, resource)
    out = []
    for n in nodes:
        meta, status = n.get("metadata") or {}, n.get("status") or {}
        labels = meta.get("labels") or {}
        gpus = quantity((status.get("allocatable") or {}).get(resource))
        selected = [
            p for p in pools if p.labels and all(labels.get(k) == v for k, v in p.labels.items())
        ]
        if not gpus and not selected:
            continue
        pool = match_pool(pools, labels)
        name = meta["name"]
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        spec = n.get("spec") or {}
        if spec.get("unschedulable") or not ready or _fenced(spec, resource):
            state = "drain"
        else:
            u = used.get(name, 0)
            state = "idle" if u == 0 else "allocated" if u >= gpus else "mixed"
        out.append(
            Node(
                name=name,
                pool=pool.name if pool else None,
                gpu_type=pool.gpu_type if pool else labels.get(type_label),
                gpus=gpus,
                state=state,
            )
        )
    return sorted(out, key=lambda n: n.name)


# ----------------------------------------------------------------------------- jobs


def foreign_job(pod: Obj, resource: str) -> Job | None:
    """Somebody else's pod, if it holds GPUs on a node."""
    gpus = pod_gpus(pod, resource)
    if not gpus or not holds(pod):
        return None
    meta, status = pod["metadata"], pod.get("status") or {}
    owners = meta.get("ownerReferences") or []
    owner = f"{owners[0].get('kind')}/{owners[0].get('name')}" if owners else None
    return Job(
        id=f"{meta['namespace']}/{meta['name']}",
        workload=None,
        state=JobState.COMPLETING if meta.get("deletionTimestamp") else JobState.RUNNING,
        submitted_at=timestamp(meta.get("creationTimestamp")),
        started_at=timestamp(status.get("startTime")),
        replicas=[Replica(node=pod["spec"]["nodeName"], gpus=gpus)],
        owner=owner or "Pod",
    )


def our_jobs(
    pods: Iterable[Obj], jobs: Iterable[Obj], resource: str, nodes: Collection[str] | None = None
) -> list[Job]:
    """One snapshot job per submission of ours: its pods grouped, with its batch/v1 Job.
    ``nodes``: every node the cluster has; a submission bound to another waits."""
    groups: dict[tuple[str, str], tuple[Identity, list[Obj], Obj | None]] = {}
    for obj in jobs:
        ident = identity_of(obj.get("metadata") or {})
        if ident is not None:
            key = (obj["metadata"]["namespace"], ident.submission)
            groups[key] = (ident, [], obj)
    for p in pods:
        ident = identity_of(p.get("metadata") or {})
        if ident is None:
            continue
        key = (p["metadata"]["namespace"], ident.submission)
        first, members, k8s_job = groups.get(key, (ident, [], None))
        if k8s_job is None and (replica_index(p["metadata"]) or 0) == 0:
            first = ident  # replica 0 was made by the submit (later ones maybe by a resize)
        groups[key] = (first, [*members, p], k8s_job)
    out = [
        _where_gone(build_job(ns, ident, members, k8s_job, resource), nodes)
        for (ns, _), (ident, members, k8s_job) in groups.items()
    ]
    return sorted(out, key=lambda j: j.id)


def _where_gone(job: Job, nodes: Collection[str] | None) -> Job:
    """An active submission bound to a node the cluster no longer has (deleted under it:
    its Job's next pod, made from the template, is bound there too, Pending for ever)
    holds no GPUs anywhere: it waits, and the plan places the workload again."""
    if nodes is None or not job.state.active or job.state is JobState.COMPLETING:
        return job
    gone = sorted({r.node for r in job.replicas if r.node and r.node not in nodes})
    if not gone:
        return job
    return job.model_copy(
        update={
            "state": JobState.PENDING,
            "started_at": None,
            "reason": f"bound to {', '.join(gone)}, which the cluster no longer has",
        }
    )


def build_job(
    namespace: str, ident: Identity, pods: Sequence[Obj], k8s_job: Obj | None, resource: str
) -> Job:
    pods = sorted(pods, key=lambda p: (replica_index(p["metadata"]) or 0, p["metadata"]["name"]))
    state, reason, code = _state(pods, k8s_job)
    if pods:
        # an active submission: the pods still on the cluster (a failed gang member has
        # given its GPUs back); an ended one: every pod it had
        live = [p for p in pods if _phase(p) not in _ENDED] if state.active else list(pods)
        replicas = [_replica(p, resource) for p in live]
    else:  # a Job whose pod the job controller has not made yet (or already removed)
        template = ((k8s_job or {}).get("spec") or {}).get("template") or {}
        node = (template.get("spec") or {}).get("nodeName")
        replicas = [Replica(node=node, gpus=pod_gpus(template, resource))]
    starts = [t for p in pods if (t := timestamp((p.get("status") or {}).get("startTime")))]
    created = [
        timestamp(o["metadata"].get("creationTimestamp")) for o in [*pods, *filter(None, [k8s_job])]
    ]
    spec = ((k8s_job or (pods[0] if pods else {})).get("spec")) or {}
    pod_spec = (pods[0] if pods else (spec.get("template") or {})).get("spec") or {}
    request = ident.request or {}
    return Job(
        id=f"{namespace}/{ident.submission}",
        workload=ident.workload,
        state=state,
        submitted_at=min((c for c in created if c), default=None),
        started_at=min(starts, default=None) if state is not JobState.PENDING else None,
        replicas=replicas,
        plan_id=ident.plan_id,
        pool=ident.pool,
        gpu_type=request.get("gpuType"),
        walltime=spec.get("activeDeadlineSeconds"),
        reason=reason,
        ended_at=_ended_at(pods, k8s_job) if not state.active else None,
        exit_code=code,
        candidate=ident.candidate,
        # the workload spec it runs (the identity's digest is of the submit details)
        spec_digest=request.get("specDigest"),
        namespace=namespace,
        image=next((c.get("image") for c in pod_spec.get("containers") or []), None),
        failed_replicas=_failed_beside_live(pods) if state is JobState.COMPLETING else None,
    )


def _failed_beside_live(pods: Sequence[Obj]) -> int | None:
    """Pods of a gang that failed while others still run (and are not being deleted)."""
    live = [
        p for p in pods if _phase(p) not in _ENDED and not p["metadata"].get("deletionTimestamp")
    ]
    failed = sum(_phase(p) == "Failed" for p in pods)
    return failed if failed and live else None


def _replica(pod: Obj, resource: str) -> Replica:
    return Replica(node=(pod.get("spec") or {}).get("nodeName"), gpus=pod_gpus(pod, resource))


def _state(pods: Sequence[Obj], k8s_job: Obj | None) -> tuple[JobState, str | None, str | None]:
    """State, the cluster's reason (pending or failed), and an exit code if one failed."""
    active = [p for p in pods if _phase(p) not in _ENDED]
    failed = [p for p in pods if _phase(p) == "Failed"]
    deleting = bool(((k8s_job or {}).get("metadata") or {}).get("deletionTimestamp")) or any(
        p["metadata"].get("deletionTimestamp") for p in pods
    )
    condition = _job_condition(k8s_job)
    if active:
        if deleting:
            return JobState.COMPLETING, "being deleted", None
        if failed:  # a gang member died: the others still hold their GPUs until they end
            why, code = _failure(failed[0])
            return JobState.COMPLETING, f"replica failed ({why}); the others still run", code
        if any(_phase(p) == "Succeeded" for p in pods):  # one finished first: the gang ends
            return JobState.COMPLETING, "a replica finished; the others still run", None
        if all(holds(p) for p in active):
            return JobState.RUNNING, None, None
        return JobState.PENDING, _pending_reason(active), None
    if failed or condition == "Failed":
        why, code = _failure(failed[0]) if failed else (_job_reason(k8s_job) or "failed", None)
        timeout = "DeadlineExceeded" in why
        return (JobState.TIMEOUT if timeout else JobState.FAILED), why, code
    if pods or condition == "Complete":
        return JobState.COMPLETED, None, None
    if deleting:
        return JobState.CANCELLED, "deleted", None
    # a Job and no pod yet: the job controller is about to make it
    bound = bool(
        (((k8s_job or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeName")
    )
    return (JobState.RUNNING if bound else JobState.PENDING), None, None


def _job_condition(k8s_job: Obj | None) -> str | None:
    for c in ((k8s_job or {}).get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
            return str(c["type"])
    return None


def _job_reason(k8s_job: Obj | None) -> str | None:
    for c in ((k8s_job or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return f"{c.get('reason')}: {c.get('message')}"
    return None


def _failure(pod: Obj) -> tuple[str, str | None]:
    """Why a pod failed (the kubelet's reason, e.g. OutOfnvidia.com/gpu) and its exit code."""
    status = pod.get("status") or {}
    for c in status.get("containerStatuses") or []:
        term = (c.get("state") or {}).get("terminated")
        if term and term.get("exitCode"):
            why = status.get("reason") or term.get("reason") or "Error"
            return f"{why}: exit code {term['exitCode']}", str(term["exitCode"])
    reason = status.get("reason") or "Failed"
    message = status.get("message")
    return (f"{reason}: {message}" if message else reason), None


def _pending_reason(pods: Sequence[Obj]) -> str:
    for p in pods:
        for c in (p.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                return str(c.get("message") or c.get("reason") or "unschedulable")
    return "waiting for the scheduler"


def _ended_at(pods: Sequence[Obj], k8s_job: Obj | None) -> datetime | None:
    ends = []
    for p in pods:
        for c in (p.get("status") or {}).get("containerStatuses") or []:
            term = (c.get("state") or {}).get("terminated") or {}
            if t := timestamp(term.get("finishedAt")):
                ends.append(t)
    done = timestamp(((k8s_job or {}).get("status") or {}).get("completionTime"))
    return max(ends, default=done)
