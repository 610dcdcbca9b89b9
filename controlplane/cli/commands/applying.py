"""The commands that change the clusters: apply, and watch (plan and apply in a loop)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from controlplane import review, statefiles, workflow
from controlplane.apply import ActionOutcome
from controlplane.cli import interrupts, outlet
from controlplane.cli.app import (
    ActingNowOpt,
    DbOpt,
    DirArg,
    JsonOpt,
    TimeLimitOpt,
    age,
    app,
    err,
    examples,
    load,
    load_to_plan,
    out,
    write_json,
)
from controlplane.cli.interrupts import StopBetweenActions
from controlplane.cli.views import plan as plan_view
from controlplane.cli.views.apply import apply_json, outcome_line, verdict
from controlplane.errors import ApplyError, PlanNotFoundError, StalePlanError
from controlplane.lineage import commit_of
from controlplane.plan import Plan
from controlplane.unreachable import none_answered
from solvers.policy import DEFAULT_POLICY, Policy
from specs.diagnostics import SpecError
from specs.durations import parse_duration
from specs.observation import observed_digest
from specs.snapshot import Snapshot

if TYPE_CHECKING:
    from controlplane.watch import Watcher


@app.command(
    epilog=examples(
        "cp apply plan.json --dir examples/quickstart",
        "cp apply examples/quickstart --auto-approve --json",
    )
)
def apply(
    target: Annotated[
        Path,
        typer.Argument(
            help="a plan file from `cp plan --out`, or a spec directory (plan now, then apply)"
        ),
    ] = Path("."),
    spec_dir: Annotated[
        Path | None,
        typer.Option("--dir", help="spec directory when TARGET is a plan file [default: .]"),
    ] = None,
    auto_approve: Annotated[bool, typer.Option("--auto-approve", help="don't ask")] = False,
    reviewed: Annotated[
        bool,
        typer.Option(
            "--reviewed",
            help="with a spec directory: apply the stored plan made of exactly these specs "
            "(the one a pull request showed), refused if the clusters moved on since in a way "
            "its actions depend on (a job of ours that ended elsewhere does not count)",
        ),
    ] = False,
    observed: Annotated[
        Path | None,
        typer.Option(
            help="what-if: apply the plan file to this snapshot with the simulator engine and "
            "rewrite the snapshot (no cluster or store is touched)"
        ),
    ] = None,
    as_json: JsonOpt = False,
    now: ActingNowOpt = None,
    db: DbOpt = None,
    time_limit: TimeLimitOpt = DEFAULT_POLICY.time_limit,
) -> None:
    """Carry out a plan through the adapters; safe to rerun after an interruption.

    With a spec directory: take the apply lease, observe, plan, show the plan, ask, act.
    With a plan file: check it was not edited and the clusters have not moved on in a way
    its actions depend on, act."""
    if reviewed and not target.is_dir():
        raise typer.BadParameter(
            "takes a spec directory (the plan stored for its specs), not a plan file",
            param_hint="--reviewed",
        )
    if observed is not None:
        _apply_to_snapshot(target, observed, as_json)
        return

    def progress(o: ActionOutcome) -> None:
        if not as_json:
            outcome_line(out, o)

    # written plainly: a signal handler may run while the terminal library imports a module
    stopper = StopBetweenActions(_say_plainly)
    with stopper.installed():  # Ctrl-C, SIGTERM: stop after the action in flight
        if target.is_dir() and reviewed:
            loaded = load_to_plan(target)
            plan = review.reviewed_plan(target, loaded, db)
            if not as_json:
                made = plan.created_at.strftime("%Y-%m-%d %H:%M UTC")
                out.print(f"Applying plan {plan.id}, reviewed for these specs (made {made}).")
            report = workflow.apply_saved(
                plan,
                target,
                loaded,
                now=now,
                db=db,
                progress=progress,
                stop=stopper.asked,
                # a plain `cp plan` is never a reviewed one
                replan="plan these specs for review again (`cp plan --base REF`, the pull "
                "request's job), or apply without --reviewed",
                reviewed=True,
            )
        elif target.is_dir():

            def approve(plan: Plan, observed: Snapshot, *, again: bool = False) -> bool:
                if not as_json:
                    plan_view.print_plan(out, plan)
                    if again:  # the store's, nothing new to do
                        out.print(plan_view.shown_again(plan), highlight=False)
                elif not (auto_approve or plan.empty):  # what is asked about, beside the JSON
                    plan_view.print_plan(err, plan)
                if auto_approve or plan.empty:
                    return True
                # the question goes to stderr when stdout is a JSON document
                if _confirm("Apply this plan?", err=as_json):
                    return True
                if as_json:
                    write_json(
                        apply_json(plan.id, None, declined=True, cut_short=plan.solver.cut_short)
                    )
                err.print("Apply cancelled.")
                raise typer.Exit(1)

            loaded = load_to_plan(target)
            plan, maybe = workflow.apply_specs(
                target,
                loaded,
                now=now,
                db=db,
                policy=Policy(time_limit=time_limit),  # the plan made now, as `cp plan` does
                approve=approve,
                progress=progress,
                stop=stopper.asked,
            )
            if maybe is None:
                silent = none_answered(plan.unreachable, loaded.desired) or ""
                if silent:  # nothing was observed: no "no changes" for a CI job
                    silent += ": nothing was observed or applied"
                if as_json:
                    write_json(
                        apply_json(
                            plan.id,
                            None,
                            unreachable=plan.unreachable,
                            silent=silent,
                            waiting=len(plan.pending),
                            cut_short=plan.solver.cut_short,
                        )
                    )
                if silent:
                    err.print(f"error: {silent}", highlight=False, soft_wrap=True, markup=False)
                    raise typer.Exit(1)
                return
            report = maybe
        else:
            # without --dir the specs of the current folder are taken: say so when they fail
            hint = (
                ""
                if spec_dir
                else f"; no --dir given: if {target} was made from the "
                + ("specs of another folder, give that folder with --dir")
            )
            spec_dir = spec_dir or Path(".")
            if not target.exists():
                raise PlanNotFoundError(f"no plan file {target}")
            plan = statefiles.read_plan(target)
            try:
                loaded = load(spec_dir)
            except SpecError as exc:
                if hint:
                    exc.add_note(hint.removeprefix("; "))
                raise
            unknown = sorted({a.cluster for a in plan.actions} - set(loaded.desired.clusters))
            if unknown:  # before anything is opened: a plan file applied from the wrong folder
                raise ApplyError(
                    f"plan {target} acts on cluster(s) {', '.join(unknown)}, which the specs in "
                    f"{spec_dir} do not declare: it was made from another spec directory; give "
                    "that one with --dir"
                )
            if loaded.desired.digest != plan.spec_digest:  # its actions were meant for others
                raise StalePlanError(
                    f"the specs in {spec_dir} changed since plan {plan.id} was made (or it was "
                    f"made from another spec directory){_since(plan, spec_dir)}; nothing was "
                    "applied: run `cp plan` again" + hint
                )
            report = workflow.apply_saved(
                plan, spec_dir, loaded, now=now, db=db, progress=progress, stop=stopper.asked
            )
    if as_json:
        write_json(
            apply_json(
                plan.id, report, unreachable=plan.unreachable, cut_short=plan.solver.cut_short
            )
        )
    else:
        verdict(out, report, spec_dir if target.is_file() else target)
    if report.stopped:
        raise typer.Exit(130)  # as a shell reports an interrupted command
    if not report.ok:
        raise typer.Exit(1)


def _apply_to_snapshot(plan_file: Path, snapshot_file: Path, as_json: bool) -> None:
    from adapters.simulator import SimulatedCluster

    if not plan_file.is_file():
        raise PlanNotFoundError(f"no plan file {plan_file} (what-if apply takes a plan file)")
    plan = statefiles.read_plan(plan_file)
    snap = statefiles.read_snapshot(snapshot_file)
    if observed_digest(snap) != plan.observed_digest:
        raise StalePlanError(f"plan {plan.id} was not made against {snapshot_file}")
    sims = {c.name: SimulatedCluster(c) for c in snap.clusters}
    results = []
    for action in plan.execution_order():
        sim = sims.get(action.cluster)
        if sim is None:
            raise PlanNotFoundError(f"the snapshot has no cluster {action.cluster}")
        r = sim.execute(action, plan_id=plan.id, now=snap.now)
        results.append({"op": action.op.value, "workload": action.workload, "job": r.job})
    if snapshot_file.suffix in (".yaml", ".yml"):  # in the form it was read, as observe writes it
        import yaml

        data = snap.model_dump(mode="json", by_alias=True, exclude_none=True)
        snapshot_file.write_text(yaml.safe_dump(data, sort_keys=False))
    else:
        snapshot_file.write_text(
            snap.model_dump_json(by_alias=True, indent=2, exclude_none=True) + "\n"
        )
    if as_json:
        write_json({"plan": plan.id, "actions": results})
    else:
        out.print(f"Applied {len(results)} actions of plan {plan.id} to {snapshot_file}.")


@app.command(
    epilog=examples(
        "cp watch examples/quickstart --interval 60 --auto-approve",
        "cp watch . --once",
    )
)
def watch(
    spec_dir: DirArg = Path("."),
    interval: Annotated[float, typer.Option(help="seconds between reconciles")] = 30.0,
    quiet: Annotated[
        float,
        typer.Option(
            min=0.0, help="seconds the spec files must be unchanged before a cycle reads them"
        ),
    ] = 2.0,
    auto_approve: Annotated[bool, typer.Option("--auto-approve", help="apply every plan")] = False,
    allow_mass_prune: Annotated[
        bool,
        typer.Option(
            "--allow-mass-prune",
            help="apply plans that cancel many running workloads that "
            "left the specs (see --max-prune-share)",
        ),
    ] = False,
    max_prune_share: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="without --allow-mass-prune, a plan cancelling more than this "
            "share of the running workloads (and more than one) is shown, not applied",
        ),
    ] = 0.25,
    once: Annotated[bool, typer.Option(help="one cycle, then exit (for cron and CI)")] = False,
    time_limit: TimeLimitOpt = DEFAULT_POLICY.time_limit,
    keep_history: Annotated[
        str | None,
        typer.Option(
            "--keep-history",
            metavar="AGE",
            callback=age,
            help="once a day, remove the history older than this (as cp store prune does)",
        ),
    ] = None,
    db: DbOpt = None,
) -> None:
    """Reconcile continuously: plan (and with --auto-approve apply) on every spec change or
    tick. One timestamped line per cycle; problems are reported and retried with backoff;
    SIGINT/SIGTERM stop after the step in flight (an apply: its action), a second one at
    once. With --once, one cycle: exit 1 if it failed or its plan was held back (a mass
    prune). With --keep-history, the first cycle and one a day after it then remove the
    oldest history (`cp store prune --older-than AGE`), with a line when some went."""
    if not interval > 0:
        raise typer.BadParameter("give a number of seconds above 0", param_hint="--interval")

    from watchfiles import watch as watch_files

    from controlplane.following import Followed
    from controlplane.watch import Watcher, WatchOptions

    options = WatchOptions(
        interval=interval,
        quiet=quiet,
        auto_approve=auto_approve,
        allow_mass_prune=allow_mass_prune,
        max_prune_share=max_prune_share,
        db=db,
        keep_history=parse_duration(keep_history) if keep_history else None,
        policy=Policy(time_limit=time_limit),  # each cycle's plan, as `cp plan` makes it
    )
    watcher = Watcher(
        spec_dir,
        options,
        lambda line: out.print(line, highlight=False, soft_wrap=True, markup=False),
    )
    changes = (
        None
        if once
        else Followed(  # the directory the path names now: it may be replaced under us
            spec_dir,
            # every change, and a tick a second: the watcher tells them apart
            lambda: watch_files(
                spec_dir,
                rust_timeout=int(min(interval, 1.0) * 1000),
                yield_on_timeout=True,
                stop_event=watcher.stopping,
                debounce=200,
                watch_filter=None,
            ),
            watcher.stopping,
        )
    )
    # Ctrl-C, SIGTERM: stop after the step in flight; again: at once, as an apply stops
    with (
        interrupts.StopLoop(_say_plainly, watcher).installed(),
        outlet.on_gone(lambda: _stop_unread(watcher)),
    ):
        try:
            watcher.run(changes, once=once)
        except KeyboardInterrupt:  # what watchfiles makes of a signal handler's exception
            raise interrupts.LoopInterrupted from None
    if once and (watcher.failed or watcher.held_back):
        raise typer.Exit(1)  # cron and CI see a failed cycle, or one that needs a person


def _stop_unread(watcher: Watcher) -> None:
    """Nobody reads the loop's lines any more (``cp watch | head``): stop as on Ctrl-C."""
    watcher.stop()
    _say_plainly("output closed: stopping after the step in flight")


def _say_plainly(said: str) -> None:
    sys.stderr.write(f"{said}\n")


def _confirm(question: str, *, err: bool) -> bool:
    """Ask ``question`` (on stderr with ``err``), default no. click's own prompt writes a
    space to stdout after an answer read from a pipe, even with ``err``: before a JSON
    document there, it must write nothing."""
    if not err:
        return typer.confirm(question, default=False)
    sys.stderr.write(f"{question} [y/N]: ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if not answer:  # no answer at all (stdin closed), as click says it
        raise typer.Abort()
    return answer.strip().lower() in ("y", "yes")


def _since(plan: Plan, spec_dir: Path) -> str:
    """Where to see what changed in the specs since ``plan`` was made: the commit they
    were read at (the plan's ``gitCommit``), where it names one."""
    sha = commit_of(plan.git_commit)
    if not sha:
        return ""
    edits = ", with edits not committed then" if sha != plan.git_commit else ""
    return f"; it was made at commit {sha[:12]}{edits}: `git diff {sha[:12]} -- {spec_dir}` shows what changed"
