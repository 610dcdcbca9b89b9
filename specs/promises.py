"""Checks of what quotas promise: non-preemptible demand a level cannot run at once,
deserved quotas above what the clusters hold, children deserving more than their
department (warnings: allowed, as in KAI, but a deserved quota is a promise), and a cost
budget no GPU-hour is priced against."""

from __future__ import annotations

from collections.abc import Iterator

import networkx as nx

from specs.checking import CheckContext
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.hierarchy import build_tree, department_id, project_id
from specs.models import QuotaSpec, total_quota

# ------------------------------------------------------------------ non-preemptible demand


def check_non_preemptible_demand(ctx: CheckContext) -> Iterator[Diagnostic]:
    """Non-preemptible work only runs within deserved quota, on every level of the tree.

    A single non-preemptible workload bigger than its project's deserved quota can never
    start at all; the non-preemptible workloads under a department needing more than it
    deserves cannot all run at once. Both are warnings: such work is allowed to sit
    pending (KAI keeps such jobs pending too), and an error would stop the plans of every
    project for one team's notebook too many.
    """
    desired = ctx.desired
    demand: dict[str, int] = {}  # project -> non-preemptible GPUs (gpus x minReplicas)
    for key, workload in desired.workloads.items():
        spec = workload.spec
        if spec.is_preemptible:
            continue
        need = spec.gpus * spec.effective_min_replicas
        demand[spec.project] = demand.get(spec.project, 0) + need
        project = desired.projects.get(spec.project)
        if project is not None and need > total_quota(project.spec.quota).gpus:
            yield ctx.at(
                "Workload",
                key,
                "spec.gpus",
                f"this non-preemptible workload needs {need} GPUs (gpus x minReplicas) but "
                f"project '{spec.project}' deserves only {total_quota(project.spec.quota).gpus}; "
                "non-preemptible work only starts within deserved quota, so it will stay "
                "pending: make it preemptible, shrink it or raise the project's quota (spec.quota.gpus)",
                severity="warning",
            )
    if not demand:
        return
    tree = build_tree(desired)
    for name, dept in sorted(desired.departments.items()):
        deserved = total_quota(dept.spec.quota).gpus
        below = nx.descendants(tree, department_id(name))
        need = sum(
            demand.get(project, 0) for project in desired.projects if project_id(project) in below
        )
        if need > deserved:
            where = "spec.quota.gpus" if not isinstance(dept.spec.quota, list) else "spec.quota"
            yield ctx.at(
                "Department",
                name,
                where,
                f"the non-preemptible workloads under department '{name}' need {need} GPUs "
                f"(gpus x minReplicas) but it deserves only {deserved}; non-preemptible work "
                "runs only within deserved quota on every level, so some of it will wait: "
                f"raise quota.gpus to at least {need} or make some of it preemptible",
                severity="warning",
            )


# ------------------------------------------------------------------ promises quotas make


def _capacity(desired: DesiredState) -> tuple[int | None, dict[str, int]]:
    """GPUs the clusters hold, in total and per GPU type, as far as the specs say: a pool
    tells only with ``nodes`` (real clusters need not declare it; the snapshot knows). The
    total is None unless every pool declares nodes; a type is missing unless all of its
    pools do."""
    total = 0
    known = True
    by_type: dict[str, int] = {}
    unknown_types: set[str] = set()
    for c in desired.clusters.values():
        for pool in c.spec.node_pools:
            if pool.nodes <= 0:
                known = False
                unknown_types.add(pool.gpu_type)
                continue
            gpus = pool.nodes * pool.gpus_per_node
            total += gpus
            by_type[pool.gpu_type] = by_type.get(pool.gpu_type, 0) + gpus
    types = {t: g for t, g in by_type.items() if t not in unknown_types}
    return (total if known and desired.clusters else None), types


def check_capacity(ctx: CheckContext) -> Iterator[Diagnostic]:
    """Deserved quota the clusters cannot hold: for one queue, or the top level together."""
    desired = ctx.desired
    total, by_type = _capacity(desired)
    queues: list[tuple[str, str, QuotaSpec, bool]] = [
        ("Department", name, d.spec.quota, d.spec.parent is None)
        for name, d in sorted(desired.departments.items())
    ] + [
        ("Project", name, p.spec.quota, p.spec.department is None)
        for name, p in sorted(desired.projects.items())
    ]
    held = f"the clusters hold {total} GPUs" if total is not None else ""
    for kind, name, quota, _ in queues:
        if isinstance(quota, list):
            for index, entry in enumerate(quota):
                have = by_type.get(entry.gpu_type)
                if have is not None and entry.gpus > have:
                    yield ctx.at(
                        kind,
                        name,
                        f"spec.quota.{index}.gpus",
                        f"deserved {entry.gpus} {entry.gpu_type} GPUs, but the clusters hold "
                        f"only {have} of that type; lower it to at most {have} or add nodes",
                        severity="warning",
                    )
        elif total is not None and quota.gpus > total:
            yield ctx.at(
                kind,
                name,
                "spec.quota.gpus",
                f"deserved {quota.gpus} GPUs, but {held}; this quota can never be honoured: "
                f"lower it to at most {total} or add nodes",
                severity="warning",
            )
    top = [(kind, name, q) for kind, name, q, is_top in queues if is_top]
    promised = sum(total_quota(q).gpus for _, _, q in top)
    if total is not None and promised > total and len(top) > 1:
        kind, name, biggest = max(top, key=lambda t: (total_quota(t[2]).gpus, t[1]))
        parts = ", ".join(
            f"{n} {total_quota(q).gpus}"
            for _, n, q in sorted(top, key=lambda t: t[1])
            if total_quota(q).gpus
        )
        yield ctx.at(
            kind,
            name,
            "spec.quota" if isinstance(biggest, list) else "spec.quota.gpus",
            f"the top-level deserved quotas add up to {promised} GPUs ({parts}), but {held}; "
            "they cannot all be honoured at once: lower them or add nodes",
            severity="warning",
        )


def check_overcommitted(ctx: CheckContext) -> Iterator[Diagnostic]:
    """A department whose children deserve more than it does (allowed, as in KAI: the
    children share the department's quota, but they cannot all get theirs at once)."""
    tree = build_tree(ctx.desired)
    for name, dept in sorted(ctx.desired.departments.items()):
        deserved = total_quota(dept.spec.quota).gpus
        children = sorted(
            (tree.nodes[c]["name"], tree.nodes[c]["quota"].gpus)
            for c in tree.successors(department_id(name))
        )
        together = sum(g for _, g in children)
        if together <= deserved:
            continue
        parts = ", ".join(f"{n} {g}" for n, g in children if g)
        yield ctx.at(
            "Department",
            name,
            "spec.quota" if isinstance(dept.spec.quota, list) else "spec.quota.gpus",
            f"its children deserve {together} GPUs together ({parts}), more than department "
            f"'{name}' deserves ({deserved}); they cannot all get their deserved quota at once: "
            f"raise quota.gpus to {together} or lower the children's",
            severity="warning",
        )


def check_unpriced_budgets(ctx: CheckContext) -> Iterator[Diagnostic]:
    """A ``costPerMonth`` budget where no GPU type of any cluster has a price
    (``costPerGpuHour`` is 0 when not given): every GPU-hour costs 0, so it never binds."""
    if not ctx.clusters_complete or not ctx.desired.clusters:
        return
    types = [t for c in ctx.desired.clusters.values() for t in c.spec.gpu_types.values()]
    if any(t.cost_per_gpu_hour > 0 for t in types):
        return
    for name, project in sorted(ctx.desired.projects.items()):
        budget = project.spec.budget
        if budget is not None and budget.cost_per_month is not None:
            yield ctx.at(
                "Project",
                name,
                "spec.budget.costPerMonth",
                "a cost budget, but no GPU type of the clusters has a price (costPerGpuHour, "
                "0 when not given): every GPU-hour costs 0, so this budget is never spent; "
                "price the GPU types, or budget gpuHoursPerMonth",
                severity="warning",
            )
