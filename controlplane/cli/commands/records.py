"""The commands that read the store: history (who did what, when, why) and show (a plan)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

from controlplane import statefiles, workflow
from controlplane.cli.app import (
    DbOpt,
    DirAfterArg,
    DirArg,
    DirOpt,
    JsonOpt,
    app,
    err,
    examples,
    out,
    parse_time,
    spec_dir_of,
    write_json,
)
from controlplane.cli.views import plan as plan_view
from controlplane.cli.views.apply import recorded_json
from controlplane.cli.views.history import history_json, print_history
from controlplane.cli.views.markdown import plan_markdown
from controlplane.cli.views.sections import DEFAULT_MAX_CHARS
from controlplane.cli.views.words import counted
from controlplane.errors import ControlPlaneError, PlanNotFoundError, StoreError
from specs.actions import Op
from specs.diagnostics import SpecError, workload_hint
from specs.durations import TooLong, parse_duration
from specs.fields import NAME
from specs.renames import names_of


def workload_name(name: str | None) -> str | None:
    """``--workload`` as ``PROJECT/NAME``, the form workloads are known by: any other is a
    mistake to point out, not a workload with no past (an empty answer)."""
    project, slash, rest = (name or "").partition("/")
    if name is not None and not (project and slash and rest and "/" not in rest):
        raise typer.BadParameter(
            f"{name!r} is not a workload name; use PROJECT/NAME (e.g. nlp/llm-finetune)"
        )
    return name


def project_name(name: str | None) -> str | None:
    """``--project`` as a project's name (lower case; no slash: that is a workload's)."""
    if name is not None and re.match(NAME, name) is None:
        raise typer.BadParameter(f"{name!r} is not a project name; use PROJECT (e.g. nlp)")
    return name


def job_id(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise typer.BadParameter(f"{value!r} is not a job id (e.g. 1234)")
    return value


def _since(text: str | None) -> str | None:
    """``--since``, checked here and read against ``--now`` in the command."""
    if text is None:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        if text.strip().isdigit():  # a year? minutes? (Slurm's reading of a bare number)
            raise typer.BadParameter(f"{text!r} has no unit; write e.g. 90m, 12h or 7d") from None
        try:
            parse_duration(text)
        except TooLong as exc:
            raise typer.BadParameter(f"{text!r} is too far back: {exc}") from None
        except ValueError as exc:
            raise typer.BadParameter(
                f"{text!r} is not an ISO 8601 time or a duration ({exc}); write e.g. "
                "2026-11-22T10:00:00Z, 2026-11-22, 90m, 12h or 7d"
            ) from None
        return text
    if not 1970 <= at.year <= 9000:  # the years a plan's dates fit in, as --now's
        raise typer.BadParameter("give a time between the years 1970 and 9000")
    return text


def since_time(text: str, now: datetime) -> datetime:
    """An ISO 8601 time (no zone: UTC), or a duration (``90m``, ``12h``, ``7d``) before ``now``."""
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return now - timedelta(seconds=parse_duration(text))
    return at if at.tzinfo else at.replace(tzinfo=UTC)


@app.command(
    epilog=examples(
        "cp history examples/quickstart --workload nlp/llm-finetune",
        "cp history . --job 1234",
        "cp history . --project nlp --op preempt --op cancel --since 7d",
        "cp history . --verify",
    )
)
def history(
    spec_dir: DirArg = Path("."),
    workload: Annotated[
        str | None, typer.Option(help="only this PROJECT/NAME", callback=workload_name)
    ] = None,
    project: Annotated[
        str | None, typer.Option(help="only this project's workloads", callback=project_name)
    ] = None,
    job: Annotated[
        str | None,
        typer.Option(
            help="only actions on this job id: that ended it, created it, or replaced it "
            "(a move or resize on Slurm makes a new job)",
            callback=job_id,
        ),
    ] = None,
    op: Annotated[
        list[Op] | None,
        typer.Option(
            help=f"only this operation ({', '.join(o.value for o in Op)}); repeat it for more",
            metavar="OP",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            help="only actions since this ISO 8601 time, or this long before --now (90m, 12h, 7d)",
            metavar="WHEN",
            callback=_since,
        ),
    ] = None,
    now: Annotated[
        datetime | None,
        typer.Option(
            "--now",
            help="the time a --since duration counts back from (ISO 8601; no zone: UTC); "
            "default: the clock",
            metavar="TIME",
            parser=parse_time,
        ),
    ] = None,
    limit: Annotated[int, typer.Option(help="newest N (of those the filters keep)", min=1)] = 50,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="check the history chain: every plan and action record unedited, none removed",
        ),
    ] = False,
    as_json: JsonOpt = False,
    db: DbOpt = None,
) -> None:
    """Who did what to which workload, when, and why (applied actions, newest first)."""
    if verify and (workload or project or job or op or since):
        raise typer.BadParameter("--verify checks the whole history: it takes no filters")
    store = workflow.open_store(spec_dir, db, reading=True)
    if verify:
        if store.missing is not None:  # nothing to verify is no proof of an intact history
            raise StoreError(
                f"no store to verify: {store.missing} does not exist (deleted, or nothing was "
                "ever planned or applied here); restore it from a backup, or point --db at "
                "the store to check"
            )
        verdict = store.verify()
        if as_json:
            sys.stdout.write(
                json.dumps(
                    {
                        "ok": verdict.ok,
                        "records": verdict.records,
                        "head": verdict.head,
                        "problem": verdict.problem,
                        # the last record a prune removed (0: none), and its hash
                        "prunedThrough": verdict.base[0] if verdict.base else 0,
                        "checkpoint": verdict.base[1] if verdict.base else None,
                    },
                    indent=2,
                )
                + "\n"
            )
        elif verdict.ok:
            pruned = (
                f" (records 1-{verdict.base[0]} pruned; checkpoint {verdict.base[1]})"
                if verdict.base
                else ""
            )
            out.print(
                f"history intact: {counted(verdict.records, 'record')}{pruned}, "
                f"head {verdict.head}",
                highlight=False,
                soft_wrap=True,
            )
        else:
            err.print(
                f"history broken: {verdict.problem}", highlight=False, soft_wrap=True, markup=False
            )
        if not verdict.ok:
            raise typer.Exit(1)
        return
    from controlplane.store.actionlog import HistoryFilter  # the store loads when opened

    where = HistoryFilter(
        projects=_names(spec_dir, project) if project else (),
        job=job,
        ops=[o.value for o in op or []],
        since=since_time(since, now or datetime.now(UTC)) if since else None,
    )
    rows = store.history(_names(spec_dir, workload) if workload else (), limit, where=where)
    filters = shlex.join(
        [
            *(["--project", project] if project else []),
            *(["--job", job] if job else []),
            *(a for o in op or [] for a in ("--op", o.value)),
            *(["--since", since] if since else []),
        ]
    )
    if as_json:
        write_json(history_json(rows))
    elif not rows:
        through = store.pruned_through()
        pruned = f" (the history before record {through + 1} was pruned)" if through else ""
        if filters:
            what = f" for {workload}" if workload else ""
            out.print(
                f"No applied actions{what} match {filters}{pruned}.",
                highlight=False,
                soft_wrap=True,
            )
        elif workload:
            # a workload may have left the specs and still have a past: no spec check
            # here, only a name close to one with a past pointed out (a typo)
            also = workload_hint(workload, store.workloads_in_history())
            out.print(f"No applied actions for {workload}{also}{pruned}.", soft_wrap=True)
        else:
            out.print(f"No actions applied yet{pruned}.", soft_wrap=True)
    else:
        print_history(out, rows)


def _names(spec_dir: Path, name: str) -> list[str]:
    """A workload (``PROJECT/NAME``) or project, and its names before its project was
    renamed (``renamedFrom``) if the specs load: the history is shown whatever state the
    specs are in."""
    try:
        desired = workflow.load(spec_dir).desired
    except (SpecError, ControlPlaneError):
        return [name]
    if "/" in name:
        return names_of(desired, name)
    p = desired.projects.get(name)
    return [name, *sorted(p.spec.renamed_from if p else [])]


@app.command(epilog=examples("cp show 3f2a9c --dir examples/quickstart --json"))
def show(
    plan_ref: Annotated[
        str, typer.Argument(help="plan id (or prefix) from the store, or a plan file")
    ],
    given_dir: DirAfterArg = None,
    dir_option: DirOpt = None,
    as_json: JsonOpt = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="as a pull-request comment (see cp plan)")
    ] = False,
    max_chars: Annotated[
        int, typer.Option(min=0, help="bound on the --markdown comment (0: no bound)")
    ] = DEFAULT_MAX_CHARS,
    db: DbOpt = None,
) -> None:
    """Show a stored plan (or a plan file) and, if applied, each action's outcome.

    With --json: the plan's document plus applyStatus and outcomes (each action in
    execution order: status, job, message, when)."""
    if as_json and markdown:  # as cp plan refuses them
        raise typer.BadParameter("give --json or --markdown, not both", param_hint="--markdown")
    if max_chars != DEFAULT_MAX_CHARS and not markdown:
        raise typer.BadParameter(
            "bounds the --markdown comment: add --markdown", param_hint="--max-chars"
        )
    spec_dir = spec_dir_of(given_dir, dir_option)
    path = Path(plan_ref)
    store = workflow.open_store(spec_dir, db, reading=True)
    plan = statefiles.read_plan(path) if path.is_file() else store.get_plan(plan_ref)
    if plan is None and (gone := store.pruned_plan(plan_ref)) is not None:
        raise PlanNotFoundError(
            f"plan {gone.id} was pruned from the history (`cp store prune`): made "
            f"{gone.created_at:%Y-%m-%d %H:%M:%S} UTC, {gone.status}; its actions and events "
            "are no longer kept"
        )
    if plan is None:
        raise PlanNotFoundError(f"no stored plan matches {plan_ref!r} (see `cp history`)")
    rows = store.actions(plan.id)
    if as_json:
        doc = plan.model_dump(mode="json", by_alias=True)
        doc["applyStatus"] = store.plan_status(plan.id)  # None: the store never saw it
        doc["outcomes"] = recorded_json(rows)
        write_json(doc)
        return
    done = any(r.status != "pending" for r in rows)  # an apply began
    if markdown:
        applied = (store.plan_status(plan.id) or "", rows) if done else None
        sys.stdout.write(plan_markdown(plan, max_chars=max_chars, applied=applied))
        return
    plan_view.print_plan(out, plan)
    if done:
        out.print(f"\nApply status: [bold]{store.plan_status(plan.id)}[/]")
        for r in rows:
            out.print(
                f"  {r.status:>8}  {r.op:<8} {r.workload}"
                + (f"  job {r.job}" if r.job else "")
                + (f"  {r.message}" if r.message else "")
            )
