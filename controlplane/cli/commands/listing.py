"""``cp get`` (kubectl-style listings) and ``cp usage`` (sshare-style usage). Read-only
like ``cp status``: the clusters are observed without recording anything and the plan
made for them is not stored."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from controlplane import inventory, workflow
from controlplane.cli.app import (
    DbOpt,
    DirArg,
    JsonOpt,
    NowOpt,
    ObservedOpt,
    app,
    examples,
    load,
    out,
    write_json,
)
from controlplane.cli.views import get as get_view
from controlplane.cli.views.usage import print_usage, usage_json
from controlplane.usage import usage_report
from specs.diagnostics import did_you_mean, name_hint
from specs.snapshot import JobState, Snapshot

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.store import Store

# what each kind is called on the command line (kubectl takes singular and plural too)
KINDS = {
    "workloads": ("workload", "wl"),
    "projects": ("project", "proj"),
    "departments": ("department", "dept"),
    "nodes": ("node", "no"),
    "jobs": ("job",),
}
FORMATS = ("wide", "json", "yaml")
T = TypeVar("T")


def _kind(word: str) -> str:
    for kind, aliases in KINDS.items():
        if word == kind or word in aliases:
            return kind
    everything = [*KINDS, *(a for aliases in KINDS.values() for a in aliases)]
    raise typer.BadParameter(
        f"{word!r} is not one of {', '.join(KINDS)}{did_you_mean(word, everything)}",
        param_hint="KIND",
    )


@app.command(
    epilog=examples(
        "cp get workloads examples/quickstart",
        "cp get workloads . --project nlp --state pending -o wide",
        "cp get nodes . -o yaml",
        "cp get jobs . -o json",
    )
)
def get(
    kind: Annotated[
        str,
        typer.Argument(
            help="workloads, projects, departments, nodes or jobs (singular too)",
            show_default=False,
        ),
    ],
    spec_dir: DirArg = Path("."),
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", help="wide (more columns), json or yaml", metavar="FORMAT"),
    ] = None,
    project: Annotated[
        str | None,
        typer.Option(help="only what belongs to this project (departments: the ones above it)"),
    ] = None,
    state: Annotated[
        str | None,
        typer.Option(
            help="workloads: running, ending, submitted, pending, blocked, failed, completed; "
            "jobs: RUNNING, PENDING, …; nodes: idle, mixed, allocated, down, drain, "
            "overcommitted"
        ),
    ] = None,
    as_json: JsonOpt = False,
    observed: ObservedOpt = None,
    now: NowOpt = None,
    db: DbOpt = None,
) -> None:
    """List workloads (with their state: running, ending, submitted, pending, blocked, failed,
    completed, and what the plan would do next), projects, departments, nodes (with the GPUs
    their jobs hold and their reservations) or jobs."""
    what = _kind(kind)
    if output is not None and output not in FORMATS:
        raise typer.BadParameter(f"use {', '.join(FORMATS)}", param_hint="--output")
    if as_json and output not in (None, "json"):  # --json is -o json
        raise typer.BadParameter(f"give --json or -o {output}, not both", param_hint="--json")
    if as_json:
        output = "json"
    loaded = load(spec_dir)
    desired = loaded.desired
    if project is not None and project not in desired.projects:
        raise typer.BadParameter(
            f"no project {project!r} in the specs{name_hint(project, desired.projects)}",
            param_hint="--project",
        )
    found = workflow.survey(spec_dir, loaded, observed=observed, now=now, db=db)
    snap, plan = found.snapshot, found.plan
    rows: list[Any]
    ran = _ran(found.store, snap) if what in ("workloads", "jobs") else None
    if what == "workloads":
        rows = [r for r in inventory.workloads(desired, snap, plan, ran) if _of(project, r.project)]
        rows = _with_state(rows, state and state.lower(), inventory.STATES, lambda r: r.state)
    elif what == "jobs":
        rows = [r for r in inventory.jobs(snap, ran) if _owned(project, r.workload)]
        states = tuple(s.value for s in JobState)
        rows = _with_state(rows, state and state.upper(), states, lambda r: r.state)
    elif what == "nodes":
        rows = inventory.nodes(snap, plan.created_at)
        if project is not None:
            theirs = {j.id for j in inventory.jobs(snap) if _owned(project, j.workload)}
            rows = [r for r in rows if theirs & set(r.jobs)]
        states = ("idle", "mixed", "allocated", "down", "drain", "overcommitted")
        wanted = state and state.lower()
        if wanted == "overcommitted":  # a flag on top of the state, filtered as one
            rows = [r for r in rows if r.overcommitted]
        else:
            rows = _with_state(rows, wanted, states, lambda r: r.state)
    else:
        if state is not None:
            raise typer.BadParameter("applies to workloads, jobs and nodes", param_hint="--state")
        if what == "projects":
            rows = [r for r in inventory.projects(desired, plan) if _of(project, r.name)]
        else:
            above = set(inventory.chain_of(desired, project)) if project else None
            rows = [
                r for r in inventory.departments(desired, plan) if above is None or r.name in above
            ]
    if output in ("json", "yaml"):
        doc = get_view.document(what, plan.created_at, rows)
        if output == "json":
            write_json(doc)
        else:
            get_view.write_yaml(doc)
        return
    get_view.print_rows(out, what, rows, plan.created_at, wide=output == "wide")


def _of(project: str | None, name: str) -> bool:
    return project is None or name == project


def _owned(project: str | None, workload: str | None) -> bool:
    return project is None or (workload or "").split("/", 1)[0] == project


def _with_state(
    rows: list[T], state: str | None, states: Sequence[str], state_of: Callable[[T], str]
) -> list[T]:
    """``rows`` in ``state`` (one of ``states``); all of them when ``state`` is None."""
    if state is None:
        return rows
    if state not in states:
        raise typer.BadParameter(
            f"{state!r} is not one of {', '.join(states)}{did_you_mean(state, states)}",
            param_hint="--state",
        )
    return [r for r in rows if state_of(r) == state]


@app.command(
    epilog=examples(
        "cp usage examples/quickstart", "cp usage . --json", "cp usage . --now 2026-11-30"
    )
)
def usage(
    spec_dir: DirArg = Path("."),
    as_json: JsonOpt = False,
    observed: ObservedOpt = None,
    now: NowOpt = None,
    db: DbOpt = None,
) -> None:
    """Usage per project and department, sshare-like: deserved and fair share, GPU-hours
    decayed by each project's half-life (and as a share of the clusters), this month's
    GPU-hours and cost, per GPU type too, and the budget left."""
    loaded = load(spec_dir)
    found = workflow.survey(spec_dir, loaded, observed=observed, now=now, db=db)
    report = usage_report(loaded.desired, found.snapshot, found.plan)
    if as_json:
        write_json(usage_json(report))
    else:
        print_usage(out, report)


def _ran(store: Store | None, snap: Snapshot) -> dict[tuple[str, str], inventory.Ran]:
    """(cluster, job) -> the GPUs, start and plan of its latest run, of each ended job the
    cluster forgot (the store remembers it, without its replicas)."""
    if store is None:
        return {}
    asked = inventory.forgotten(snap)
    runs = store.last_runs(asked.values())
    return {key: runs[ended] for key, ended in asked.items() if ended in runs}
