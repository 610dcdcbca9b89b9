"""``cp explain``: everything about one workload, read-only like ``cp status``."""

from __future__ import annotations

import shlex
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from controlplane import inventory, reservations, workflow
from controlplane.apply import unapplied_twin
from controlplane.cli.app import (
    DbOpt,
    DirAfterArg,
    DirOpt,
    JsonOpt,
    NowOpt,
    ObservedOpt,
    app,
    err,
    examples,
    load,
    out,
    spec_dir_of,
    write_json,
)
from controlplane.cli.views.clusters import describe_job, ended_jobs, jobs_json
from controlplane.cli.views.explain import (
    explain_json,
    print_explain,
    reservations_json,
)
from controlplane.cli.views.history import history_json, print_history
from controlplane.errors import WorkloadNotFoundError
from controlplane.eviction import exposure
from specs.actions import ReasonCode
from specs.diagnostics import workload_hint
from specs.loader import LoadResult
from specs.renames import earlier_names, names_of

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.store import Store
    from controlplane.store.actionlog import HistoryRow


SHOWN = 10  # history records explain shows; the rest are cp history's


def _past(store: Store | None, names: list[str]) -> tuple[list[HistoryRow], bool]:
    """The newest records of a workload's history, and whether there are older ones."""
    rows = store.history(names, SHOWN + 1) if store is not None else []
    return rows[:SHOWN], len(rows) > SHOWN


def _more(spec_dir: Path, workload: str, older: bool, db: str | None, pruned: int) -> None:
    if older:
        where = ["--db", db] if db else []
        command = shlex.join(["cp", "history", str(spec_dir), "--workload", workload, *where])
        out.print(f"  … older records: {command} --limit 200", highlight=False)
    if pruned:
        out.print(f"  (the history before record {pruned + 1} was pruned)", highlight=False)


def _explain_gone(
    spec_dir: Path,
    loaded: LoadResult,
    names: list[str],
    as_json: bool,
    observed: Path | None,
    now: datetime | None,
    db: str | None,
) -> None:
    """A workload that is not in the specs (any more): the jobs of it the clusters still
    show and what the plan does to them (a prune), and its history, since "who cancelled
    my job" is asked most after it left; else not found, with the closest name the specs
    or the history know."""
    workload = names[0]  # and its names before its project was renamed
    found = workflow.survey(spec_dir, loaded, observed=observed, now=now, db=db)
    store = found.store or workflow.open_store(spec_dir, db, reading=True)
    past, older = _past(store, names)
    jobs = [(c, j) for name in names for c, j in found.snapshot.jobs_of(name)]
    actions = [a for a in found.plan.actions if a.workload in names]
    if not past and not jobs and not actions:
        hint = workload_hint(workload, {*loaded.desired.workloads, *store.workloads_in_history()})
        through = store.pruned_through()
        pruned = f"; the history before record {through + 1} was pruned" if through else ""
        raise WorkloadNotFoundError(
            f"no workload {workload!r} in the specs{hint} (use PROJECT/NAME){pruned}"
        )
    state = "not-in-specs"
    if any(j.state.holds_gpus for _, j in jobs):
        state = "running"
    elif any(j.state.active for _, j in jobs):
        state = "submitted"
    if as_json:
        doc: dict[str, object] = {
            "workload": workload,
            "state": state,
            "running": None,
            "quota": [],
            "actions": [a.model_dump(mode="json", by_alias=True) for a in actions],
            "pending": [],
            "history": history_json(past),
            "historyMore": older,
            "historyPrunedThrough": store.pruned_through(),
            "inSpecs": False,
            "jobs": [j for name in names for j in jobs_json(found.snapshot, name)],
            "finished": None,
            "unreachable": {},
            "reservations": [],  # not looked up: no spec says where it may run; its jobs go
        }
        write_json(doc)
        return
    out.print(f"{workload} is not in the specs (any more): {state}", highlight=False)
    for c, j in jobs:
        if j.state.active:
            out.print(f"  {describe_job(c, j)}", highlight=False)
    for line in (line for name in names for line in ended_jobs(found.snapshot, name)):
        out.print(f"  {line}", highlight=False)
    for a in actions:
        out.print(
            f"[bold]{a.op.value}[/] planned on {a.cluster} — {a.reason.code.value}: "
            f"{a.reason.message}"
        )
    if past:
        out.print("\nWhat was done to it, newest first:")
        print_history(out, past)
    _more(spec_dir, workload, older, db, store.pruned_through())


# the states in which the plan may still place a workload (a blocked one waits for a limit,
# a budget, no pool: not for nodes)
_PLACING = ("pending", "submitted", "failed")


@app.command(
    epilog=examples(
        "cp explain ads/ctr-train --dir examples/quickstart",
        "cp explain nlp/llm-finetune --dir . --json",
    )
)
def explain(
    workload: Annotated[str, typer.Argument(help="PROJECT/NAME")],
    given_dir: DirAfterArg = None,
    dir_option: DirOpt = None,
    observed: ObservedOpt = None,
    as_json: JsonOpt = False,
    now: NowOpt = None,
    db: DbOpt = None,
) -> None:
    """Why a workload waits, runs, or was evicted: its state, the plan's reason, and for a
    running one its jobs, nodes, start, segment, what could evict it and when its
    minRuntime ends; the reservations (maintenance windows) on the nodes it runs on or may
    use; the quota levels it answers to and its history."""
    spec_dir = spec_dir_of(given_dir, dir_option)
    loaded = load(spec_dir)
    desired = loaded.desired
    if (now_named := earlier_names(desired).get(workload)) is not None:
        old = workload.partition("/")[0]
        new = now_named.partition("/")[0]
        err.print(
            f"note: {workload} is {now_named} now (project {old} was renamed {new})",
            highlight=False,
        )
        workload = now_named
    if workload not in desired.workloads:
        _explain_gone(spec_dir, loaded, names_of(desired, workload), as_json, observed, now, db)
        return
    found = workflow.survey(spec_dir, loaded, observed=observed, now=now, db=db, forecast=True)
    plan = found.plan
    # stored as `cp plan` does (`cp show` finds the decision explained), once per decision
    if found.store is not None and unapplied_twin(found.store, plan) is None:
        found.store.save_plan(plan)
    row = next(r for r in inventory.workloads(desired, found.snapshot, plan) if r.name == workload)
    running = exposure(desired, found.snapshot, plan, workload)
    actions = [a for a in plan.actions if a.workload == workload]
    pending = [p for p in plan.pending if p.workload == workload]
    # a completed workload edited since: not run again (said in place of "nothing to do")
    edited = next((p for p in plan.finished if p.workload == workload), None)
    past, older = _past(found.store, names_of(desired, workload))
    chain = plan.quota_chain(desired.workloads[workload].spec.project)
    # the errors of the clusters it waits for (its reason names them, the plan has them)
    silent = (
        dict(plan.unreachable)
        if any(p.reason.code is ReasonCode.CLUSTER_UNREACHABLE for p in pending)
        else {}
    )
    # windows (an announced maintenance) on its nodes, and where the plan may still place
    # it, on the nodes of every pool it may use: what keeps work off them
    placing = row.state in _PLACING
    reserved = reservations.workload_windows(
        desired, found.snapshot, workload, plan.created_at, placing
    )
    if as_json:
        doc = explain_json(row, running, actions, pending, chain, past)
        doc["inSpecs"] = True
        doc["jobs"] = jobs_json(found.snapshot, workload)  # every job of it the clusters show
        doc["finished"] = edited.model_dump(mode="json", by_alias=True) if edited else None
        doc["unreachable"] = silent
        doc["reservations"] = reservations_json(reserved)
        doc["historyMore"] = older
        doc["historyPrunedThrough"] = found.store.pruned_through() if found.store else 0
        write_json(doc)
    else:
        waiting_jobs = [
            describe_job(c, j)
            for c, j in found.snapshot.jobs_of(workload)
            if j.state.active and not j.state.holds_gpus
        ]
        print_explain(
            out,
            row,
            running,
            actions,
            pending,
            chain,
            past,
            plan.created_at,
            waiting_jobs,
            edited,
            silent,
            ended_jobs(found.snapshot, workload),
            reserved,
            placing,
        )
        _more(spec_dir, workload, older, db, found.store.pruned_through() if found.store else 0)
