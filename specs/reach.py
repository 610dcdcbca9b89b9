"""How the control plane reaches a cluster: the ``slurm`` and ``kubernetes`` blocks of a
Cluster's spec (the adapters in adapters/slurm/ and adapters/kubernetes/ read them)."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, StringConstraints, model_validator

from specs.base import SpecModel
from specs.fields import Text

# Slurm's own variables: the adapter never passes them on (adapters/slurm/transport.py)
_SLURM_PREFIXES = (
    "SLURM_",
    "SBATCH_",
    "SRUN_",
    "SALLOC_",
    "SQUEUE_",
    "SINFO_",
    "SCANCEL_",
    "SCONTROL_",
)
# an environment variable's name, as a shell writes it
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
EnvName = Annotated[str, StringConstraints(pattern=ENV_NAME)]


class SlurmSettings(SpecModel):
    account: Text | None = None
    ssh_host: Text | None = Field(
        default=None, description="run Slurm commands over ssh on this host"
    )
    slurm_conf: Text | None = Field(default=None, description="SLURM_CONF for the commands")
    work_dir: Text | None = Field(
        default=None,
        description="where jobs start (--chdir) and their scripts and outputs go, on a file "
        "system the nodes share; default DIR/.cp/slurm/CLUSTER",
    )
    accounting: bool = Field(
        default=False,
        description="the site runs slurmdbd: usage is read from sacct (exact even for jobs "
        "that started and ended between two observations)",
    )
    export_env: list[EnvName] = Field(
        default_factory=list,
        max_length=256,
        description="variables of cp's environment its jobs get beside a login's basics "
        "(HOME, USER, LOGNAME, SHELL, PATH, LANG, LC_*, TMPDIR); over ssh, jobs get the "
        "login node's session environment instead",
    )

    @model_validator(mode="after")
    def _export_is_local(self) -> Self:
        found = []  # both at once: a second run of `cp validate` should not find another
        if self.export_env and self.ssh_host:
            found.append(
                "exportEnv names variables of cp's own environment; over sshHost, jobs get "
                "the login node's environment (set them there)"
            )
        slurms = [n for n in self.export_env if n.startswith(_SLURM_PREFIXES)]
        if slurms:
            found.append(
                f"exportEnv: {', '.join(slurms)} would change what Slurm's commands do; "
                "the control plane sets their options itself"
            )
        if found:
            raise ValueError("; and ".join(found))
        return self


# Kubernetes names: a DNS-1123 label (namespaces), a label key or extended resource name
# (``prefix/name``, the prefix a DNS subdomain), and a namespace prefix (a label's start).
DNS_LABEL = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
QUALIFIED_NAME = (
    r"^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$"
)
Namespace = Annotated[str, StringConstraints(pattern=DNS_LABEL)]


class KubernetesSettings(SpecModel):
    """How to reach a Kubernetes cluster and read its GPU nodes (adapters/kubernetes/)."""

    kubeconfig: Text | None = Field(
        default=None,
        description="kubeconfig file; default $KUBECONFIG, then ~/.kube/config, then the "
        "in-cluster service account",
    )
    context: Text | None = Field(default=None, description="kubeconfig context; default current")
    namespace: Namespace | None = Field(
        default=None,
        description="one namespace for every project; default: a namespace per project "
        "(the Project's spec.namespace, else namespacePrefix + project name)",
    )
    namespace_prefix: Annotated[str, StringConstraints(pattern=r"^([a-z0-9][a-z0-9-]*)?$")] = Field(
        default="cp-", max_length=40, description="derived namespaces: prefix + project"
    )
    gpu_resource: Annotated[str, StringConstraints(pattern=QUALIFIED_NAME)] = Field(
        default="nvidia.com/gpu", description="the extended resource that counts GPUs"
    )
    gpu_type_label: Annotated[str, StringConstraints(pattern=QUALIFIED_NAME)] = Field(
        default="nvidia.com/gpu.product",
        description="node label naming the GPU model (reported for nodes no pool selects)",
    )
    image: Text | None = Field(
        default=None, min_length=1, description="container image for workloads without one"
    )

    def namespace_for(self, project: str, own: str | None = None) -> str:
        """Where a project's objects live: its own namespace, the cluster's shared one, or
        the prefix plus its name."""
        return own or self.namespace or f"{self.namespace_prefix}{project}"
