"""Workloads that can never start for their size: a gang (all of ``gpus x minReplicas`` at
once, inside one node pool) bigger than a ``limit`` above it, or than every pool it may use.

The planner keeps such a workload pending as if it waited its turn (``over-limit``, no
room), and the remedy it names, waiting for other work to finish, can never help. These
are warnings, as for non-preemptible work beyond deserved quota (specs/promises.py): the
spec is allowed and a limit or a pool may grow, but whoever wrote it should hear now that
it cannot run as it stands, and what to change.
"""

from __future__ import annotations

from collections.abc import Iterator

import networkx as nx

from specs.checking import CheckContext
from specs.diagnostics import Diagnostic
from specs.fit import Pools, Usable
from specs.hierarchy import ancestors, build_tree, project_id
from specs.models import Cluster, NodePool, WorkloadSpec

# (kind, name, limit) of the tightest limit over a project's work, on any level
_Limit = tuple[str, str, int]


def check_gangs(ctx: CheckContext) -> Iterator[Diagnostic]:
    """A warning for each workload whose smallest start exceeds a limit of its project or
    of a department above it (on all its GPUs, or on every GPU type it may use), or the
    GPUs of the largest pool it may use."""
    desired = ctx.desired
    tree = build_tree(desired)
    limits: dict[str, _Limit | None] = {}
    typed_org = any(data["per_type"] for _, data in tree.nodes(data=True))  # per-type quotas
    usable = Usable(desired)
    for key, workload in desired.workloads.items():
        spec = workload.spec
        need = spec.gpus * spec.effective_min_replicas
        pools = usable(workload)
        if spec.project in desired.projects:
            if spec.project not in limits:
                limits[spec.project] = _tightest_limit(tree, spec.project)
            limit = limits[spec.project]
            if limit is not None and need > limit[2]:
                message = _over_limit(spec, need, limit)
                yield ctx.at("Workload", key, _size_field(spec), message, severity="warning")
            elif (
                typed_org
                and (typed := _type_limits(tree, spec.project, pools))
                and need > max(typed.values())
            ):
                message = _over_type_limits(spec, need, typed)
                yield ctx.at("Workload", key, _size_field(spec), message, severity="warning")
        if not ctx.clusters_complete:
            continue
        found = _largest_pool(pools)
        if found is not None and need > found[1].nodes * found[1].gpus_per_node:
            message = _over_pools(spec, need, *found)
            yield ctx.at("Workload", key, _size_field(spec), message, severity="warning")


def _tightest_limit(tree: nx.DiGraph, project: str) -> _Limit | None:
    """The smallest limit on the project or a department above it (the nearest of equals)."""
    found: _Limit | None = None
    for node in [project_id(project), *ancestors(tree, project_id(project))]:
        data = tree.nodes[node]
        limit = data["quota"].limit
        if limit is not None and (found is None or limit < found[2]):
            found = (str(data["kind"]), str(data["name"]), int(limit))
    return found


def _type_limits(tree: nx.DiGraph, project: str, pools: Pools) -> dict[str, int]:
    """Per GPU type of ``pools`` (those the workload may use), the smallest per-type limit
    on it along its project's chain; empty unless every such type has one (a type without
    one caps nothing)."""
    types = {pool.gpu_type for _, pool in pools}
    chain = [project_id(project), *ancestors(tree, project_id(project))]
    caps: dict[str, int] = {}
    for gpu_type in sorted(types):
        found = [
            q.limit
            for node in chain
            for q in tree.nodes[node]["per_type"] or []
            if q.gpu_type == gpu_type and q.limit is not None
        ]
        if not found:
            return {}
        caps[gpu_type] = min(found)
    return caps


def _over_type_limits(spec: WorkloadSpec, need: int, caps: dict[str, int]) -> str:
    size, smaller = _gang(spec, need)
    each = ", ".join(f"{t} at most {n}" for t, n in sorted(caps.items()))
    return (
        f"this workload needs {size} of one GPU type, but the per-type limits over project "
        f"'{spec.project}' allow {each} (quota[TYPE].limit): it can never start, and waiting "
        f"for other work to finish will not help; shrink it ({smaller}) or raise a limit"
    )


def _largest_pool(pools: Pools) -> tuple[Cluster, NodePool] | None:
    """The pool with the most GPUs among ``pools`` (those a replica may run in); None when
    there is none (the fit check's error says so) or a pool does not declare its nodes (its
    size is observed, unknown here)."""
    if not pools or any(pool.nodes <= 0 for _, pool in pools):
        return None
    return max(pools, key=lambda cp: (cp[1].nodes * cp[1].gpus_per_node, cp[0].metadata.name))


def _size_field(spec: WorkloadSpec) -> str:
    """The field that multiplies the GPUs of one replica into the gang's."""
    if spec.min_replicas is not None:
        return "spec.minReplicas"
    return "spec.replicas" if spec.replicas > 1 else "spec.gpus"


def _gang(spec: WorkloadSpec, need: int) -> tuple[str, str]:
    """What the workload needs at once, and how to make it smaller."""
    if spec.min_replicas is not None:
        return f"{need} GPUs at once (gpus x minReplicas)", "fewer gpus or a lower minReplicas"
    return f"{need} GPUs at once (gpus x replicas)", "fewer gpus or replicas"


def _over_limit(spec: WorkloadSpec, need: int, limit: _Limit) -> str:
    kind, name, most = limit
    whose = f"{kind} '{name}'"
    if kind != "project":
        whose += f", above project '{spec.project}',"
    size, smaller = _gang(spec, need)
    return (
        f"this workload needs {size} but {whose} may hold at most {most} (quota.limit): it "
        "can never start, and waiting for other work to finish will not help; shrink it "
        f"({smaller}) or raise that limit"
    )


def _over_pools(spec: WorkloadSpec, need: int, cluster: Cluster, pool: NodePool) -> str:
    size, smaller = _gang(spec, need)
    return (
        f"this workload needs {size} inside one node pool, but the largest it may use, "
        f"{cluster.metadata.name}/{pool.name}, has {pool.nodes * pool.gpus_per_node} "
        f"({pool.nodes} nodes x {pool.gpus_per_node}): it can never start; shrink it "
        f"({smaller}) or let it use a larger pool (clusters, gpuTypes, nodePools)"
    )
