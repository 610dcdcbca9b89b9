"""How plans, quota tables and history look to people: rich for terminals, Markdown for PRs."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table
from rich.text import Text

from controlplane.plan import Plan, QueueStatus
from controlplane.store import ActionRow, PlanRow
from specs.actions import Action, Op

_SYMBOL = {Op.SUBMIT: ("+", "green"), Op.RESIZE: ("~", "cyan"), Op.MOVE: (">", "yellow"),
           Op.PREEMPT: ("!", "red"), Op.CANCEL: ("-", "red")}


def _n(x: float | None) -> str:
    if x is None:
        return "-"
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"


def placement(action: Action) -> str:
    if not action.replicas:
        return f"job {action.job}" if action.job else ""
    by_node = Counter(r.node or "(cluster decides)" for r in action.replicas)
    per = action.replicas[0].gpus
    where = ", ".join(f"{n}" if c == 1 else f"{n} x{c}" for n, c in sorted(by_node.items()))
    count = len(action.replicas)
    unit = "GPU" if per == 1 else "GPUs"
    shape = f"{count} x {per} {unit}" if count > 1 else f"{per} {unit}"
    return f"{shape} on {where}"


def summary(plan: Plan) -> str:
    counts = Counter(a.op for a in plan.actions)
    parts = [f"{counts[op]} to {op.value}" for op in Op if counts[op]]
    body = ", ".join(parts) if parts else "no changes"
    return f"Plan: {body}; {len(plan.pending)} waiting."


def print_plan(console: Console, plan: Plan) -> None:
    console.print(Text.assemble(("Plan ", "bold"), (plan.id, "bold cyan"),
                                f"  made {plan.created_at.isoformat()}"
                                + (f"  git {plan.git_commit[:12]}" if plan.git_commit else "")))
    if plan.actions:
        width = max(len(a.workload) for a in plan.actions)
        for a in plan.actions:
            sym, color = _SYMBOL[a.op]
            where = f"{a.cluster}/{a.pool}" if a.pool else a.cluster
            line = Text.assemble((f"  {sym} {a.op.value:<8}", color), (f"{a.workload:<{width}}", "bold"),
                                 f"  {where}  {placement(a)}")
            console.print(line, soft_wrap=True)
            console.print(Text.assemble(("      ", ""), (a.reason.code.value, color),
                                        f": {a.reason.message}", style="dim" if a.op == Op.SUBMIT else ""),
                          soft_wrap=False)
    else:
        console.print("[green]No changes.[/] The clusters match the specs.")
    if plan.pending:
        console.print()
        console.print(Text("Waiting", style="bold"))
        for p in plan.pending:
            console.print(Text.assemble(("  ~ ", "yellow"), (p.workload, "bold"), "  ",
                                        (p.reason.code.value, "yellow"), f": {p.reason.message}"))
    console.print()
    print_quota(console, plan.projects, plan.departments)
    console.print()
    console.print(Text(summary(plan), style="bold"))


def print_quota(console: Console, projects: dict[str, QueueStatus],
                departments: dict[str, QueueStatus]) -> None:
    t = Table(title="Quota (GPUs, after the plan)", title_justify="left", header_style="bold")
    for col in ("project", "department", "deserved", "fair share", "allocated", "limit", "waiting"):
        t.add_column(col, justify="left" if col in ("project", "department") else "right")
    for name, q in sorted(departments.items()):
        t.add_row(f"[bold]{name}[/] (dept)", q.department or "", _n(q.deserved), _n(q.fair_share),
                  _n(q.allocated), _n(q.limit), _n(q.pending))
    for name, q in sorted(projects.items()):
        over = q.allocated > q.deserved
        alloc = f"[yellow]{_n(q.allocated)}[/]" if over else _n(q.allocated)
        t.add_row(name, q.department or "", _n(q.deserved), _n(q.fair_share), alloc,
                  _n(q.limit), _n(q.pending))
    console.print(t)


def plan_markdown(plan: Plan) -> str:
    """A plan as a pull-request comment."""
    lines = [f"### controlplane plan `{plan.id}`", "", summary(plan), ""]
    if plan.actions:
        lines += ["| op | workload | where | placement | reason |", "|---|---|---|---|---|"]
        for a in plan.actions:
            where = f"{a.cluster}/{a.pool}" if a.pool else a.cluster
            lines.append(f"| {a.op.value} | `{a.workload}` | {where} | {placement(a)} | "
                         f"**{a.reason.code.value}**: {a.reason.message} |")
        lines.append("")
    if plan.pending:
        lines += ["<details><summary>Waiting workloads</summary>", "",
                  "| workload | reason |", "|---|---|"]
        lines += [f"| `{p.workload}` | **{p.reason.code.value}**: {p.reason.message} |" for p in plan.pending]
        lines += ["", "</details>", ""]
    lines += ["| project | deserved | fair share | allocated | limit | waiting |", "|---|---:|---:|---:|---:|---:|"]
    for name, q in sorted(plan.projects.items()):
        lines.append(f"| {name} | {_n(q.deserved)} | {_n(q.fair_share)} | {_n(q.allocated)} | "
                     f"{_n(q.limit)} | {_n(q.pending)} |")
    return "\n".join(lines) + "\n"


def print_history(console: Console, rows: list[tuple[ActionRow, PlanRow]]) -> None:
    """One line per action (when, op, workload, job, outcome), its reason underneath."""
    width = max(len(a.workload) for a, _ in rows)
    for a, p in rows:
        when = (a.started_at or p.created_at).strftime("%Y-%m-%d %H:%M:%S")
        color = {"done": "green", "failed": "red"}.get(a.status, "yellow")
        console.print(Text.assemble(
            f"{when}  ", (f"{a.op:<8}", "bold"), (f"{a.workload:<{width}}", "bold"),
            f"  {a.cluster}" + (f" job {a.job}" if a.job else ""), "  ", (a.status, color),
            f"  plan {p.id[:12]}"), soft_wrap=True)
        console.print(Text.assemble("    ", (a.reason_code, color), f": {a.reason}",
                                    (f"  ({a.message})" if a.message else "", "dim")))


def print_quota_chain(console: Console, chain: list[tuple[str, str, QueueStatus]],
                      reason: str = "") -> None:
    """The quota levels a workload answers to; the one its reason names is marked."""
    t = Table(title="Quota levels (GPUs, after the plan)", title_justify="left", header_style="bold")
    for col in ("level", "deserved", "fair share", "allocated", "limit", "waiting", ""):
        t.add_column(col, justify="left" if col in ("level", "") else "right")
    for kind, name, q in chain:
        binds = f"{kind} {name} " in reason or f"{kind} {name}'s" in reason or reason.endswith(f"{kind} {name}")
        t.add_row(f"{kind} {name}", _n(q.deserved), _n(q.fair_share), _n(q.allocated), _n(q.limit),
                  _n(q.pending), "[yellow]<- binds[/]" if binds else "")
    console.print(t)
