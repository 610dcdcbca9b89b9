"""The spec language (apiVersion ``controlplane/v1``): one pydantic model per kind.

Keys are camelCase in YAML and snake_case in Python; unknown keys are errors so that a typo
never silently changes what gets scheduled. Durations are stored as whole seconds.
Defaults that depend on other fields (a workload's priority, preemptibility, minReplicas)
are resolved by properties, so the models stay a faithful image of what the user wrote.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from specs.durations import parse_duration

API_GROUP = "controlplane"
API_VERSION = "controlplane/v1"

Name = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?$"),
    WithJsonSchema({"type": "string", "pattern": r"^[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?$"}),
]
Duration = Annotated[
    int,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "type": "string",
            "description": "90s, 45m, 2h59m, 3d or Slurm's D-HH:MM:SS",
            "examples": ["45m", "2h59m", "3d", "1-12:00:00"],
        }
    ),
]
NonNegInt = Annotated[int, Field(ge=0)]

# KAI-Scheduler's priority classes: train 50, build/interactive 100, inference 125.
DEFAULT_PRIORITY = {"training": 50, "interactive": 100, "inference": 125}


class SpecModel(BaseModel):
    """Base of every spec object: camelCase keys, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
    )


class Metadata(SpecModel):
    name: Name
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


# ----------------------------------------------------------------------------- Cluster


class GpuType(SpecModel):
    memory_gib: float = Field(alias="memoryGiB", gt=0, description="memory per GPU, GiB")
    cost_per_gpu_hour: float = Field(
        default=0.0, ge=0, description="billing weight: cost units (or Slurm SUs) per GPU-hour"
    )


class NodePool(SpecModel):
    name: Name
    gpu_type: Name
    gpus_per_node: NonNegInt
    nodes: NonNegInt = Field(default=0, description="node count; used only by the simulator")
    partition: str | None = None
    max_walltime: Duration | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class SlurmSettings(SpecModel):
    account: str | None = None
    ssh_host: str | None = Field(default=None, description="run Slurm commands over ssh on this host")
    slurm_conf: str | None = Field(default=None, description="SLURM_CONF for the commands")
    work_dir: str | None = Field(default=None, description="where job scripts and outputs go")


class KubernetesSettings(SpecModel):
    context: str | None = None
    namespace: str = "default"


class ClusterSpec(SpecModel):
    adapter: Literal["simulator", "slurm", "kubernetes"] = "simulator"
    slurm: SlurmSettings | None = None
    kubernetes: KubernetesSettings | None = None
    gpu_types: dict[Name, GpuType] = Field(min_length=1)
    node_pools: list[NodePool] = Field(min_length=1)


# ------------------------------------------------------------------------ Quota / tree


class Quota(SpecModel):
    gpus: NonNegInt = Field(default=0, description="deserved GPUs (guaranteed share)")
    over_quota_weight: float = Field(
        default=1.0, ge=0, description="share of idle GPUs beyond deserved; 0 = none"
    )
    limit: NonNegInt | None = Field(default=None, description="hard cap on allocated GPUs")

    @model_validator(mode="after")
    def _limit_covers_deserved(self) -> Quota:
        if self.limit is not None and self.limit < self.gpus:
            raise ValueError(
                f"limit {self.limit} is below the deserved {self.gpus} GPUs; "
                "raise the limit or lower quota.gpus"
            )
        return self


class GpuTypeQuota(Quota):
    gpu_type: Name


QuotaSpec = Union[Quota, list[GpuTypeQuota]]


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
    rank: int = Field(default=100, description="higher rank is served first")
    quota: QuotaSpec = Field(default_factory=Quota)


class Fairshare(SpecModel):
    half_life: Duration | None = Field(default=None, description="usage decays by half over this")
    k: float = Field(default=1.0, ge=0, description="how strongly past usage bends the over-quota split")


class Budget(SpecModel):
    gpu_hours_per_month: float | None = Field(default=None, ge=0)
    cost_per_month: float | None = Field(default=None, ge=0, description="in costPerGpuHour units")

    @model_validator(mode="after")
    def _one_unit(self) -> Budget:
        if (self.gpu_hours_per_month is None) == (self.cost_per_month is None):
            raise ValueError("set exactly one of gpuHoursPerMonth or costPerMonth")
        return self


class ProjectSpec(SpecModel):
    department: Name | None = None
    rank: int = Field(default=100, description="higher rank is served first")
    quota: QuotaSpec = Field(default_factory=Quota)
    fairshare: Fairshare | None = None
    budget: Budget | None = None
    max_walltime: Duration | None = None
    min_runtime: Duration | None = Field(
        default=None, description="preemptible work is protected this long after it starts"
    )


# ---------------------------------------------------------------------------- Workload


class Checkpoint(SpecModel):
    signal: str = "USR1"
    grace: Duration = 600
    total: Duration | None = Field(default=None, description="total run time over all segments")


class Strategy(SpecModel):
    fan_out: bool = False
    max_parallel: int = Field(default=1, ge=1)


class WorkloadSpec(SpecModel):
    project: Name
    type: Literal["training", "interactive", "inference"] = "training"
    priority: int | None = None
    preemptible: bool | None = None
    replicas: int = Field(default=1, ge=1)
    min_replicas: int | None = Field(default=None, ge=1)
    gpus: NonNegInt = Field(default=1, description="GPUs per replica")
    gpu_types: list[Name] | None = None
    min_gpu_memory_gib: float | None = Field(default=None, alias="minGpuMemoryGiB", gt=0)
    clusters: list[Name] | None = None
    walltime: Duration | None = None
    command: list[str] | None = None
    checkpoint: Checkpoint | None = None
    strategy: Strategy | None = None

    @model_validator(mode="after")
    def _replica_bounds(self) -> WorkloadSpec:
        if self.min_replicas is not None and self.min_replicas > self.replicas:
            raise ValueError(
                f"minReplicas {self.min_replicas} exceeds replicas {self.replicas}; "
                "lower minReplicas or raise replicas"
            )
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


Document = Annotated[Union[Cluster, Department, Project, Workload], Field(discriminator="kind")]
KINDS: dict[str, type[_Document]] = {
    "Cluster": Cluster,
    "Department": Department,
    "Project": Project,
    "Workload": Workload,
}
