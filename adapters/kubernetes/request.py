"""From a plan action to what the adapter creates on Kubernetes: a :class:`PodRequest`.

Everything the objects need is decided here, from the action's submit details and
replicas, the cluster's settings (namespace rule, GPU resource, default image) and the
spec's node pool (its labels become the pods' node selector). A move or a resize whose
action carries no submit details takes them from the submission it replaces (stored
on its objects as the ``request`` annotation). Pure: nothing here talks to the API server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.base import PermanentError
from adapters.kubernetes.identity import Identity, digest_of, idempotency_key, submission_name
from specs.actions import Action, SubmitDetails
from specs.models import NodePool
from specs.reach import KubernetesSettings

# a signal name as kill -s takes it: USR1, SIGUSR1, TERM, 10 ...
_SIGNAL = re.compile(r"^(SIG)?[A-Z][A-Z0-9+-]*$|^[0-9]{1,2}$")


@dataclass(frozen=True)
class PodRequest:
    """One submission: its objects' names, where each replica goes, and the container."""

    workload: str  # project/name
    plan_id: str
    namespace: str
    name: str  # the submission: a Job's name, or the stem of a gang's pod names
    nodes: tuple[str | None, ...]  # one entry per replica; None = the scheduler places it
    gpus: int  # per replica
    image: str
    gpu_resource: str = "nvidia.com/gpu"
    command: tuple[str, ...] | None = None
    pool: str | None = None
    selector: Mapping[str, str] = field(default_factory=dict)  # the pool's node labels
    walltime: int | None = None  # seconds: activeDeadlineSeconds
    checkpoint_signal: str | None = None
    checkpoint_grace: int | None = None
    segment: int | None = None
    candidate: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)  # the submit details, as JSON

    @property
    def gang(self) -> bool:
        """Several replicas: one pod each (a batch/v1 Job has one template, one node)."""
        return len(self.nodes) > 1

    @property
    def identity(self) -> Identity:
        return Identity(
            workload=self.workload,
            submission=self.name,
            plan_id=self.plan_id,
            spec_digest=digest_of(self.details),
            candidate=self.candidate,
            pool=self.pool,
            replicas=len(self.nodes),
            request=self.details,
        )

    @property
    def job_id(self) -> str:
        """The snapshot's id of this submission."""
        return f"{self.namespace}/{self.name}"


def build_request(
    action: Action,
    plan_id: str,
    *,
    settings: KubernetesSettings,
    pools: Sequence[NodePool],
    namespaces: Mapping[str, str],
    stored: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> PodRequest:
    """The request for a submit, or for the new shape of a move/resize (``stored``: the
    submit details read from the submission it replaces). ``namespaces``: projects that
    name their own namespace. ``name``: keep an existing submission's name (in-place)."""
    if action.submit is not None:
        sd = action.submit
    elif stored is not None:
        sd = SubmitDetails.model_validate({k: v for k, v in stored.items() if k != "pool"})
    else:
        raise PermanentError(
            f"{action.workload}: the action carries no submit details and no earlier "
            "submission of it exists to copy them from"
        )
    replicas = list(action.replicas or [])
    if not replicas:
        raise PermanentError(f"{action.workload}: the action places no replicas")
    gpus = replicas[0].gpus
    if any(r.gpus != gpus for r in replicas):
        raise PermanentError(
            f"{action.workload}: replicas ask for {[r.gpus for r in replicas]} GPUs; every "
            "pod of a submission has the same resources"
        )
    image = sd.image or settings.image
    if not image:
        raise PermanentError(
            f"{action.workload}: no container image; set the workload's spec.image or the "
            "cluster's spec.kubernetes.image"
        )
    signal = sd.checkpoint_signal
    if signal is not None and not _SIGNAL.match(signal):
        raise PermanentError(f"{action.workload}: {signal!r} is not a signal name")
    pool_name = action.pool or (stored or {}).get("pool")
    pool = next((p for p in pools if p.name == pool_name), None)
    project = action.workload.partition("/")[0]
    key = idempotency_key(plan_id, sd.candidate)
    details = sd.model_dump(mode="json", by_alias=True) | {"pool": pool_name}
    return PodRequest(
        workload=action.workload,
        plan_id=plan_id,
        namespace=settings.namespace_for(project, namespaces.get(project)),
        name=name or submission_name(action.workload, key),
        nodes=tuple(r.node for r in replicas),
        gpus=gpus,
        image=image,
        gpu_resource=settings.gpu_resource,
        command=tuple(sd.command) if sd.command else None,
        pool=pool_name,
        selector=dict(pool.labels) if pool else {},
        walltime=sd.walltime,
        checkpoint_signal=signal.removeprefix("SIG") if signal else None,
        checkpoint_grace=sd.checkpoint_grace,
        segment=sd.segment,
        candidate=sd.candidate,
        details=details,
    )
