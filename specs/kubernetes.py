"""What a Kubernetes cluster asks of the specs beyond their schema.

On Kubernetes a node pool is a label selector, a project's workloads live in a
namespace, and every workload runs a container image. Each of these would otherwise
fail only at apply time, with the API server's words (a 400 for a malformed selector, a
422 for a bad namespace name, a pod without an image): here they are diagnostics at
validate time, anchored like every other cross-document check (specs/validate.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from specs.desired import DesiredState
from specs.diagnostics import Diagnostic, Severity
from specs.models import Cluster
from specs.reach import DNS_LABEL, QUALIFIED_NAME, KubernetesSettings


class At(Protocol):
    """(kind, document name, field, message) -> a diagnostic at that document's field."""

    def __call__(
        self, kind: str, name: str, field: str, message: str, severity: Severity = "error"
    ) -> Diagnostic: ...


# Kubernetes' own namespaces: its components, leases and public data live there
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})

_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$")


def _kubernetes(cluster: Cluster) -> KubernetesSettings | None:
    if cluster.spec.adapter != "kubernetes":
        return None
    return cluster.spec.kubernetes or KubernetesSettings()


@dataclass(frozen=True)
class Runs:
    """Where and what a job on a Kubernetes cluster runs, as the specs now say: neither is
    in the workload's own spec, so an edit of them is seen against the observed job."""

    image: str | None  # the cluster's default, for workloads without an image of their own
    namespaces: dict[str, str]  # project -> the namespace its objects live in


def what_runs(desired: DesiredState) -> dict[str, Runs]:
    """Per Kubernetes cluster: its default image and each project's namespace there."""
    return {
        name: Runs(
            settings.image,
            {
                p: settings.namespace_for(p, doc.spec.namespace)
                for p, doc in desired.projects.items()
            },
        )
        for name, cluster in desired.clusters.items()
        if (settings := _kubernetes(cluster)) is not None
    }


def check_kubernetes(desired: DesiredState, at: At) -> Iterator[Diagnostic]:
    """What a Kubernetes cluster needs beyond the schema: pools that select their nodes by
    labels, namespace names the API server accepts, and an image for every workload that
    may run there."""
    k8s = {n: s for n, c in desired.clusters.items() if (s := _kubernetes(c)) is not None}
    places = _places(desired)
    yield from _check_system_namespaces(desired, at, k8s, places)
    for name, settings in sorted(k8s.items()):
        yield from _check_selectors(at, name, desired.clusters[name])
        if settings.namespace is not None:
            continue
        for project, doc in sorted(desired.projects.items()):
            if not _may_run_on(places, project, name):
                continue
            derived = settings.namespace_for(project, doc.spec.namespace)
            if not re.match(DNS_LABEL, derived):
                yield at(
                    "Project",
                    project,
                    "metadata.name",
                    f"its workloads on Kubernetes cluster '{name}' would live in namespace "
                    f"'{derived}', which is not a valid namespace name (lowercase letters, "
                    "digits and '-', at most 63); set this project's spec.namespace",
                )
    for key, workload in sorted(desired.workloads.items()):
        spec = workload.spec
        if spec.image is not None:
            continue
        allowed = spec.clusters if spec.clusters is not None else sorted(k8s)
        missing = [c for c in allowed if c in k8s and k8s[c].image is None]
        if missing:
            yield at(
                "Workload",
                key,
                "spec",
                f"it may run on Kubernetes cluster '{missing[0]}', which needs a container "
                "image: set spec.image here or spec.kubernetes.image on the cluster "
                "(or list only other clusters in spec.clusters)",
            )


def _check_system_namespaces(
    desired: DesiredState, at: At, k8s: dict[str, KubernetesSettings], places: Places
) -> Iterator[Diagnostic]:
    """Work put in one of Kubernetes' own namespaces runs beside the cluster's components,
    under their quotas and policies, and is cleaned up there: allowed, but said once."""
    where = "Kubernetes' own namespace; give its workloads a namespace of their own"
    for name, settings in sorted(k8s.items()):
        shared = settings.namespace
        if shared in SYSTEM_NAMESPACES and any(
            d.spec.namespace is None for d in desired.projects.values()
        ):
            yield at(
                "Cluster",
                name,
                "spec.kubernetes.namespace",
                f"workloads would run in namespace '{shared}' on Kubernetes cluster "
                f"'{name}', {where}",
                severity="warning",
            )
    for project, doc in sorted(desired.projects.items()):
        own = doc.spec.namespace
        # its own namespace, or one derived from its name (the cluster's namespacePrefix)
        derived = {
            name: ns
            for name, settings in k8s.items()
            if settings.namespace is None or own is not None
            if (ns := settings.namespace_for(project, own)) in SYSTEM_NAMESPACES
            if _may_run_on(places, project, name)
        }
        if derived:
            clusters = ", ".join(f"'{name}'" for name in sorted(derived))
            on = f"Kubernetes cluster{'s' if len(derived) > 1 else ''} {clusters}"
            namespace = derived[min(derived)]
            yield at(
                "Project",
                project,
                "spec.namespace" if own is not None else "metadata.name",
                f"its workloads would run in namespace '{namespace}' on {on}, {where}",
                severity="warning",
            )


Places = dict[str, set[str] | None]  # project -> the clusters its work may use (None: any)


def _places(desired: DesiredState) -> Places:
    """The clusters each project's workloads may run on (spec.clusters), for the projects
    that have workloads."""
    out: Places = {}
    for w in desired.workloads.values():
        project, clusters = w.spec.project, w.spec.clusters
        if clusters is None:
            out[project] = None
        elif (known := out.setdefault(project, set())) is not None:
            known.update(clusters)
    return out


def _may_run_on(places: Places, project: str, cluster: str) -> bool:
    """Whether work of ``project`` may run on ``cluster``, so that its namespace there is
    made: a project without workloads yet may get one that does."""
    allowed = places.get(project)
    return allowed is None or cluster in allowed


def _check_selectors(at: At, name: str, cluster: Cluster) -> Iterator[Diagnostic]:
    """On Kubernetes a node pool is a label selector: with several pools each needs one,
    and no two may be the same; keys and values must be valid Kubernetes labels."""
    pools = cluster.spec.node_pools
    seen: dict[tuple[tuple[str, str], ...], str] = {}
    for index, pool in enumerate(pools):
        where = f"spec.nodePools.{index}.labels"
        if not pool.labels and len(pools) > 1:
            yield at(
                "Cluster",
                name,
                f"spec.nodePools.{index}",
                f"node pool '{pool.name}' has no labels; on Kubernetes a pool selects its "
                "nodes by labels, and with several pools each needs its own (for example "
                f"labels: {{nvidia.com/gpu.product: <the product its {pool.gpu_type} nodes "
                "report>})",
            )
        for key, value in sorted(pool.labels.items()):
            if not re.match(QUALIFIED_NAME, key) or not _LABEL_VALUE.match(value):
                yield at(
                    "Cluster",
                    name,
                    where,
                    f"'{key}: {value}' is not a valid Kubernetes label (key: [prefix/]name; "
                    "value: at most 63 letters, digits, '-', '_' or '.')",
                )
        selector = tuple(sorted(pool.labels.items()))
        if pool.labels and selector in seen:
            yield at(
                "Cluster",
                name,
                where,
                f"node pool '{pool.name}' selects the same nodes as pool '{seen[selector]}'; "
                "give each pool labels of its own",
            )
        seen.setdefault(selector, pool.name)
