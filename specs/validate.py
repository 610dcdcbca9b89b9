"""Cross-document checks: what no single document's schema can see.

A workload naming a project that does not exist, a department tree with a cycle, a
workload no node pool could ever hold, non-preemptible demand a department can never
guarantee: each would otherwise surface much later as a job pending forever with a
puzzling reason. Quotas that cannot all be honoured (above what the clusters hold, or
children deserving more than their department) are allowed, as in KAI, but warned
about: a deserved quota is a promise. Pure functions over a DesiredState; every diagnostic is anchored at the
offending document's ``metadata.name`` (``desired.sources``) and names the field, which
the loader then resolves to the field's own line and column.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from itertools import islice

from specs.checking import CheckContext
from specs.desired import DesiredState, Document, SourceRef
from specs.diagnostics import Diagnostic, name_hint, sort_diagnostics
from specs.durations import format_duration
from specs.fit import Pools, Usable, gpu_memory, shortfalls
from specs.gangs import check_gangs
from specs.hierarchy import department_cycles
from specs.kubernetes import check_kubernetes
from specs.models import QuotaSpec, Workload
from specs.promises import (
    check_capacity,
    check_non_preemptible_demand,
    check_overcommitted,
    check_unpriced_budgets,
)

__all__ = ["errors_of_duplicates", "find_duplicates", "validate"]


def validate(
    desired: DesiredState, *, broken: Collection[tuple[str, str]] = ()
) -> list[Diagnostic]:
    """Every cross-reference problem of ``desired``, errors and warnings, sorted by position.

    ``broken`` lists (kind, name) of documents that were written but failed to validate:
    references to them are not reported again, so one typo yields one error, not hundreds.
    """
    gpu_types = frozenset(t for c in desired.clusters.values() for t in c.spec.gpu_types)
    ctx = CheckContext(desired, frozenset(broken), gpu_types)
    found = [
        *_check_departments(ctx),
        *_check_projects(ctx),
        *_check_clusters(ctx),
        *check_kubernetes(desired, ctx.at),
        *_check_workloads(ctx),
        *check_non_preemptible_demand(ctx),
        *check_gangs(ctx),
        *check_capacity(ctx),
        *check_overcommitted(ctx),
        *check_unpriced_budgets(ctx),
    ]
    # an error about a field says more than a warning about the same field
    erred = {(d.path, d.line, d.column, d.field) for d in found if d.severity == "error"}
    found = [
        d
        for d in found
        if d.severity == "error" or (d.path, d.line, d.column, d.field) not in erred
    ]
    return sort_diagnostics(found)


# duplicates whose own errors are looked for: each costs a validation of the whole specs
DUPLICATES_CHECKED = 20


def errors_of_duplicates(
    desired: DesiredState,
    duplicates: Iterable[tuple[Document, SourceRef]],
    *,
    broken: Collection[tuple[str, str]] = (),
) -> list[Diagnostic]:
    """The errors of each duplicate document itself (the first ``DUPLICATES_CHECKED``), so
    that fixing its name does not bring a second round of errors: each is validated in
    place of the first of its name, alone, and what points into it is kept."""
    found: list[Diagnostic] = []
    for doc, ref in islice(duplicates, DUPLICATES_CHECKED):
        found += [
            d
            for d in validate(desired.with_document(doc, ref), broken=broken)
            if d.severity == "error"
            and (d.path, d.line, d.column) == (ref.path, ref.line, ref.column)
        ]
    return found


def find_duplicates(entries: Iterable[tuple[str, str, SourceRef]]) -> list[Diagnostic]:
    """Documents of one kind with the same name (workloads: the same ``project/name``; a
    project and a department count as one kind).

    Takes (kind, name, where) in load order, since a DesiredState keeps only the first.
    """
    first: dict[tuple[str, str], tuple[str, SourceRef]] = {}
    found = []
    for kind, name, ref in entries:
        # projects and departments are the queues of one tree: one name space
        space = "queue" if kind in ("Project", "Department") else kind
        earlier_kind, earlier = first.setdefault((space, name), (kind, ref))
        if earlier is ref:
            continue
        if earlier_kind != kind:
            message = (
                f"{kind} '{name}' has the name of {earlier_kind} '{name}' at {earlier}; "
                "projects and departments are queues of one tree: rename one"
            )
        else:
            same = " in the same project" if kind == "Workload" else ""
            message = f"{kind} '{name}' is already defined{same} at {earlier}; rename or remove one"
        found.append(Diagnostic(ref.path, ref.line, ref.column, message, "metadata.name"))
    return found


# ------------------------------------------------------------------ tree


def _check_departments(ctx: CheckContext) -> Iterator[Diagnostic]:
    departments = ctx.desired.departments
    for name, dept in departments.items():
        parent = dept.spec.parent
        if parent is not None and not ctx.known("Department", parent, departments):
            yield ctx.at(
                "Department",
                name,
                "spec.parent",
                f"unknown parent department '{parent}'{name_hint(parent, departments)}; "
                "declare it (kind: Department) or remove the parent",
            )
        yield from _check_quota_types(ctx, "Department", name, dept.spec.quota)
    for cycle in department_cycles(ctx.desired):
        start = min(cycle)
        chain = [start]
        while (parent := departments[chain[-1]].spec.parent) is not None and parent != start:
            chain.append(parent)
        loop = " -> ".join([*chain, start])
        yield ctx.at(
            "Department",
            start,
            "spec.parent",
            f"department parents form a cycle ({loop}); "
            "a chain of parents must end at a top-level department, remove one parent",
        )


def _check_projects(ctx: CheckContext) -> Iterator[Diagnostic]:
    departments = ctx.desired.departments
    for name, project in ctx.desired.projects.items():
        dept = project.spec.department
        if dept is not None and not ctx.known("Department", dept, departments):
            yield ctx.at(
                "Project",
                name,
                "spec.department",
                f"unknown department '{dept}'{name_hint(dept, departments)}; "
                "declare it (kind: Department) or remove the department",
            )
        yield from _check_quota_types(ctx, "Project", name, project.spec.quota)
    yield from _check_renames(ctx)


def _check_renames(ctx: CheckContext) -> Iterator[Diagnostic]:
    """An old name (``spec.renamedFrom``) is gone from the specs, and carried on by one
    project: its jobs and usage cannot be two queues' at once."""
    queues = ctx.desired.projects.keys() | ctx.desired.departments.keys()
    claimed: dict[str, str] = {}
    for name, project in sorted(ctx.desired.projects.items()):
        for i, old in enumerate(project.spec.renamed_from):
            if old == name or old in project.spec.renamed_from[:i]:
                again = "its own name" if old == name else f"'{old}' twice"
                why = f"renamedFrom lists {again}: list each earlier name once, not the name it has now"
            elif old in queues:
                what = "project" if old in ctx.desired.projects else "department"
                why = (
                    f"{what} '{old}' is still in the specs; a project renamed from it takes "
                    "its place: remove that document, or this entry"
                )
            elif old in claimed:
                why = (
                    f"project '{claimed[old]}' is renamed from '{old}' too; its jobs and "
                    "usage can carry on in one project only: keep it in one list"
                )
            else:
                claimed[old] = name
                continue
            yield ctx.at("Project", name, "spec.renamedFrom", why)


def _check_quota_types(
    ctx: CheckContext, kind: str, name: str, quota: QuotaSpec
) -> Iterator[Diagnostic]:
    """A per-gpuType quota list must name declared gpuTypes, each at most once."""
    if not isinstance(quota, list):
        return
    seen: dict[str, int] = {}
    for index, entry in enumerate(quota):
        where = f"spec.quota.{index}.gpuType"
        if entry.gpu_type in seen:
            yield ctx.at(
                kind,
                name,
                where,
                f"gpuType '{entry.gpu_type}' already has a quota (entry {seen[entry.gpu_type]}); "
                "merge the two entries",
            )
        seen.setdefault(entry.gpu_type, index)
        if ctx.clusters_complete and entry.gpu_type not in ctx.gpu_types:
            yield ctx.at(kind, name, where, _unknown_gpu_type(entry.gpu_type, ctx.gpu_types))


def _unknown_gpu_type(gpu_type: str, declared: Collection[str]) -> str:
    listed = ", ".join(sorted(declared)) or "none"
    return (
        f"unknown gpuType '{gpu_type}'{name_hint(gpu_type, declared)}; "
        f"gpuTypes are declared under a Cluster's spec.gpuTypes (declared: {listed})"
    )


# ------------------------------------------------------------------ clusters


def _check_clusters(ctx: CheckContext) -> Iterator[Diagnostic]:
    for name, cluster in ctx.desired.clusters.items():
        declared = cluster.spec.gpu_types
        first_index: dict[str, int] = {}
        for index, pool in enumerate(cluster.spec.node_pools):
            earlier = first_index.setdefault(pool.name, index)
            if earlier != index:
                yield ctx.at(
                    "Cluster",
                    name,
                    f"spec.nodePools.{index}.name",
                    f"node pool '{pool.name}' is already defined (spec.nodePools.{earlier}); "
                    "pool names must be unique within a cluster",
                )
            if pool.gpu_type not in declared:
                yield ctx.at(
                    "Cluster",
                    name,
                    f"spec.nodePools.{index}.gpuType",
                    f"unknown gpuType '{pool.gpu_type}'{name_hint(pool.gpu_type, declared)}; "
                    f"declare it under this cluster's spec.gpuTypes "
                    f"(declared: {', '.join(sorted(declared))})",
                )


# ------------------------------------------------------------------ workloads


def _check_workloads(ctx: CheckContext) -> Iterator[Diagnostic]:
    desired = ctx.desired
    usable = Usable(ctx.desired)  # the pools a replica may use, per distinct ask
    pools = {p.name for c in desired.clusters.values() for p in c.spec.node_pools}
    complete = ctx.clusters_complete
    for key, workload in desired.workloads.items():
        spec = workload.spec
        found: list[Diagnostic] = []
        project = desired.projects.get(spec.project)
        if not ctx.known("Project", spec.project, desired.projects):
            found.append(
                ctx.at(
                    "Workload",
                    key,
                    "spec.project",
                    f"unknown project '{spec.project}'{name_hint(spec.project, desired.projects)}; "
                    "declare it (kind: Project) or fix the name",
                )
            )
        for index, cluster in enumerate(spec.clusters or []):
            if not ctx.known("Cluster", cluster, desired.clusters):
                found.append(
                    ctx.at(
                        "Workload",
                        key,
                        f"spec.clusters.{index}",
                        f"unknown cluster '{cluster}'{name_hint(cluster, desired.clusters)}; "
                        f"declared clusters: {', '.join(sorted(desired.clusters)) or 'none'}",
                    )
                )
        for index, pool in enumerate(spec.node_pools or []):
            if complete and pool not in pools:
                found.append(
                    ctx.at(
                        "Workload",
                        key,
                        f"spec.nodePools.{index}",
                        f"unknown node pool '{pool}'{name_hint(pool, pools)}; "
                        f"declared pools: {', '.join(sorted(pools)) or 'none'}",
                    )
                )
        for index, gpu_type in enumerate(spec.gpu_types or []):
            if complete and gpu_type not in ctx.gpu_types:
                found.append(
                    ctx.at(
                        "Workload",
                        key,
                        f"spec.gpuTypes.{index}",
                        _unknown_gpu_type(gpu_type, ctx.gpu_types),
                    )
                )
        limit = project.spec.max_walltime if project is not None else None
        if spec.walltime is not None and limit is not None and spec.walltime > limit:
            found.append(
                ctx.at(
                    "Workload",
                    key,
                    "spec.walltime",
                    f"walltime {format_duration(spec.walltime)} exceeds project "
                    f"'{spec.project}' maxWalltime {format_duration(limit)}; "
                    "shorten it (checkpoint and resubmit) or raise the project's maxWalltime",
                )
            )
        # The fit check reads the references above: only meaningful once they are sound.
        if not found and complete and not usable(workload):
            found.extend(_check_fit(ctx, key, workload))
        elif not found and complete and spec.type == "inference" and spec.walltime is None:
            found.extend(_service_stopped(ctx, key, usable(workload), limit))
        yield from found


def _service_stopped(
    ctx: CheckContext, key: str, pools: Pools, project_limit: int | None
) -> list[Diagnostic]:
    """A service (``type: inference``) without walltime is given the time limit of where
    it runs (a project's or pool's ``maxWalltime``), and stopped then: said where that may
    happen, so that it is not found out from an outage."""
    limits = sorted(
        (
            min(t for t in (p.max_walltime, project_limit) if t is not None),
            f"{c.metadata.name}/{p.name}",
        )
        for c, p in pools
        if p.max_walltime is not None or project_limit is not None
    )
    if not limits:
        return []
    shown = ", ".join(f"{format_duration(t)} in {where}" for t, where in limits[:3])
    more = f" (and {len(limits) - 3} more pools)" if len(limits) > 3 else ""
    free = len(limits) < len(pools)
    remedy = (
        "list the pools without a limit in spec.nodePools"
        if free
        else "run it where no maxWalltime is set"
    )
    return [
        ctx.at(
            "Workload",
            key,
            "spec.type",
            f"a service without walltime is stopped after {shown}{more} (maxWalltime); {remedy}",
            severity="warning",
        )
    ]


# the fields by which a workload chooses pools, rather than asks of them
_CHOICES = frozenset({"spec.clusters", "spec.gpuTypes", "spec.nodePools"})


def _check_fit(ctx: CheckContext, key: str, workload: Workload) -> list[Diagnostic]:
    """The error for a workload no pool can ever hold (``Usable`` found none), naming the
    closest pool and why not: first one the workload chose (its clusters, gpuTypes and
    nodePools), then the fewest reasons, then the longest maxWalltime short of the
    walltime, then the biggest."""
    walltime = workload.spec.walltime or 0
    candidates = [
        (
            sum(r.field in _CHOICES for r in reasons),
            len(reasons),
            -min(pool.max_walltime or walltime, walltime),
            -pool.gpus_per_node,
            -gpu_memory(cluster, pool),
            cluster.metadata.name,
            pool.name,
            reasons,
        )
        for cluster in ctx.desired.clusters.values()
        for pool in cluster.spec.node_pools
        for reasons in [shortfalls(workload, cluster, pool)]
    ]
    spec = workload.spec
    need = f"one replica needs {spec.gpus} GPU{'s' if spec.gpus != 1 else ''} on one node"
    if not candidates:
        return [
            ctx.at("Workload", key, "spec", f"{need}, but no Cluster with node pools is declared")
        ]
    *_, cluster_name, pool_name, reasons = min(candidates, key=lambda c: c[:7])
    why = "; ".join(r.reason for r in reasons)
    return [
        ctx.at(
            "Workload",
            key,
            reasons[0].field,
            f"no node pool can ever hold this workload ({need}); the closest is "
            f"{cluster_name}/{pool_name}, but {why}",
        )
    ]
