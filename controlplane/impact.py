"""What a change to the specs does: the policy diff and its effect on workloads.

A reviewer of a pull request that cuts a department's quota wants to see, before merging,
the figures that change (quota 36 -> 20), the fair shares that follow (28 -> 20) and the
workloads that would be reclaimed because of it — not only the job actions. Two sources
of "before":

- ``cp plan --base REF``: the specs at ``REF`` planned against the same observation as
  the working specs. Every policy field of every project and department is compared
  (:func:`spec_changes`), fair shares and allocations of both plans side by side
  (:func:`share_changes`), and each workload's fate under both (:func:`workload_changes`):
  what would start, be reclaimed, preempted, moved or replaced that would not otherwise.
- every other plan: the quota table and the GPU prices of the plan last applied
  (:func:`table_changes`), so the plan that acts on a lowered limit says which limit
  changed, and one after a price change (which moves cost budgets) says which price.

Pure: plans and specs in, rows out. The CLI renders them (controlplane/cli/views/).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from pydantic import BaseModel

from controlplane.plan import (
    Plan,
    PolicyChange,
    PolicyDiff,
    QueueStatus,
    ShareChange,
    WorkloadChange,
    price_field,
    shrinks,
)
from solvers.sitepolicy.usage import DEFAULT_HALF_LIFE
from specs.actions import Op, Reason, ReasonCode
from specs.desired import DesiredState
from specs.diff import Scalar, flatten
from specs.durations import format_duration
from specs.renames import earlier_names

# what a reader cares about in a project's or department's spec (not where its objects go,
# nor the names it had)
_NOT_POLICY = frozenset({"namespace", "renamedFrom"})
RENAMED = "renamedFrom"  # recorded, not compared: it pairs a project with its old name
# what the quota table has columns for
_IN_TABLE = ("quota", "rank", "department", "parent")
_PROJECT_DEFAULTS: dict[str, Scalar] = {
    "fairshare.halfLife": format_duration(DEFAULT_HALF_LIFE),  # as flatten writes durations
    "fairshare.k": 1.0,
    "fairshare.byCost": False,
}


# ------------------------------------------------------------------ policy from the specs


def spec_changes(base: DesiredState, head: DesiredState) -> list[PolicyChange]:
    """Every policy field of every cluster, department and project that differs, by kind
    and name (a cluster's node pools by name: ``nodePools[a100].nodes``); one added or
    removed is one row (``field`` empty), and a department or project added has its
    figures after it."""
    out: list[PolicyChange] = []
    names = _renamed(base.projects, {k: p.spec.renamed_from for k, p in head.projects.items()})
    for kind, before, after in (
        ("cluster", base.clusters, head.clusters),
        ("department", base.departments, head.departments),
        ("project", {names.get(k, k): p for k, p in base.projects.items()}, head.projects),
    ):
        for name in sorted(set(before) | set(after)):
            if name not in before or name not in after:
                out.append(
                    PolicyChange(
                        kind=kind,
                        name=name,
                        field="",
                        before=None if name not in before else "present",
                        after=None if name not in after else "present",
                    )
                )
                if name in after and kind != "cluster":  # a queue added: its figures too
                    figures = _figures(kind, after[name].spec)
                    out += [
                        PolicyChange(kind=kind, name=name, field=field, after=figures[field])
                        for field in sorted(figures, key=_field_order)
                        if figures[field] is not None
                    ]
                continue
            if kind == "project" and (was := before[name].metadata.name) != name:
                out.append(PolicyChange(kind=kind, name=name, field="name", before=was, after=name))
            old, new = (_figures(kind, side[name].spec) for side in (before, after))
            for field in sorted(set(old) | set(new), key=_field_order):
                if old.get(field) != new.get(field):
                    out.append(
                        PolicyChange(
                            kind=kind,
                            name=name,
                            field=field,
                            before=old.get(field),
                            after=new.get(field),
                        )
                    )
    return out


def _figures(kind: str, spec: BaseModel) -> dict[str, Scalar]:
    """Every policy field of a spec, flattened, with the defaults a project's leaves out
    (fairshare: a halfLife of 7d, not "none", which would read as no decay)."""
    figures = flatten(spec.model_dump(by_alias=True, mode="json"), skip=_NOT_POLICY)
    if kind == "project":
        for field, default in _PROJECT_DEFAULTS.items():
            figures.setdefault(field, default)
    return figures


def policy_figures(kind: str, spec: BaseModel) -> dict[str, Scalar]:
    """What a plan's quota table records of a project's or department's spec beyond its
    own columns (the quota's sums, rank, department): the figures :func:`table_changes`
    compares."""
    # a per-GPU-type quota's figures (``quota[a100].limit``) are not the table's sums
    figures = {
        field: value
        for field, value in _figures(kind, spec).items()
        if not field.startswith(_IN_TABLE) or field.startswith("quota[")
    }
    if renamed := getattr(spec, "renamed_from", None):  # to pair it with its old name
        figures[RENAMED] = list(renamed)
    return figures


def cluster_prices(desired: DesiredState) -> dict[str, dict[str, float]]:
    """Each cluster's price per GPU-hour of each of its GPU types, as its spec has them
    (0 where none is given): what a plan records so that the next one can say which price
    changed since it was applied (:func:`table_changes`)."""
    return {
        name: {t: gt.cost_per_gpu_hour for t, gt in sorted(c.spec.gpu_types.items())}
        for name, c in sorted(desired.clusters.items())
    }


def _field_order(field: str) -> tuple[int, str]:
    """Quota first (what the issue of a cut is about), then the rest by name."""
    return (0 if field.startswith("quota") else 1, field)


# ------------------------------------------------------------------ policy from quota tables


def table_changes(before: Plan, after: Plan) -> list[PolicyChange]:
    """Policy figures of the quota tables that differ between ``before`` (the plan last
    applied) and ``after``: deserved, limit, over-quota weight, rank and department, and
    the rest of the spec's (budget, fairshare, walltimes) where ``before`` recorded them;
    first the prices per GPU-hour of the clusters both plans priced (:func:`price_changes`)."""
    out = price_changes(before.prices, after.prices)
    back = {new: old for old, new in _plan_renames(before, after).items()}
    # whether ``before`` recorded its queues' other figures (an older plan did not): a
    # project's always has some (defaults), a department's may have none
    recorded = any(q.policy for q in before.projects.values())
    for kind, old_table, new_table in _tables(before, after):
        for name in sorted(set(old_table) | set(new_table)):
            if name not in old_table or name not in new_table:  # added or removed: one row
                out.append(
                    PolicyChange(
                        kind=kind,
                        name=name,
                        field="",
                        before="present" if name in old_table else None,
                        after="present" if name in new_table else None,
                    )
                )
                continue
            old, new = old_table[name], new_table[name]
            if kind == "project" and (was := back.get(name, name)) != name:
                out.append(PolicyChange(kind=kind, name=name, field="name", before=was, after=name))
            for field, a, b in (
                ("quota.gpus", old.deserved, new.deserved),
                ("quota.limit", old.limit, new.limit),
                ("quota.overQuotaWeight", old.weight, new.weight),
                ("rank", old.rank, new.rank),
                ("department", old.department, new.department),
            ):
                # a field the older plan did not record is not a change
                if a != b and not (field in ("quota.overQuotaWeight", "rank") and a is None):
                    out.append(PolicyChange(kind=kind, name=name, field=field, before=a, after=b))
            if recorded:
                for field in sorted((set(old.policy) | set(new.policy)) - {RENAMED}):
                    a, b = old.policy.get(field), new.policy.get(field)
                    if a != b:
                        out.append(
                            PolicyChange(kind=kind, name=name, field=field, before=a, after=b)
                        )
    return out


def price_changes(
    before: Mapping[str, Mapping[str, float]], after: Mapping[str, Mapping[str, float]]
) -> list[PolicyChange]:
    """The prices per GPU-hour that differ, of the clusters both sides priced (a cluster
    added or removed is not a price change; an older plan recorded no prices at all), a
    GPU type added or removed with its price on one side only."""
    out = []
    for name in sorted(set(before) & set(after)):
        old, new = before[name], after[name]
        for gpu_type in sorted(set(old) | set(new)):
            if old.get(gpu_type) != new.get(gpu_type):
                out.append(
                    PolicyChange(
                        kind="cluster",
                        name=name,
                        field=price_field(gpu_type),
                        before=old.get(gpu_type),
                        after=new.get(gpu_type),
                    )
                )
    return out


def share_changes(
    before: Plan, after: Plan, only: Iterable[tuple[str, str]] | None = None
) -> list[ShareChange]:
    """Fair share and GPUs allocated after each plan, where either differs (or for the
    queues in ``only``, whatever they are)."""
    wanted = set(only) if only is not None else None
    out = []
    for kind, old_table, new_table in _tables(before, after):
        for name in sorted(set(old_table) | set(new_table)):
            old, new = old_table.get(name), new_table.get(name)
            row = ShareChange(
                kind=kind,
                name=name,
                fair_share_before=old.fair_share if old else None,
                fair_share_after=new.fair_share if new else None,
                allocated_before=old.allocated if old else None,
                allocated_after=new.allocated if new else None,
            )
            if wanted is not None:
                if (kind, name) in wanted:
                    out.append(row)
            elif (row.fair_share_before, row.allocated_before) != (
                row.fair_share_after,
                row.allocated_after,
            ):
                out.append(row)
    return out


def _tables(
    before: Plan, after: Plan
) -> list[tuple[str, dict[str, QueueStatus], dict[str, QueueStatus]]]:
    """Both plans' quota tables, kind by kind; a project renamed since (its renamedFrom)
    under its new name in both."""
    names = _plan_renames(before, after)
    projects = {names.get(k, k): q for k, q in before.projects.items()}
    return [
        ("department", before.departments, after.departments),
        ("project", projects, after.projects),
    ]


def _plan_renames(before: Plan, after: Plan) -> dict[str, str]:
    """Old name -> new of the projects ``after`` renamed since ``before``."""
    renamed_from = {k: q.policy.get(RENAMED, []) for k, q in after.projects.items()}
    return _renamed(before.projects, renamed_from)


def _renamed(before: Collection[str], renamed_from: dict[str, list[str]]) -> dict[str, str]:
    """Old name -> new of the projects renamed since ``before`` (new name -> its
    renamedFrom): an old name ``before`` has, that the new side no longer has."""
    return {
        old: new
        for new, olds in renamed_from.items()
        for old in olds
        if old in before and old not in renamed_from and new not in before
    }


# ------------------------------------------------------------------ workloads


def fate(plan: Plan, workload: str) -> tuple[str, Reason | None]:
    """What a plan does to one workload, in a word, with the reason behind it."""
    actions = [a for a in plan.actions if a.workload == workload]
    ops = {a.op for a in actions}
    if actions:
        first = max(actions, key=lambda a: a.op.evicts)  # the disruption, if any
        if Op.SUBMIT in ops and ops & {Op.PREEMPT, Op.CANCEL}:
            return "replaced", first.reason
        if Op.PREEMPT in ops:
            reclaimed = first.reason.code is ReasonCode.RECLAIM
            return ("reclaimed" if reclaimed else "preempted"), first.reason
        if Op.CANCEL in ops:
            return "cancelled", first.reason
        if Op.MOVE in ops:
            return "moved", first.reason
        if Op.RESIZE in ops:
            return ("shrinks" if shrinks(first) else "grows"), first.reason
        return "starts", first.reason
    for p in plan.pending:
        if p.workload == workload:
            return "waits", p.reason
    return "unchanged", None


ABSENT = "not in the specs"


def workload_changes(
    base: Plan,
    head: Plan,
    base_keys: Collection[str],
    head_keys: Collection[str],
    renamed: Mapping[str, str] | None = None,
) -> list[WorkloadChange]:
    """The workloads whose fate differs between the base plan and this one (of the
    workloads either side's specs name: ``base_keys``, ``head_keys``); ``renamed``: old
    name -> new of the workloads of projects the change renames."""
    out = []
    renamed = {k: v for k, v in (renamed or {}).items() if k in base_keys}
    back = {new: old for old, new in renamed.items()}
    base_keys = {renamed.get(k, k) for k in base_keys}
    for key in sorted(set(base_keys) | set(head_keys)):
        was, before = fate(base, back.get(key, key))
        now, why = fate(head, key)
        if key not in base_keys:  # "unchanged" would say it was there
            was = ABSENT
        if key not in head_keys and now == "unchanged":
            now = ABSENT
        if why is None and before is not None:  # only the base acts: what it would, and why
            why = before.model_copy(update={"message": f"without the change: {before.message}"})
        if was != now:
            out.append(WorkloadChange(workload=key, base=was, head=now, reason=why))
    return out


def base_diff(
    base_desired: DesiredState,
    head_desired: DesiredState,
    base: Plan,
    head: Plan,
    label: str,
) -> PolicyDiff:
    """``cp plan --base``: the change between two spec trees planned on one observation
    (the simulator's hardware each as its own specs have it)."""
    return PolicyDiff(
        against=f"{label} (plan {base.id})",
        base=label,
        changes=spec_changes(base_desired, head_desired),
        shares=share_changes(base, head),
        workloads=workload_changes(
            base,
            head,
            base_desired.workloads.keys(),
            head_desired.workloads.keys(),
            renamed=earlier_names(head_desired),
        ),
    )


def applied_diff(last: Plan | None, head: Plan) -> PolicyDiff | None:
    """Every other plan: the policy figures changed since the plan last applied, and the
    fair shares of the queues they belong to; None when nothing changed."""
    if last is None:
        return None
    changes = table_changes(last, head)
    if not changes:
        return None
    # a queue renamed, nothing else: its fair share and allocation are the same queue's
    # (accepted: a rename may move a tie broken by name, and that row is not shown)
    queues = {(c.kind, c.name) for c in changes if c.field != "name"}
    return PolicyDiff(
        against=f"the plan last applied ({last.id})",
        changes=changes,
        shares=share_changes(last, head, only=queues | _under(last, head, queues)),
    )


def _under(before: Plan, after: Plan, queues: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The queues below the departments in ``queues``, in either plan: a department's cut
    moves its children's fair shares."""
    parents = {name for kind, name in queues if kind == "department"}
    found: set[tuple[str, str]] = set()
    while parents:
        children = {
            (kind, name)
            for kind, old_table, new_table in _tables(before, after)
            for name, q in (*old_table.items(), *new_table.items())
            if q.department in parents
        } - found
        found |= children
        parents = {name for kind, name in children if kind == "department"}
    return found
