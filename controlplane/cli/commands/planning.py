"""The commands that look without changing anything in the clusters: observe, plan, status,
cost (explain has a module of its own)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.text import Text

from controlplane import review, statefiles, workflow
from controlplane.basespecs import base_specs, unloadable_base
from controlplane.cli.app import (
    ActingNowOpt,
    DbOpt,
    DirAfterArg,
    DirArg,
    DirOpt,
    ForecastOpt,
    JsonOpt,
    NowOpt,
    ObservedOpt,
    TimeLimitOpt,
    app,
    err,
    examples,
    load,
    load_to_plan,
    out,
    output_file,
    plan_file,
    spec_dir_of,
    write_json,
)
from controlplane.cli.views import plan as plan_view
from controlplane.cli.views.apply import typed_here
from controlplane.cli.views.clusters import (
    cluster_rows,
    print_clusters,
    usage_by_cluster,
)
from controlplane.cli.views.cost import print_candidates
from controlplane.cli.views.markdown import plan_markdown
from controlplane.cli.views.problems import diagnostic_json
from controlplane.cli.views.quota import print_quota
from controlplane.cli.views.sections import DEFAULT_MAX_CHARS
from controlplane.costs import candidate_table
from controlplane.errors import LeaseHeldError, WorkloadNotFoundError
from controlplane.lease import holding_lease
from controlplane.lineage import behind
from controlplane.observe import adapters_for, observe
from controlplane.plan import Plan
from controlplane.unreachable import none_answered
from solvers.policy import DEFAULT_POLICY, Policy
from specs.diagnostics import SpecError, workload_hint
from specs.snapshot import Snapshot


@app.command("observe", epilog=examples("cp observe examples/quickstart --yaml > snapshot.yaml"))
def observe_cmd(
    spec_dir: DirArg = Path("."),
    as_yaml: Annotated[bool, typer.Option("--yaml", help="YAML instead of JSON")] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="JSON (the default), and errors as a JSON document too"),
    ] = False,
    now: ActingNowOpt = None,
    db: DbOpt = None,
) -> None:
    """Print the observed state of every cluster (a snapshot usable with plan --observed)."""
    if as_yaml and as_json:
        raise typer.BadParameter("give --yaml or --json, not both", param_hint="--yaml")
    loaded = load(spec_dir)
    store, when = workflow.open_store(spec_dir, db, now=now), workflow.resolve_now(now)

    def look(record: bool) -> Snapshot:
        clock = workflow.clock(now)
        adapters = adapters_for(
            loaded.desired, spec_dir / ".cp", clock, read_only=not record, db=db
        )
        # a snapshot to keep (--observed plans it later, with any specs): every run's usage
        return observe(loaded.desired, adapters, when, store, record=record, rollups=False)

    try:  # what it records is written under the apply lease, as apply and watch write it
        with holding_lease(store, observing=True):
            snap = look(record=True)
    except LeaseHeldError as exc:
        err.print(f"note: recorded nothing, {escape(str(exc))}", soft_wrap=True)
        snap = look(record=False)
    data = snap.model_dump(mode="json", by_alias=True, exclude_none=True)
    if as_yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False))
    else:
        write_json(data)


@app.command(
    "plan",
    epilog=examples(
        "cp plan examples/quickstart --out plan.json",
        "cp plan . --observed snapshot.yaml --now 2026-11-22T10:00:00Z --json",
        "cp plan . --markdown --full-plan plan.md --detailed-exitcode > comment.md",
    ),
)
def plan_cmd(
    spec_dir: DirArg = Path("."),
    observed: ObservedOpt = None,
    out_file: Annotated[
        Path | None,
        typer.Option("--out", help="save the plan for `cp apply`", callback=plan_file),
    ] = None,
    as_json: JsonOpt = False,
    markdown: Annotated[
        bool,
        typer.Option(
            "--markdown",
            help="a pull-request comment: summary first, sections collapsed, within --max-chars",
        ),
    ] = False,
    max_chars: Annotated[
        int,
        typer.Option(
            min=0,
            help="bound on the --markdown comment; longer sections end in '… and N more' "
            "(GitHub comments hold 65,536; 0: no bound)",
        ),
    ] = DEFAULT_MAX_CHARS,
    full_plan: Annotated[
        Path | None,
        typer.Option(
            "--full-plan",
            help="also write the whole plan as Markdown, unbounded, to this file "
            "(for CI to attach)",
            callback=output_file,
        ),
    ] = None,
    detailed_exitcode: Annotated[
        bool, typer.Option("--detailed-exitcode", help="exit 2 when the plan has changes")
    ] = False,
    forecast: ForecastOpt = True,
    engine: Annotated[
        str,
        typer.Option(
            help="best: KAI's greedy and CP-SAT, the better answer; kai: KAI's greedy alone"
        ),
    ] = "best",
    time_limit: TimeLimitOpt = DEFAULT_POLICY.time_limit,
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            metavar="REF",
            help="also plan the specs as of this git ref against the same observation and "
            "show the change's impact (policy before -> after, affected workloads)",
        ),
    ] = None,
    base_dir: Annotated[
        Path | None,
        typer.Option("--base-dir", metavar="DIR", help="like --base, from a directory of specs"),
    ] = None,
    now: NowOpt = None,
    db: DbOpt = None,
) -> None:
    """Show what would change, and why: submissions, evictions, moves, and what waits."""
    if engine not in ("best", "kai"):
        raise typer.BadParameter("use best or kai", param_hint="--engine")
    if base is not None and base_dir is not None:
        raise typer.BadParameter("give --base or --base-dir, not both", param_hint="--base")
    if as_json and markdown:
        raise typer.BadParameter("give --json or --markdown, not both", param_hint="--markdown")
    if max_chars != DEFAULT_MAX_CHARS and not markdown:
        raise typer.BadParameter(
            "bounds the --markdown comment: add --markdown", param_hint="--max-chars"
        )
    policy = Policy(engine=engine, time_limit=time_limit)
    loaded = load_to_plan(spec_dir)
    alerts: list[str] = []
    with contextlib.ExitStack() as stack:
        before = None
        if base is not None or base_dir is not None:
            try:
                before = stack.enter_context(base_specs(spec_dir, ref=base, directory=base_dir))
            except SpecError as exc:  # a broken base (the change that fixes it): plan alone
                said = unloadable_base(base or str(base_dir), exc)
                err.print(Text(str(said), style="yellow"), highlight=False, soft_wrap=True)
                loaded = dataclasses.replace(loaded, warnings=[*loaded.warnings, said])
                alerts.append(str(said))
        if before is not None:
            plan = review.plan_change(
                spec_dir,
                loaded,
                before,
                observed=observed,
                now=now,
                db=db,
                forecast=forecast,
                policy=policy,
            )
    if before is None and alerts:  # a base that does not load: these specs alone, reviewed
        plan = review.plan_alone(
            spec_dir,
            loaded,
            base or str(base_dir),
            observed=observed,
            now=now,
            db=db,
            forecast=forecast,
            policy=policy,
        )
    elif before is None:  # no base
        plan = workflow.build_plan(
            spec_dir, loaded, observed=observed, now=now, db=db, forecast=forecast, policy=policy
        )
    if observed is None and (lags := _behind(spec_dir, plan, db)) is not None:
        alerts.append(lags)  # the plan stands; an apply of this checkout would not act
        if not as_json and not markdown:
            err.print(Text(f"warning: {lags}", style="yellow"), highlight=False, soft_wrap=True)
    if out_file:
        out_file.write_text(plan.to_json() + "\n")
    if full_plan:
        full_plan.write_text(plan_markdown(plan, loaded.warnings, max_chars=0, alerts=alerts))
    silent = none_answered(plan.unreachable, loaded.desired)
    if as_json:
        doc = plan.model_dump(mode="json", by_alias=True)
        # the specs' warnings ride along; they are not part of the sealed plan (--out)
        doc["warnings"] = [diagnostic_json(w) for w in loaded.warnings]
        if alerts:
            doc["alerts"] = alerts
        if silent:  # exit 1: a CI job reading the document alone tells it from "no changes"
            doc["ok"] = False
            doc["error"] = {"kind": "unreachable", "message": f"{silent}: {_OBSERVED_NOTHING}"}
        write_json(doc)
    elif markdown:
        # the file's name: CI attaches it to the run, where the runner's path means nothing
        where = full_plan.name if full_plan else None
        sys.stdout.write(
            plan_markdown(plan, loaded.warnings, max_chars=max_chars, full=where, alerts=alerts)
        )
    else:
        plan_view.print_plan(out, plan)
        if out_file:
            apply_it = (
                # made from a saved snapshot: the clusters never matched it, so what can be
                # done with it is the what-if apply to that snapshot
                f"cp apply {shlex.quote(str(out_file))} --observed {shlex.quote(str(observed))}"
                if observed is not None
                else typed_here(f"cp apply {shlex.quote(str(out_file))}", spec_dir)
            )
            # soft_wrap: the command stays whole, to be copied
            out.print(
                f"Saved to {out_file}; run [bold]{escape(apply_it)}[/] to carry it out.",
                soft_wrap=True,
            )
    if silent:
        err.print(
            f"error: {silent}: {_OBSERVED_NOTHING}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
        raise typer.Exit(1)
    if detailed_exitcode and not plan.empty:
        raise typer.Exit(2)


def _behind(spec_dir: Path, plan: Plan, db: str | None) -> str | None:
    """What ``cp apply`` of this checkout would refuse it for: behind the specs the
    clusters follow (controlplane/lineage.py). The plan is made all the same."""
    with workflow.open_store(spec_dir, db, reading=True) as store:
        last = store.last_applied_plan()
        why = behind(spec_dir, plan.spec_digest, plan.git_commit, last, store)
    return f"{why}; `cp apply` of this checkout refuses to act" if why else None


@app.command(epilog=examples("cp status examples/quickstart", "cp status . --json"))
def status(
    spec_dir: DirArg = Path("."),
    observed: ObservedOpt = None,
    as_json: JsonOpt = False,
    now: NowOpt = None,
    db: DbOpt = None,
) -> None:
    """Per project and department: deserved, fair share, GPUs held now and after the plan,
    limit and waiting GPUs; per cluster: GPUs held by our jobs and by others', and which
    projects use which cluster."""
    # a dashboard polls it: its plans are not kept (each would be a record, every poll)
    plan, snap = workflow.plan_and_snapshot(
        spec_dir, load(spec_dir), observed=observed, now=now, db=db, keep=False
    )
    if as_json:
        sys.stdout.write(
            json.dumps(
                {
                    "projects": {k: v.model_dump(by_alias=True) for k, v in plan.projects.items()},
                    "departments": {
                        k: v.model_dump(by_alias=True) for k, v in plan.departments.items()
                    },
                    "clusters": cluster_rows(snap),
                    "byCluster": usage_by_cluster(snap),
                },
                indent=2,
            )
            + "\n"
        )
    else:
        print_quota(out, plan.projects, plan.departments, now=True)
        out.print()
        print_clusters(out, snap)


@app.command(epilog=examples("cp cost nlp/llm-finetune --dir examples/quickstart --no-forecast"))
def cost(
    workload: Annotated[str, typer.Argument(help="PROJECT/NAME")],
    given_dir: DirAfterArg = None,
    dir_option: DirOpt = None,
    observed: Annotated[
        Path | None,
        typer.Option(help="use this snapshot (no forecasts: candidates rank by cost)"),
    ] = None,
    forecast: ForecastOpt = True,
    as_json: JsonOpt = False,
    now: NowOpt = None,
    db: DbOpt = None,
) -> None:
    """The fan-out candidates of a workload: where, shape, mode, estimated start, cost, and
    which ones a plan submits (any workload: for one without fanOut, what it would choose)."""
    spec_dir = spec_dir_of(given_dir, dir_option)
    loaded = load(spec_dir)
    if workload not in loaded.desired.workloads:
        hint = workload_hint(workload, loaded.desired.workloads)  # as explain gives it
        raise WorkloadNotFoundError(
            f"no workload {workload!r} in the specs{hint} (use PROJECT/NAME)"
        )
    if observed is not None:
        snap = statefiles.read_snapshot(observed)
        when, adapters = (workflow.resolve_now(now) if now is not None else snap.now), None
    else:
        when = workflow.resolve_now(now)
        adapters = adapters_for(
            loaded.desired, spec_dir / ".cp", workflow.clock(now), read_only=True, db=db
        )
        snap = observe(
            loaded.desired,
            adapters,
            when,
            workflow.open_store(spec_dir, db, reading=True),
            record=False,
        )
    table = candidate_table(loaded.desired, snap, workload, when, adapters if forecast else None)
    if as_json:
        write_json(table.to_json())
        return
    print_candidates(out, table)


_OBSERVED_NOTHING = "this plan observed nothing; fix access to them and plan again"
