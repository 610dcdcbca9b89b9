"""Plans as pull-request comments: a summary line first, sections collapsed, the whole
bounded to a size a comment can hold (views/sections.py does the bounding).

The top says what the plan does (and, with a policy change, its impact), where it comes
from, and which clusters did not answer; then the sections: the policy diff
(views/policy.py), the actions by op, least disruptive first, what waits, spec
warnings, the quota table. The full, unbounded plan goes to a file (``cp plan
--full-plan PATH``) for CI to attach. No terminal colours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from controlplane import collector
from controlplane.cli.views.plan import (
    cut_short,
    node_removed,
    placement,
    refused_line,
    short_commit,
    summary,
)
from controlplane.cli.views.policy import policy_sections
from controlplane.cli.views.policy import summary as policy_summary
from controlplane.cli.views.sections import DEFAULT_MAX_CHARS, Section, cell, render
from controlplane.cli.views.words import counted, tally
from controlplane.plan import Plan, QueueStatus, shrinks
from solvers.reasons import gpus as n
from specs.actions import Op, Pending
from specs.diagnostics import Diagnostic


def plan_top(plan: Plan, alerts: Sequence[str] = ()) -> str:
    """The summary line, then where the plan comes from, and ``alerts`` a reader must see
    (a base that does not load: no impact is shown)."""
    disrupted = sum(a.op.evicts or shrinks(a) for a in plan.actions)
    edits, over = plan.edits_waiting, len(plan.above_limits)
    lead = (
        f"**{summary(plan)}**"
        + (f" {counted(disrupted, 'running workload')} disturbed." if disrupted else "")
        + (f" {counted(edits, 'edited workload')} still on the old version." if edits else "")
        + (f" {counted(over, 'queue')} above its limit." if over == 1 else "")
        + (f" {counted(over, 'queue')} above their limit." if over > 1 else "")
        + (
            f" {counted(len(plan.finished), 'completed workload')} edited since: not run again."
            if plan.finished
            else ""
        )
    )
    lines = [lead, ""]
    if plan.policy is not None:
        lines += [f"**{policy_summary(plan.policy)}**", ""]
    origin = f"controlplane plan `{plan.id}`, made {plan.created_at.isoformat()}"
    if plan.git_commit:
        origin += f" at git `{short_commit(plan.git_commit)}`"
    lines += [origin, ""]
    for name, error in sorted(plan.unreachable.items()):
        lines += [
            f"> **cluster `{name}` did not answer** ({cell(error)}): nothing is planned there",
            "",
        ]
    lines += [line for gone in plan.nodes_removed for line in (f"> **{node_removed(gone)}**", "")]
    lines += [line for r in plan.refused for line in (f"> {cell(refused_line(r))}", "")]
    if plan.solver.cut_short:
        lines += [f"> {cut_short(plan)}", ""]
    lines += [line for alert in alerts for line in (f"> **Warning:** {cell(alert)}", "")]
    return "\n".join(lines) + "\n"


def plan_sections(plan: Plan, warnings: Sequence[Diagnostic] = ()) -> list[Section]:
    """The policy diff if any, actions by op (least disruptive first), what waits, spec
    warnings, the quota table."""
    sections = policy_sections(plan.policy) if plan.policy is not None else []
    for op in Op:
        mine = [a for a in plan.actions if a.op == op]
        if not mine:
            continue
        rows = []
        for a in mine:
            where = f"{a.cluster}/{a.pool}" if a.pool else a.cluster
            rows.append(
                f"| `{cell(a.workload)}` | {cell(where)} | {cell(placement(a))} | "
                f"**{a.reason.code.value}**: {cell(a.reason.message)} |"
            )
        sections.append(
            Section(
                title=f"{op.value.capitalize()} ({len(mine):,})",
                columns=["workload", "where", "placement", "reason"],
                rows=rows,
                noun=f"to {op.value}",
                open=op.evicts or op is Op.RESIZE,  # running work it disturbs: never folded
            )
        )
    if plan.pending:
        codes = tally(p.reason.code.value for p in plan.pending)
        sections.append(
            _workloads(f"Waiting ({len(plan.pending):,}: {codes})", plan.pending, "waiting")
        )
    if plan.finished:
        title = f"Completed, edited since ({len(plan.finished):,})"
        sections.append(_workloads(title, plan.finished, "completed"))
    if plan.above_limits:
        sections.append(
            Section(
                title=f"Above their limit ({len(plan.above_limits):,})",
                columns=["queue", "why, and until when"],
                rows=[
                    f"| `{cell(name)}` | {cell(q.above_limit or '')} |"
                    for _, name, q in plan.above_limits
                ],
                noun="queues",
                open=True,  # what the specs ask and the clusters do not do yet
            )
        )
    if warnings:
        sections.append(
            Section(
                title=f"Spec warnings ({len(warnings):,})",
                columns=["where", "field", "warning"],
                rows=[
                    f"| `{cell(f'{w.path}:{w.line}:{w.column}')}` | {cell(w.field or '')} | "
                    f"{cell(w.message)} |"
                    for w in warnings
                ],
                noun="warnings",
            )
        )
    sections.append(_quota(plan))
    return sections


def _workloads(title: str, entries: list[Pending], noun: str) -> Section:
    return Section(
        title=title,
        columns=["workload", "reason"],
        rows=[
            f"| `{cell(p.workload)}` | **{p.reason.code.value}**: {cell(p.reason.message)} |"
            for p in entries
        ],
        noun=noun,
    )


def _quota(plan: Plan) -> Section:
    rows = [_quota_row(f"{name} (dept)", q) for name, q in sorted(plan.departments.items())] + [
        _quota_row(name, q) for name, q in sorted(plan.projects.items())
    ]
    return Section(
        title=f"Quota after the plan ({len(plan.projects):,} projects, "
        f"{len(plan.departments):,} departments)",
        columns=["queue", "department", "deserved", "fair share", "allocated", "limit", "waiting"],
        align=["---", "---", "---:", "---:", "---:", "---:", "---:"],
        rows=rows,
        noun="queues",
    )


def _quota_row(label: str, q: QueueStatus) -> str:
    return (
        f"| {cell(label)} | {cell(q.department or '')} | {n(q.deserved)} | {n(q.fair_share)} | "
        f"{n(q.allocated)}{f' ({n(q.unreachable)} unreachable)' if q.unreachable else ''} | "
        f"{n(q.limit)} | {n(q.pending)} |"
    )


@collector.paused()  # a large plan's view: short-lived objects by the million
def plan_markdown(
    plan: Plan,
    warnings: Sequence[Diagnostic] = (),
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    full: str | None = None,
    alerts: Sequence[str] = (),
    applied: tuple[str, Sequence[Outcome]] | None = None,
) -> str:
    """The plan as a pull-request comment within ``max_chars`` (0: the whole plan);
    ``applied``: its apply status and each action's outcome (``cp show``), first."""
    top = plan_top(plan, alerts)
    sections = plan_sections(plan, warnings)
    if applied is not None:
        status, outcomes = applied
        rows = [
            f"| {cell(o.status)} | {cell(o.op)} | `{cell(o.workload)}` | {cell(o.job or '')} | "
            f"{cell(o.message)} |"
            for o in outcomes
        ]
        outcome = Section(
            title=f"Apply status: {status}",
            columns=["status", "op", "workload", "job", "message"],
            rows=rows,
            noun="actions",
            open=True,
        )
        sections = [outcome, *sections]
    return render(top, sections, max_chars=max_chars, full=full)


class Outcome(Protocol):
    """An action's recorded outcome, as the store keeps it."""

    status: str
    op: str
    workload: str
    job: str | None
    message: str
