"""KubernetesAdapter: observe a cluster's GPU nodes and pods; carry out plan actions as objects.

How each action maps onto Kubernetes (and why):

``submit``
    Create the submission's objects in the project's namespace (made if missing): a
    batch/v1 Job for one replica, one pod per replica for a gang, bound to the nodes the
    plan chose (manifests.py), once those nodes have the GPUs free (room.py). Names are
    deterministic (identity.py), so a rerun of the same plan meets its own objects
    (409 AlreadyExists) and creates only what is missing: never a duplicate.
``preempt`` / ``cancel``
    Delete the submission: its Job with Foreground propagation (a Job deleted without a
    policy would orphan its pods), or each pod of a gang. A checkpointable workload's
    pods were created with its checkpoint grace as termination grace period and a preStop
    hook that sends the checkpoint signal, so deleting them *is* the signal; it resumes
    from its checkpoint when the reconciler submits it again (there is no requeue).
``resize``
    A gang grows or shrinks in place, down to one replica too: pods on nodes the plan no
    longer lists are deleted (where it has a choice, the highest index first: replica 0
    stays), pods for new places are created under new indices. Rerunning
    recomputes that difference, so it converges whatever step a crash interrupted.
``move`` (and a resize of a one-replica Job)
    A pod cannot change nodes: the old submission is deleted, then (once its GPUs are
    free) a new one is created under a name of this plan. Without submit details in the
    action they come from the old objects (their ``request`` annotation); if a crash
    happened between the two steps and the old objects are gone, the action fails with a
    PermanentError and the next plan submits the workload afresh (as on Slurm).

Every action on an existing submission reads it first: gone counts as done; an object
without our identity, or with another workload's, is refused (PermanentError).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from adapters.base import ActionResult, PermanentError, TemporaryError
from adapters.kubernetes import manifests
from adapters.kubernetes.api import KubeAPI, Obj, connect
from adapters.kubernetes.identity import (
    MANAGED,
    NOT_OURS,
    OURS,
    SUBMISSION,
    Identity,
    idempotency_key,
    identity_of,
    replica_index,
    submission_name,
)
from adapters.kubernetes.observation import BOUND_ACTIVE, build_nodes, foreign_job, our_jobs
from adapters.kubernetes.request import PodRequest, build_request
from adapters.kubernetes.room import Room
from specs.actions import Action, Op
from specs.models import Cluster
from specs.reach import KubernetesSettings
from specs.snapshot import ClusterState


@dataclass
class Submission:
    """The objects of one submission of ours, as read from the API server."""

    namespace: str
    name: str
    identity: Identity
    job: Obj | None  # the batch/v1 Job, for a one-replica submission
    pods: list[Obj]

    @property
    def id(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def live_pods(self) -> list[Obj]:
        """Pods not already being deleted."""
        return [p for p in self.pods if not p["metadata"].get("deletionTimestamp")]


class KubernetesAdapter:
    """One Kubernetes cluster of the specs. ``namespaces``: projects that name their own
    namespace (Project spec.namespace). Not thread-safe: one apply drives one adapter."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        namespaces: Mapping[str, str] | None = None,
        api: KubeAPI | None = None,
        room_timeout: float = 120.0,
    ) -> None:
        self.spec = cluster
        self.cluster = cluster.metadata.name
        self.settings = cluster.spec.kubernetes or KubernetesSettings()
        self.api = api or KubeAPI(lambda: connect(self.settings))
        self.namespaces = dict(namespaces or {})
        self.room = Room(self.api, self.settings.gpu_resource, timeout=room_timeout)
        self._made: set[str] = set()  # namespaces known to exist
        self._rights: dict[tuple[str, str, str | None], bool] = {}  # the API server's answers

    # ------------------------------------------------------------------- observe

    def observe(self) -> ClusterState:
        """GPU nodes, every submission of ours (ended ones too, while their objects
        exist), and every other pod that holds GPUs on a node."""
        resource = self.settings.gpu_resource
        nodes = self.api.nodes()
        ours: list[Obj] = []
        others = self.api.pods(label_selector=NOT_OURS, field_selector=BOUND_ACTIVE)
        for pod in self.api.pods(label_selector=OURS):
            # the label without the rest of our identity is somebody else's pod all the same
            (ours if identity_of(pod.get("metadata") or {}) else others).append(pod)
        k8s_jobs = self.api.jobs(label_selector=OURS)
        foreign = [j for p in others if (j := foreign_job(p, resource)) is not None]
        return ClusterState(
            name=self.cluster,
            nodes=build_nodes(
                nodes,
                [*ours, *others],
                self.spec.spec.node_pools,
                resource=resource,
                type_label=self.settings.gpu_type_label,
            ),
            jobs=[
                *our_jobs(ours, k8s_jobs, resource, {n["metadata"]["name"] for n in nodes}),
                *sorted(foreign, key=lambda j: j.id),
            ],
        )

    # ------------------------------------------------------------------- preflight

    def preflight(self, actions: Sequence[Action]) -> None:
        """Before any of ``actions`` runs: the rights each needs, asked of the API server
        (create and delete in its project's namespace). Any missing: a PermanentError
        naming them all, so that an apply does not evict work for a submit that would then
        be refused."""
        needs: set[tuple[str, str, str]] = set()
        for a in actions:
            project = a.workload.partition("/")[0]
            new = self.settings.namespace_for(project, self.namespaces.get(project))
            old = (a.job or "").partition("/")[0] if a.job and "/" in a.job else new
            verbs = {
                Op.SUBMIT: [("create", new)],
                Op.CANCEL: [("delete", old)],
                Op.PREEMPT: [("delete", old)],
            }.get(a.op, [("create", new), ("delete", old)])
            needs |= {(v, r, ns) for v, ns in verbs for r in ("pods", "jobs.batch")}
        missing = [
            f"{v} {r} in namespace {ns}" for v, r, ns in sorted(needs) if not self._may(v, r, ns)
        ]
        # a create in a namespace not there yet makes it first (a new project's)
        for ns in sorted({ns for v, _, ns in needs if v == "create"}):
            if not self._may("get", "namespaces", None):
                missing.append("get namespaces")
                break
            if ns in self._made or self.api.has_namespace(ns):
                self._made.add(ns)
            elif not self._may("create", "namespaces", None):
                missing.append(f"create namespaces ({ns} does not exist yet)")
        if missing:
            raise PermanentError(
                f"these credentials may not {'; '.join(missing)}: nothing was done on "
                f"cluster {self.cluster} (grant them as examples/kubernetes/rbac.yaml shows)"
            )

    def _may(self, verb: str, resource: str, namespace: str | None) -> bool:
        known = self._rights.get((verb, resource, namespace))
        if known is None:
            known = self._rights[verb, resource, namespace] = self.api.may(
                verb, resource, namespace
            )
        return known

    # ------------------------------------------------------------------- execute

    def execute(self, action: Action, *, plan_id: str) -> ActionResult:
        if action.cluster != self.cluster:
            raise PermanentError(
                f"action for cluster {action.cluster!r} sent to adapter of {self.cluster!r}"
            )
        if action.op is Op.SUBMIT:
            return self._create(self.request(action, plan_id))
        if action.op in (Op.CANCEL, Op.PREEMPT):
            return self._remove(action)
        if action.op is Op.RESIZE:
            return self._resize(action, plan_id)
        if action.op is Op.MOVE:
            return self._replace(action, plan_id)
        raise PermanentError(f"the Kubernetes adapter cannot {action.op}")

    def request(
        self,
        action: Action,
        plan_id: str,
        *,
        stored: Mapping[str, object] | None = None,
        name: str | None = None,
    ) -> PodRequest:
        return build_request(
            action,
            plan_id,
            settings=self.settings,
            pools=self.spec.spec.node_pools,
            namespaces=self.namespaces,
            stored=stored,
            name=name,
        )

    def _create(self, req: PodRequest) -> ActionResult:
        """Create ``req``'s objects, skipping those that exist already."""
        self._namespace(req.namespace)
        self.room.reserve(req)
        made = 0
        for body in manifests.objects(req):
            if self.api.create(body):
                made += 1
            else:
                self._ours_already(body, req)
        if not made:
            return ActionResult(
                ok=True, job=req.job_id, message=f"already submitted as {req.job_id}"
            )
        kind = f"{len(req.nodes)} pods" if req.gang else "job"
        return ActionResult(ok=True, job=req.job_id, message=f"created {kind} {req.job_id}")

    def _ours_already(self, body: Obj, req: PodRequest) -> None:
        """A create answered AlreadyExists: the object of that name must be this
        submission's (a rerun). The name is derived from the plan id, which anybody may
        read in a saved plan: an object of it without our identity is not taken for ours."""
        meta = body["metadata"]
        where, kind = f"{meta['namespace']}/{meta['name']}", body["kind"]
        read = self.api.job if kind == "Job" else self.api.pod
        found = read(meta["namespace"], meta["name"])
        if found is None:  # deleted between the create and the read
            raise TemporaryError(f"{kind} {where} was there, then gone; rerun the apply")
        ident = identity_of(found["metadata"])
        if ident is None or (ident.workload, ident.submission) != (req.workload, req.name):
            raise PermanentError(
                f"{kind} {where}, the name of this submission, exists and was not created by "
                f"the control plane for {req.workload}; refusing to take it for ours (delete "
                "or rename it, then plan again)"
            )

    def _namespace(self, name: str) -> None:
        if name not in self._made:
            self.api.ensure_namespace(name, {MANAGED: "true"})
            self._made.add(name)

    def _owned(self, action: Action) -> Submission | None:
        """The submission the action names, if it still exists and is ours for this workload."""
        if not action.job or "/" not in action.job:
            raise PermanentError(f"{action.op} of {action.workload} names no job (namespace/name)")
        namespace, _, name = action.job.partition("/")
        k8s_job = self.api.job(namespace, name)
        pods = self.api.pods_in(namespace, f"{OURS},{SUBMISSION}={name}")
        # objects with our labels but not our identity (a copy made with kubectl's
        # --keep-labels) are not ours: left alone, and they block nothing
        mine = [
            (obj, ident)
            for obj in [k8s_job, *pods]
            if obj is not None and (ident := identity_of(obj["metadata"])) is not None
        ]
        if not mine:
            if k8s_job is not None or self.api.pod(namespace, name) is not None:  # somebody's
                raise PermanentError(
                    f"{action.job} was not created by the control plane; refusing to touch it"
                )
            return None
        for _, ident in mine:
            if ident.workload not in (action.workload, action.tagged_as):  # or renamed since
                raise PermanentError(
                    f"{action.job} belongs to workload {ident.workload}, not {action.workload}; "
                    "refusing"
                )
        ours_job = k8s_job if mine[0][0] is k8s_job else None
        ours_pods = [obj for obj, _ in mine if obj is not k8s_job]
        return Submission(namespace, name, mine[0][1], ours_job, ours_pods)

    def _delete(self, sub: Submission, pods: list[Obj] | None = None) -> int:
        """Delete the submission (or just ``pods`` of it); how many objects were deleted.

        A Job goes first (Foreground: it stays until its pods are gone, and the job
        controller makes no new one meanwhile), then its pods directly: the garbage
        collector would delete them too, a moment later, but until a pod is marked the
        GPUs it holds look taken to the next submission's room check."""
        deleted = 0
        if pods is None and sub.job is not None:
            deleted += self.api.delete_job(sub.namespace, sub.name)
        doomed = sub.live_pods if pods is None else pods
        return deleted + sum(
            self.api.delete_pod(sub.namespace, p["metadata"]["name"]) for p in doomed
        )

    def _remove(self, action: Action) -> ActionResult:
        sub = self._owned(action)
        if sub is None or (not sub.live_pods and sub.job is None):
            return ActionResult(ok=True, job=action.job, message=f"{action.job} was already gone")
        deleted = self._delete(sub)
        what = "deleted" if deleted else "already being deleted"
        return ActionResult(
            ok=True, job=action.job, message=f"{action.op.value}: {action.job} {what}"
        )

    def _resize(self, action: Action, plan_id: str) -> ActionResult:
        sub = self._owned(action)
        if sub is None or sub.job is not None or not action.replicas:
            return self._replace(action, plan_id, sub)
        # a gang, in place (down to one replica too): delete the replicas the plan drops,
        # the highest first where it has a choice (replica 0 is what frameworks coordinate
        # from), and create the ones it adds
        live = sorted(sub.live_pods, key=lambda p: replica_index(p["metadata"]) or 0)
        wanted = Counter(r.node for r in action.replicas or [])
        keep: Counter[str | None] = Counter()
        doomed = []
        for p in live:
            node = p["spec"].get("nodeName")
            if keep[node] < wanted[node]:
                keep[node] += 1
            else:
                doomed.append(p)
        self._delete(sub, doomed)
        missing = list((wanted - keep).elements())
        if missing:
            req = self.request(action, plan_id, stored=sub.identity.request, name=sub.name)
            self._namespace(req.namespace)
            self.room.reserve(req)
            for index, node in zip(_free_indices(sub, len(req.nodes)), missing, strict=False):
                body = manifests.pod(req, index, node)
                if not self.api.create(body):  # a rerun's, or somebody's of that name
                    self._ours_already(body, req)
        return ActionResult(
            ok=True,
            job=sub.id,
            message=f"resized {sub.id} in place: {len(doomed)} pods deleted, {len(missing)} created",
        )

    def _replace(self, action: Action, plan_id: str, sub: Submission | None = None) -> ActionResult:
        sub = sub if sub is not None else self._owned(action)
        candidate = action.submit.candidate if action.submit else None
        new_name = submission_name(action.workload, idempotency_key(plan_id, candidate))
        stored = sub.identity.request if sub is not None else None
        if sub is not None and sub.name == new_name:
            return ActionResult(ok=True, job=sub.id, message=f"{sub.id} is this plan's already")
        if sub is None and action.submit is None:
            namespace = (action.job or "").partition("/")[0]
            if self.api.job(namespace, new_name) or self.api.pods_in(
                namespace, f"{OURS},{SUBMISSION}={new_name}"
            ):
                done = f"{namespace}/{new_name}"
                return ActionResult(ok=True, job=done, message=f"already replaced by {done}")
            raise PermanentError(
                f"{action.job} of {action.workload} is gone and the action carries no submit "
                "details; the next plan submits it again"
            )
        req = self.request(action, plan_id, stored=stored)
        if sub is not None:
            self._delete(sub)
        result = self._create(req)
        return ActionResult(
            ok=True,
            job=result.job,
            message=f"{action.op.value}: {result.job} replaces {action.job}",
        )


def _free_indices(sub: Submission, size: int) -> Iterator[int]:
    """Replica indices for the pods a resize adds: first those of a gang of ``size`` that
    no pod holds (a replica lost: rank 0 too), then above every index in use. A pod still
    terminating keeps its index (and its name) until it is gone."""
    taken = {replica_index(p["metadata"]) or 0 for p in sub.pods}
    yield from (i for i in range(size) if i not in taken)
    yield from itertools.count(1 + max(taken, default=-1))
