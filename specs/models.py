"""The spec language (apiVersion ``controlplane/v1``): one pydantic model per kind.

Keys are camelCase in YAML and snake_case in Python; unknown keys are errors so that a typo
never silently changes what gets scheduled. Durations are stored as whole seconds.
Defaults that depend on other fields (a workload's priority, preemptibility, minReplicas)
are resolved by properties, so the models stay a faithful image of what the user wrote.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any, Literal, Self

from pydantic import (
    Field,
    StringConstraints,
    ValidationInfo,
    model_validator,
)

from specs.base import SpecModel
from specs.durations import format_duration
from specs.fields import (
    Amount,
    Argv,
    Duration,
    GpuCount,
    Name,
    NodeCount,
    PoolGpus,
    PositiveDuration,
    QuotaGpus,
    Rank,
    Replicas,
    Signal,
    Text,
    Weight,
    at,
    failed_fields,
    raise_all,
)
from specs.reach import KubernetesSettings, Namespace, SlurmSettings

API_GROUP = "controlplane"
API_VERSION = "controlplane/v1"

# KAI-Scheduler's priority classes: train 50, build/interactive 100, inference 125.
DEFAULT_PRIORITY = {"training": 50, "interactive": 100, "inference": 125}


class Metadata(SpecModel):
    name: Name
    labels: dict[Text, Text] = Field(default_factory=dict, max_length=256)
    annotations: dict[Text, Text] = Field(default_factory=dict, max_length=256)


# ----------------------------------------------------------------------------- Cluster


class GpuType(SpecModel):
    memory_gib: Amount = Field(alias="memoryGiB", gt=0, description="memory per GPU, GiB")
    cost_per_gpu_hour: Amount = Field(
        default=0.0, description="billing weight: cost units (or Slurm SUs) per GPU-hour"
    )


class NodePool(SpecModel):
    name: Name
    gpu_type: Name
    gpus_per_node: PoolGpus
    nodes: NodeCount = Field(default=0, description="node count; used only by the simulator")
    partition: Text | None = None
    max_walltime: PositiveDuration | None = None
    labels: dict[Text, Text] = Field(default_factory=dict, max_length=256)


class ClusterSpec(SpecModel):
    adapter: Literal["simulator", "slurm", "kubernetes"] = "simulator"
    slurm: SlurmSettings | None = None
    kubernetes: KubernetesSettings | None = None
    gpu_types: dict[Name, GpuType] = Field(min_length=1)
    node_pools: list[NodePool] = Field(min_length=1)

    @model_validator(mode="after")
    def _settings_read(self) -> ClusterSpec:
        """Settings nothing would read are a mistake, not a default to ignore."""
        found = [
            at(block, f"the adapter is {self.adapter}: a {block} block is never read; remove it")
            for block in ("slurm", "kubernetes")
            if getattr(self, block) is not None and self.adapter != block
        ]
        kube = self.kubernetes
        if kube is not None and kube.namespace and "namespace_prefix" in kube.model_fields_set:
            found.append(
                at(
                    "kubernetes.namespacePrefix",
                    f"namespace '{kube.namespace}' holds every project, so namespacePrefix is "
                    "never used; remove one of them",
                )
            )
        raise_all(found, "ClusterSpec")
        return self


# ------------------------------------------------------------------------ Quota / tree


class Quota(SpecModel):
    gpus: QuotaGpus = Field(default=0, description="deserved GPUs (guaranteed share)")
    over_quota_weight: Weight = Field(
        default=1.0, description="share of idle GPUs beyond deserved; 0 = none"
    )
    limit: QuotaGpus | None = Field(default=None, description="hard cap on allocated GPUs")

    @model_validator(mode="after")
    def _limit_covers_deserved(self) -> Quota:
        if self.limit is not None and self.limit < self.gpus:
            raise at(
                "limit",
                f"limit {self.limit} is below the deserved {self.gpus} GPUs; "
                "raise the limit or lower quota.gpus",
            )
        return self


class GpuTypeQuota(Quota):
    gpu_type: Name


QuotaSpec = Quota | list[GpuTypeQuota]


def total_quota(quota: QuotaSpec) -> Quota:
    """A per-GPU-type quota list summed into one quota (the solver divides GPUs as one resource)."""
    if isinstance(quota, Quota):
        return quota
    limits = [q.limit for q in quota]
    return Quota(
        gpus=sum(q.gpus for q in quota),
        over_quota_weight=sum(q.over_quota_weight for q in quota),
        limit=None if any(x is None for x in limits) else sum(x for x in limits if x is not None),
    )


class DepartmentSpec(SpecModel):
    parent: Name | None = None
    rank: Rank = Field(default=100, description="higher rank is served first")
    quota: QuotaSpec = Field(default_factory=Quota)


class Fairshare(SpecModel):
    half_life: PositiveDuration | None = Field(
        default=None, description="usage decays by half over this"
    )
    k: Weight = Field(default=1.0, description="how strongly past usage bends the over-quota split")
    by_cost: bool = Field(
        default=False,
        description="count usage in cost units (GPU-hours x the type's costPerGpuHour, "
        "Slurm's TRESBillingWeights), so an A100 hour weighs what it costs",
    )


class Budget(SpecModel):
    gpu_hours_per_month: Amount | None = None
    cost_per_month: Amount | None = Field(default=None, description="in costPerGpuHour units")

    @model_validator(mode="after")
    def _one_unit(self) -> Budget:
        if (self.gpu_hours_per_month is None) == (self.cost_per_month is None):
            raise ValueError("set exactly one of gpuHoursPerMonth or costPerMonth")
        return self


class ProjectSpec(SpecModel):
    department: Name | None = None
    rank: Rank = Field(default=100, description="higher rank is served first")
    quota: QuotaSpec = Field(default_factory=Quota)
    fairshare: Fairshare | None = None
    budget: Budget | None = None
    max_walltime: PositiveDuration | None = None
    min_runtime: Duration | None = Field(
        default=None, description="preemptible work is protected this long after it starts"
    )
    namespace: Namespace | None = Field(
        default=None, description="Kubernetes namespace of its workloads (default: derived)"
    )
    renamed_from: list[Name] = Field(
        default_factory=list,
        description="the project's earlier names: their jobs, usage and budget are its own",
        exclude_if=lambda v: not v,  # specs without it keep their digest
    )


# ---------------------------------------------------------------------------- Workload


class Checkpoint(SpecModel):
    signal: Signal = "USR1"
    grace: PositiveDuration = 600
    total: PositiveDuration | None = Field(
        default=None, description="total run time over all segments"
    )


class Strategy(SpecModel):
    fan_out: bool = False
    max_parallel: int = Field(default=1, ge=1, le=64)


class WorkloadSpec(SpecModel):
    project: Name
    type: Literal["training", "interactive", "inference"] = "training"
    priority: Rank | None = None
    preemptible: bool | None = None
    replicas: Replicas = 1
    min_replicas: Replicas | None = None
    gpus: GpuCount = Field(default=1, description="GPUs per replica")
    gpu_types: list[Name] | None = None
    min_gpu_memory_gib: Amount | None = Field(default=None, alias="minGpuMemoryGiB", gt=0)
    clusters: list[Name] | None = None
    node_pools: list[Name] | None = Field(
        default=None,
        description="the node pools it may use, by name (in any cluster with a pool of that "
        "name): keeps training off an interactive partition",
    )
    walltime: PositiveDuration | None = None
    command: Argv | None = Field(default=None, description="an argument list, never a shell line")
    image: Text | None = Field(
        default=None, min_length=1, description="container image (Kubernetes clusters)"
    )
    checkpoint: Checkpoint | None = None
    strategy: Strategy | None = None

    @model_validator(mode="after")
    def _across_fields(self, info: ValidationInfo) -> WorkloadSpec:
        failed, found = failed_fields(info), []
        if (
            "replicas" not in failed
            and self.min_replicas is not None
            and self.min_replicas > self.replicas
        ):
            found.append(
                at(
                    "minReplicas",
                    f"minReplicas {self.min_replicas} exceeds replicas {self.replicas}; "
                    "lower minReplicas or raise replicas",
                )
            )
        ck = self.checkpoint
        if (
            "walltime" not in failed
            and ck is not None
            and self.walltime is not None
            and ck.grace >= self.walltime
        ):
            found.append(
                at(
                    "checkpoint.grace",
                    f"the checkpoint grace ({format_duration(ck.grace)}) must be shorter than "
                    f"the walltime ({format_duration(self.walltime)}): the job would be "
                    "signalled before it starts",
                )
            )
        if "walltime" not in failed and ck is not None and ck.total and self.walltime is None:
            found.append(
                at(
                    "checkpoint.total",
                    f"checkpoint.total ({format_duration(ck.total)}) runs the workload in "
                    "segments of at most its walltime, and it has none: set walltime (each "
                    "segment's limit)",
                )
            )
        raise_all(found, type(self).__name__)
        return self

    @property
    def effective_priority(self) -> int:
        return self.priority if self.priority is not None else DEFAULT_PRIORITY[self.type]

    @property
    def is_preemptible(self) -> bool:
        if self.preemptible is not None:
            return self.preemptible
        return self.type == "training"

    @property
    def effective_min_replicas(self) -> int:
        return self.min_replicas if self.min_replicas is not None else self.replicas

    @cached_property
    def digest(self) -> str:
        """What this version of the workload is: a hash of every field that differs from its
        default. Jobs carry it, so a resubmission of the same spec is recognised whichever
        plan made it, and an edited spec is told from a running one. Fields at their default
        are left out, so a field added in a later version does not make every running job
        look edited (and writing a default out changes nothing). Worked out once per spec
        (it is frozen; a copy with changes works it out again)."""
        body = self.model_dump_json(by_alias=True, exclude_defaults=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("digest", None)  # its fields may differ: no cached digest
        return copied


# --------------------------------------------------------------------------- documents


class _Document(SpecModel):
    api_version: Annotated[str, StringConstraints(pattern=r"^controlplane/v1$")] = Field(
        alias="apiVersion"
    )
    metadata: Metadata


class Cluster(_Document):
    kind: Literal["Cluster"]
    spec: ClusterSpec


class Department(_Document):
    kind: Literal["Department"]
    spec: DepartmentSpec = Field(default_factory=DepartmentSpec)


class Project(_Document):
    kind: Literal["Project"]
    spec: ProjectSpec = Field(default_factory=ProjectSpec)


class Workload(_Document):
    kind: Literal["Workload"]
    spec: WorkloadSpec

    @property
    def key(self) -> str:
        """A workload's identity: ``project/name``."""
        return f"{self.spec.project}/{self.metadata.name}"


Document = Annotated[Cluster | Department | Project | Workload, Field(discriminator="kind")]
KINDS: dict[str, type[_Document]] = {
    "Cluster": Cluster,
    "Department": Department,
    "Project": Project,
    "Workload": Workload,
}
