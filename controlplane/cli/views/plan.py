"""How a plan looks on a terminal (rich); as a pull-request comment: views/markdown.py."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.text import Text

from controlplane import collector
from controlplane.cli.views.entries import print_entries
from controlplane.cli.views.policy import print_policy
from controlplane.cli.views.quota import print_quota
from controlplane.cli.views.words import agrees, counted, tally
from controlplane.plan import NodeRemoved, Plan, Refused
from solvers.reasons import shape, stamp
from specs.actions import Action, Op, Pending, ReasonCode

_SYMBOL = {
    Op.SUBMIT: ("+", "green"),
    Op.RESIZE: ("~", "cyan"),
    Op.MOVE: (">", "yellow"),
    Op.PREEMPT: ("!", "red"),
    Op.CANCEL: ("-", "red"),
}


def placement(action: Action) -> str:
    if not action.replicas:
        return f"job {action.job}" if action.job else ""
    by_node = Counter(r.node or "(cluster decides)" for r in action.replicas)
    per = action.replicas[0].gpus
    where = ", ".join(f"{n}" if c == 1 else f"{n} x{c}" for n, c in sorted(by_node.items()))
    return f"{shape(len(action.replicas), per)} on {where}"


def short_commit(commit: str) -> str:
    """``abc123…-dirty`` shortened to 12 hex digits, keeping the dirty marker."""
    sha, dirty, _ = commit.partition("-dirty")
    return sha[:12] + dirty


def summary(plan: Plan) -> str:
    counts = Counter(a.op for a in plan.actions)
    parts = [f"{counts[op]:,} to {op.value}" for op in Op if counts[op]]
    shrinking = sum(n.shrinks_to is not None for n in plan.nodes_removed)
    if removed := len(plan.nodes_removed) - shrinking:
        parts.append(f"{counted(removed, 'node')} to empty and remove")
    if shrinking:
        parts.append(f"{counted(shrinking, 'node')} to shrink")
    body = ", ".join(parts) if parts else "no changes"
    said = f"Plan: {body}; {len(plan.pending):,} waiting"
    if not plan.solver.cut_short:
        return said + "."
    # said again where a long plan ends: its first lines have scrolled away by then
    if not plan.solver.work_left:  # CP-SAT's own limit: no step left undone
        return f"{said}; {UNPROVEN}."
    return f"{said}; cut short ({', '.join(plan.solver.cut_steps)}): the next plan may do more."


def node_removed(removed: NodeRemoved) -> str:
    """A node the specs remove or shrink, and the work that moves off it first."""
    work, one = ", ".join(removed.workloads), len(removed.workloads) == 1
    verbs = "moves off it, or waits" if one else "move off it, or wait"
    moving = f"{work} {verbs} for room to (below)" if work else "work not ours holds it"
    if removed.shrinks_to is not None:
        size = counted(removed.shrinks_to, "GPU")
        return (
            f"node {removed.node} of {removed.cluster} shrinks to {size} (its Cluster spec "
            f"gives it {removed.shrinks_to}; its work holds more, and no new work fits there): "
            f"{moving}"
        )
    return (
        f"node {removed.node} of {removed.cluster} leaves once empty (its Cluster spec no "
        f"longer has it; it takes no new work): {moving}"
    )


def refused_line(r: Refused) -> str:
    """A job this plan leaves as it is: acting on it failed lately."""
    of = f" of {r.workload}" if r.workload else ""
    times = "once" if r.count == 1 else f"{r.count} times in a row"
    kept = "left as it is" if r.op == "cancel" else "no victim"
    return (
        f"job {r.job}{of} on {r.cluster} is {kept} until {stamp(r.retry_at)}: its {r.op} "
        f"failed {times}, last at {stamp(r.at)} ({r.message or 'no message'})"
    )


def shown_again(plan: Plan) -> str:
    """Under a stored plan an apply found nothing new to do beside: why it is an old one."""
    return (
        f"This is the plan last applied (made {stamp(plan.created_at)}): nothing has changed "
        "since, and what waits is told as of now."
    )


UNPROVEN = (
    "CP-SAT stopped at its time limit: the plan has the better of its answer so far and the "
    "greedy's"
)


def cut_short(plan: Plan) -> str:
    """The steps that did not finish: the plan is the best reached, not a fixed point (or,
    when only CP-SAT's own limit stopped it, an answer not proven best)."""
    if not plan.solver.work_left:
        return f"{UNPROVEN}: " + "; ".join(plan.solver.cut_short) + "."
    return "Cut short (the plan is what was reached): " + "; ".join(plan.solver.cut_short) + "."


@collector.paused()  # a large plan's view: short-lived objects by the million
def print_plan(console: Console, plan: Plan) -> None:
    console.print(
        Text.assemble(
            ("Plan ", "bold"),
            (plan.id, "bold cyan"),
            f"  made {stamp(plan.created_at)}"
            + (f"  git {short_commit(plan.git_commit)}" if plan.git_commit else ""),
        )
    )
    for name, error in sorted(plan.unreachable.items()):
        console.print(
            Text.assemble(
                ("  ! unreachable ", "red"),
                (name, "bold"),
                f"  {error}: nothing is planned there; what may run there waits",
            ),
            soft_wrap=True,
        )
    for removed in plan.nodes_removed:
        console.print(Text.assemble(("  ! ", "red"), node_removed(removed)), soft_wrap=True)
    for r in plan.refused:
        console.print(Text.assemble(("  ! ", "yellow"), refused_line(r)), soft_wrap=True)
    if plan.actions:
        rows = []
        for a in plan.actions:
            sym, color = _SYMBOL[a.op]
            where = f"{a.cluster}/{a.pool}" if a.pool else a.cluster
            rows.append(
                (
                    Text(f"  {sym} {a.op.value:<7}", style=color),
                    Text.assemble((a.workload, "bold"), f"  {where}  {placement(a)}"),
                    Text.assemble(
                        (a.reason.code.value, color),
                        f": {a.reason.message}",
                        style="dim" if a.op == Op.SUBMIT else "",
                    ),
                )
            )
        print_entries(console, rows)
    elif plan.nodes_removed:
        console.print(
            "[green]No changes now.[/] The work that must leave the nodes the specs remove or "
            "shrink waits for room elsewhere (above)."
        )
    elif plan.unreachable:  # nothing was checked there: no claim that they match
        console.print("[green]No changes[/] on the clusters that answered.")
    elif over := len(plan.above_limits):
        console.print(
            f"[green]No changes now.[/] {counted(over, 'queue')} "
            f"{agrees(over, 'stay')} above {'its' if over == 1 else 'their'} limit "
            "(below)."
        )
    elif edits := plan.edits_waiting:
        console.print(
            f"[green]No changes now.[/] {counted(edits, 'edited workload')} still "
            f"{agrees(edits, 'run')} the old version until the edit can be made "
            "(below)."
        )
    elif ending := sum(p.reason.code is ReasonCode.ENDING for p in plan.pending):
        console.print(
            f"[green]No changes now.[/] The job of {counted(ending, 'workload')} winds down; "
            "the next plan sees how it ended (below)."
        )
    elif plan.finished:
        console.print(
            f"[green]No changes.[/] {counted(len(plan.finished), 'completed workload')} "
            f"edited since {'it' if len(plan.finished) == 1 else 'they'} ran "
            f"{'does' if len(plan.finished) == 1 else 'do'} not run again (below)."
        )
    elif waits := len(plan.pending):  # the specs ask for work that runs nowhere yet
        console.print(
            f"[green]No changes now.[/] {counted(waits, 'workload')} "
            f"{agrees(waits, 'wait')} (below)."
        )
    else:
        console.print("[green]No changes.[/] The clusters match the specs.")
    if plan.policy is not None:
        console.print()
        print_policy(console, plan.policy)
    codes = tally(p.reason.code.value for p in plan.pending)
    _print_workloads(
        console, f"Waiting ({len(plan.pending):,}: {codes})", plan.pending, "~", "yellow"
    )
    title = f"Completed, edited since ({len(plan.finished):,})"
    _print_workloads(console, title, plan.finished, "=", "dim")
    if plan.above_limits:
        console.print()
        console.print(Text("Above their limit", style="bold"))
        print_entries(
            console,
            [
                (
                    Text("  !", style="yellow"),
                    Text(f"{kind} {name}", style="bold"),
                    Text(q.above_limit or ""),
                )
                for kind, name, q in plan.above_limits
            ],
        )
    console.print()
    print_quota(console, plan.projects, plan.departments)
    console.print()
    console.print(Text(summary(plan), style="bold"))
    if plan.solver.cut_short:
        console.print(Text(cut_short(plan), style="yellow"))


def _print_workloads(
    console: Console, title: str, entries: list[Pending], symbol: str, color: str
) -> None:
    """A section of workloads with their reasons (none: no section)."""
    if not entries:
        return
    console.print()
    console.print(Text(title, style="bold"))
    print_entries(
        console,
        [
            (
                Text(f"  {symbol}", style=color),
                Text(p.workload, style="bold"),
                Text.assemble((p.reason.code.value, color), f": {p.reason.message}"),
            )
            for p in entries
        ],
    )
