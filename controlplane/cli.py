"""The ``cp`` / ``controlplane`` command line (typer).

Terraform-like: ``plan`` shows what would change and why, ``apply`` does it, every plan and
action is stored. Exit codes: 0 success; 1 an error (bad specs, stale plan, failed action);
2 from ``plan --detailed-exitcode`` when the plan has changes.

Because ``cp`` is also coreutils' copy command, :func:`main` hands every invocation whose
first argument is not one of our subcommands (or --help/--version) to the system ``cp``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Optional

import typer

try:  # recent typer carries its own copy of click; its exceptions are that copy's
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer uses click itself
    import click  # type: ignore[no-redef]
from rich.console import Console

from adapters.base import AdapterError
from controlplane import __version__, render
from controlplane.apply import ActionOutcome, apply_plan
from controlplane.costs import CandidateTable, candidate_table
from controlplane.errors import ControlPlaneError, PlanNotFoundError, StalePlanError
from controlplane.forecast import gather
from controlplane.observe import adapters_for, observe
from controlplane.plan import Plan
from controlplane.reconcile import plan as make_plan
from controlplane.store import Store, default_url
from solvers.policy import Policy
from specs.diagnostics import SpecError
from specs.loader import LoadResult, load_specs
from specs.snapshot import Snapshot, observed_digest

app = typer.Typer(
    name="cp",
    help="controlplane: declarative GPU quota, placement and preemption for Slurm, "
    "Kubernetes and a built-in simulator. Specs in git, plans you can review.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
)
out = Console()
err = Console(stderr=True)

DirArg = Annotated[Path, typer.Argument(help="spec directory (a git repo of YAML specs)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output")]
DbOpt = Annotated[Optional[str], typer.Option("--db", help="SQLAlchemy URL of the store "
                                              "[default: sqlite under DIR/.cp/]", envvar="CP_DB")]
ForecastOpt = Annotated[bool, typer.Option(
    "--forecast/--no-forecast", help="ask the clusters when fan-out candidates would start "
    "(Slurm: sbatch --test-only, one job id each); without, candidates rank by cost")]
NowOpt = Annotated[Optional[datetime], typer.Option(
    "--now", help="plan as of this time (ISO 8601); default: the clock", formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"])]


# --------------------------------------------------------------------------- helpers


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(timezone.utc)
    return now if now.tzinfo else now.replace(tzinfo=timezone.utc)


def _load(spec_dir: Path) -> LoadResult:
    """Load and validate; on errors print them all (file:line:col) and exit 1."""
    if not spec_dir.is_dir():
        err.print(f"[red]error:[/] {spec_dir} is not a directory of specs")
        raise typer.Exit(1)
    result = load_specs(spec_dir, cache_dir=spec_dir / ".cp" / "cache")
    for w in result.warnings:
        err.print(f"[yellow]{w}[/]", highlight=False)
    return result


def _store(spec_dir: Path, db: str | None) -> Store:
    return Store(db or default_url(spec_dir))


def _git_commit(spec_dir: Path) -> str | None:
    git = shutil.which("git")
    if git is None:
        return None
    try:
        res = subprocess.run([git, "-C", str(spec_dir), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None if res.returncode == 0 else None


def _read_snapshot(path: Path) -> Snapshot:
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text)
        return Snapshot.model_validate(data)
    return Snapshot.model_validate_json(text)


def _clock(now: datetime | None):  # type: ignore[no-untyped-def]
    fixed = _now(now) if now is not None else None
    return (lambda: fixed) if fixed else (lambda: datetime.now(timezone.utc))


def _build_plan(spec_dir: Path, observed: Path | None, now: datetime | None,
                db: str | None, *, forecast: bool = False,
                policy: Policy = Policy()) -> tuple[Plan, LoadResult]:
    """Plan DIR; ``forecast``: ask the clusters for fan-out candidates' start estimates
    (never with ``observed``: a snapshot file has no cluster behind it)."""
    loaded = _load(spec_dir)
    when = _now(now)
    forecasts = None
    if observed is not None:
        snap = _read_snapshot(observed)
        when = _now(now) if now is not None else snap.now
        store = None
    else:
        store = _store(spec_dir, db)
        adapters = adapters_for(loaded.desired, spec_dir / ".cp", _clock(now))
        snap = observe(loaded.desired, adapters, when, store)
        if forecast:
            forecasts = gather(loaded.desired, snap, adapters, when)
    started = time.perf_counter()
    plan = make_plan(loaded.desired, snap, now=when, git_commit=_git_commit(spec_dir),
                     forecasts=forecasts, policy=policy)
    wall = round(time.perf_counter() - started, 4)
    plan = plan.model_copy(update={"solver": plan.solver.model_copy(update={"wall_seconds": wall})})
    if store is not None:
        store.save_plan(plan)
    return plan, loaded


# --------------------------------------------------------------------------- commands


@app.command()
def validate(spec_dir: DirArg = Path("."), as_json: JsonOpt = False) -> None:
    """Load and check every spec; report all problems at once as file:line:col."""
    loaded = _load(spec_dir)
    d = loaded.desired
    counts = {"clusters": len(d.clusters), "departments": len(d.departments),
              "projects": len(d.projects), "workloads": len(d.workloads)}
    if as_json:
        out.print_json(json.dumps({"valid": True, **counts, "warnings": [str(w) for w in loaded.warnings]}))
    else:
        out.print(f"[green]valid[/]: " + ", ".join(f"{v} {k}" for k, v in counts.items()))


@app.command()
def schema(output: Annotated[Optional[Path], typer.Option("--out", help="write to this file")] = None) -> None:
    """Print the JSON Schema of spec documents (for editors: yaml-language-server)."""
    from specs.schema import json_schema

    text = json.dumps(json_schema(), indent=2)
    if output:
        output.write_text(text + "\n")
    else:
        sys.stdout.write(text + "\n")


@app.command("observe")
def observe_cmd(spec_dir: DirArg = Path("."), as_yaml: Annotated[bool, typer.Option("--yaml")] = False,
                now: NowOpt = None, db: DbOpt = None) -> None:
    """Print the observed state of every cluster (a snapshot usable with plan --observed)."""
    loaded = _load(spec_dir)
    adapters = adapters_for(loaded.desired, spec_dir / ".cp", _clock(now))
    snap = observe(loaded.desired, adapters, _now(now), _store(spec_dir, db))
    data = snap.model_dump(mode="json", by_alias=True, exclude_none=True)
    if as_yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")


@app.command("plan")
def plan_cmd(
    spec_dir: DirArg = Path("."),
    observed: Annotated[Optional[Path], typer.Option(help="plan against this snapshot (JSON/YAML) "
                                                     "instead of observing the clusters")] = None,
    out_file: Annotated[Optional[Path], typer.Option("--out", help="save the plan for `cp apply`")] = None,
    as_json: JsonOpt = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="a pull-request comment")] = False,
    detailed_exitcode: Annotated[bool, typer.Option("--detailed-exitcode",
                                                    help="exit 2 when the plan has changes")] = False,
    forecast: ForecastOpt = True,
    engine: Annotated[str, typer.Option(help="best: KAI's greedy and CP-SAT, the better answer; "
                                        "kai: KAI's greedy alone")] = "best",
    time_limit: Annotated[float, typer.Option(help="seconds for the CP-SAT search")] = Policy().time_limit,
    now: NowOpt = None,
    db: DbOpt = None,
) -> None:
    """Show what would change, and why: submissions, evictions, moves, and what waits."""
    if engine not in ("best", "kai"):
        raise typer.BadParameter("use best or kai", param_hint="--engine")
    policy = Policy(engine=engine, time_limit=time_limit)
    plan, _ = _build_plan(spec_dir, observed, now, db, forecast=forecast, policy=policy)
    if out_file:
        out_file.write_text(plan.to_json() + "\n")
    if as_json:
        sys.stdout.write(plan.to_json() + "\n")
    elif markdown:
        sys.stdout.write(render.plan_markdown(plan))
    else:
        render.print_plan(out, plan)
        if out_file:
            out.print(f"Saved to {out_file}; run [bold]cp apply {out_file}[/] to carry it out.")
    if detailed_exitcode and not plan.empty:
        raise typer.Exit(2)


@app.command()
def apply(
    target: Annotated[Path, typer.Argument(help="a plan file from `cp plan --out`, or a spec "
                                           "directory (plan now, then apply)")] = Path("."),
    spec_dir: Annotated[Optional[Path], typer.Option("--dir", help="spec directory when TARGET "
                                                     "is a plan file [default: .]")] = None,
    auto_approve: Annotated[bool, typer.Option("--auto-approve", help="don't ask")] = False,
    observed: Annotated[Optional[Path], typer.Option(
        help="what-if: apply the plan file to this snapshot with the simulator engine and "
        "rewrite the snapshot (no cluster or store is touched)")] = None,
    as_json: JsonOpt = False,
    now: NowOpt = None,
    db: DbOpt = None,
) -> None:
    """Carry out a plan through the adapters; safe to rerun after an interruption."""
    if observed is not None:
        _apply_to_snapshot(target, observed, as_json)
        return
    if target.is_dir():
        spec_dir = target
        plan, loaded = _build_plan(spec_dir, None, now, db, forecast=True)
        if not as_json:
            render.print_plan(out, plan)
        if plan.empty:
            return
        if not auto_approve and not typer.confirm("Apply this plan?", default=False):
            err.print("Apply cancelled.")
            raise typer.Exit(1)
    else:
        spec_dir = spec_dir or Path(".")
        if not target.exists():
            raise PlanNotFoundError(f"no plan file {target}")
        plan = Plan.from_json(target.read_text())
        loaded = _load(spec_dir)
        if loaded.desired.digest != plan.spec_digest:
            err.print("[yellow]warning:[/] the specs changed since this plan was made")
    store = _store(spec_dir, db)
    adapters = adapters_for(loaded.desired, spec_dir / ".cp", _clock(now))
    digest: str | None = None  # a plan made a moment ago: re-observing would only race jobs starting
    if not (target.is_dir() and auto_approve):
        digest = observed_digest(observe(loaded.desired, adapters, _now(now), store, record=False))

    def progress(o: ActionOutcome) -> None:
        if as_json:
            return
        color = {"done": "green", "failed": "red"}.get(o.status, "dim")
        out.print(f"  [{color}]{o.status:>6}[/] {o.action.op.value:<8} {o.action.workload}"
                  + (f"  job {o.job}" if o.job else "") + (f"  {o.message}" if o.message else ""))

    report = apply_plan(plan, adapters, store, observed_digest=digest, progress=progress)
    if as_json:
        sys.stdout.write(json.dumps({
            "plan": plan.id, "resumed": report.resumed, "ok": report.ok,
            "actions": [{"seq": o.seq, "op": o.action.op.value, "workload": o.action.workload,
                         "status": o.status, "job": o.job, "message": o.message}
                        for o in report.outcomes]}, indent=2) + "\n")
    else:
        done = sum(o.status == "done" for o in report.outcomes)
        verdict = "[green]Apply complete[/]" if report.ok else "[red]Apply stopped[/]"
        out.print(f"{verdict}: {done} done, {len(report.failed)} failed"
                  + (" (resumed an interrupted apply)" if report.resumed else "") + ".")
    if not report.ok:
        raise typer.Exit(1)


def _apply_to_snapshot(plan_file: Path, snapshot_file: Path, as_json: bool) -> None:
    from adapters.simulator import SimulatedCluster

    if not plan_file.is_file():
        raise PlanNotFoundError(f"no plan file {plan_file} (what-if apply takes a plan file)")
    plan = Plan.from_json(plan_file.read_text())
    snap = _read_snapshot(snapshot_file)
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
    snapshot_file.write_text(snap.model_dump_json(by_alias=True, indent=2, exclude_none=True) + "\n")
    if as_json:
        sys.stdout.write(json.dumps({"plan": plan.id, "actions": results}, indent=2) + "\n")
    else:
        out.print(f"Applied {len(results)} actions of plan {plan.id} to {snapshot_file}.")


@app.command()
def history(
    spec_dir: DirArg = Path("."),
    workload: Annotated[Optional[str], typer.Option(help="only this project/name")] = None,
    limit: Annotated[int, typer.Option(help="newest N")] = 50,
    as_json: JsonOpt = False,
    db: DbOpt = None,
) -> None:
    """Who did what to which workload, when, and why (applied actions, newest first)."""
    rows = _store(spec_dir, db).history(workload, limit)
    if as_json:
        sys.stdout.write(json.dumps([{
            "plan": p.id, "at": (a.started_at or p.created_at).isoformat(), "op": a.op,
            "workload": a.workload, "cluster": a.cluster, "job": a.job, "status": a.status,
            "reason": {"code": a.reason_code, "message": a.reason}, "message": a.message,
        } for a, p in rows], indent=2) + "\n")
    elif not rows:
        out.print("No actions applied yet.")
    else:
        render.print_history(out, rows)


@app.command()
def show(
    plan_ref: Annotated[str, typer.Argument(help="plan id (or prefix) from the store, or a plan file")],
    spec_dir: Annotated[Path, typer.Option("--dir", help="spec directory holding the store")] = Path("."),
    as_json: JsonOpt = False,
    markdown: Annotated[bool, typer.Option("--markdown")] = False,
    db: DbOpt = None,
) -> None:
    """Show a stored plan (or a plan file) and, if applied, each action's outcome."""
    path = Path(plan_ref)
    store = _store(spec_dir, db)
    plan = Plan.from_json(path.read_text()) if path.is_file() else store.get_plan(plan_ref)
    if plan is None:
        raise PlanNotFoundError(f"no stored plan matches {plan_ref!r} (see `cp history`)")
    if as_json:
        sys.stdout.write(plan.to_json() + "\n")
        return
    if markdown:
        sys.stdout.write(render.plan_markdown(plan))
        return
    render.print_plan(out, plan)
    rows = store.actions(plan.id)
    if any(r.status != "pending" for r in rows):
        out.print(f"\nApply status: [bold]{store.plan_status(plan.id)}[/]")
        for r in rows:
            out.print(f"  {r.status:>8}  {r.op:<8} {r.workload}" + (f"  job {r.job}" if r.job else "")
                      + (f"  {r.message}" if r.message else ""))


@app.command()
def status(spec_dir: DirArg = Path("."), observed: Annotated[Optional[Path], typer.Option()] = None,
           as_json: JsonOpt = False, now: NowOpt = None, db: DbOpt = None) -> None:
    """Per project: deserved, fair share, allocated and waiting GPUs."""
    plan, _ = _build_plan(spec_dir, observed, now, db)
    if as_json:
        sys.stdout.write(json.dumps({
            "projects": {k: v.model_dump(by_alias=True) for k, v in plan.projects.items()},
            "departments": {k: v.model_dump(by_alias=True) for k, v in plan.departments.items()},
        }, indent=2) + "\n")
    else:
        render.print_quota(out, plan.projects, plan.departments)


@app.command()
def explain(
    workload: Annotated[str, typer.Argument(help="PROJECT/NAME")],
    spec_dir: Annotated[Path, typer.Option("--dir", help="spec directory")] = Path("."),
    observed: Annotated[Optional[Path], typer.Option()] = None,
    as_json: JsonOpt = False,
    now: NowOpt = None,
    db: DbOpt = None,
) -> None:
    """Why a workload waits, runs, or was evicted: the plan's reason and its history."""
    plan, loaded = _build_plan(spec_dir, observed, now, db, forecast=True)
    if workload not in loaded.desired.workloads:
        raise PlanNotFoundError(f"no workload {workload!r} in the specs (use PROJECT/NAME)")
    actions = [a for a in plan.actions if a.workload == workload]
    pending = [p for p in plan.pending if p.workload == workload]
    past = _store(spec_dir, db).history(workload, 10) if observed is None else []
    chain = plan.quota_chain(loaded.desired.workloads[workload].spec.project)
    if as_json:
        sys.stdout.write(json.dumps({
            "workload": workload,
            "quota": [{"kind": k, "name": n, **q.model_dump(by_alias=True)} for k, n, q in chain],
            "actions": [a.model_dump(mode="json", by_alias=True) for a in actions],
            "pending": [p.model_dump(mode="json", by_alias=True) for p in pending],
            "history": [{"plan": p.id, "op": a.op, "status": a.status, "reason": a.reason,
                         "at": (a.started_at or p.created_at).isoformat()} for a, p in past],
        }, indent=2) + "\n")
        return
    for a in actions:
        out.print(f"[bold]{a.op.value}[/] planned — {a.reason.code.value}: {a.reason.message}")
    for p in pending:
        out.print(f"[bold]waits[/] — {p.reason.code.value}: {p.reason.message}")
    if not actions and not pending:
        out.print("[green]running or finished as specified[/]; nothing to change.")
    out.print()
    reasons = " ".join(x.reason.message for x in [*actions, *pending])
    render.print_quota_chain(out, chain, reasons)
    if past:
        out.print("\nHistory:")
        render.print_history(out, past)


@app.command()
def cost(
    workload: Annotated[str, typer.Argument(help="PROJECT/NAME")],
    spec_dir: Annotated[Path, typer.Option("--dir", help="spec directory")] = Path("."),
    observed: Annotated[Optional[Path], typer.Option(
        help="use this snapshot (no forecasts: candidates rank by cost)")] = None,
    forecast: ForecastOpt = True,
    as_json: JsonOpt = False,
    now: NowOpt = None,
    db: DbOpt = None,
) -> None:
    """The fan-out candidates of a workload: where, shape, mode, estimated start, cost, and
    which ones a plan submits (any workload: for one without fanOut, what it would choose)."""
    loaded = _load(spec_dir)
    if workload not in loaded.desired.workloads:
        raise PlanNotFoundError(f"no workload {workload!r} in the specs (use PROJECT/NAME)")
    if observed is not None:
        snap = _read_snapshot(observed)
        when, adapters = (_now(now) if now is not None else snap.now), None
    else:
        when = _now(now)
        adapters = adapters_for(loaded.desired, spec_dir / ".cp", _clock(now))
        snap = observe(loaded.desired, adapters, when, _store(spec_dir, db), record=False)
    table = candidate_table(loaded.desired, snap, workload, when,
                            adapters if forecast else None)
    if as_json:
        sys.stdout.write(json.dumps(table.to_json(), indent=2) + "\n")
        return
    _print_candidates(table)


def _print_candidates(table: CandidateTable) -> None:
    """One line per candidate, chosen ones marked ``*`` (plain columns: never truncated)."""
    from solvers.fanout import describe_start
    from specs.durations import format_duration

    kind = (f"fan-out, up to {table.max_parallel} at once" if table.fan_out
            else "no fanOut: what fan-out would choose")
    where = "estimates from the clusters" if table.forecasted else "no estimates: by cost"
    out.print(f"[bold]{table.workload}[/] ({kind}; {where})", highlight=False)
    if not table.rows:
        out.print("No candidates: no node pool fits its GPU type, memory, clusters and shape.")
        return
    rows = [("", "candidate", "type", "partition", "nodes", "mode", "estimated start",
             "walltime", "cost", "")]
    for v in table.rows:
        c = v.candidate
        wall = format_duration(c.walltime) if c.walltime else "-"
        if c.time_min:
            wall = f"{format_duration(c.time_min)}..{wall}"
        start = describe_start(v.estimate, table.now, table.forecasted).removeprefix("starts ")
        rows.append(("*" if v.status.value == "chosen" else " ", c.name, c.gpu_type,
                     c.partition or "-", f"{c.nodes} x {c.gpus_per_node}", c.mode.value, start,
                     wall, f"{c.cost:,.2f}", f"{v.status.value}: {v.note}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        line = "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip()
        out.print(line, style="bold" if i == 0 else None, highlight=False, soft_wrap=True,
                  markup=False)


@app.command()
def watch(
    spec_dir: DirArg = Path("."),
    interval: Annotated[float, typer.Option(help="seconds between reconciles")] = 30.0,
    auto_approve: Annotated[bool, typer.Option("--auto-approve", help="apply every plan")] = False,
    once: Annotated[bool, typer.Option(help="one cycle, then exit (for cron and CI)")] = False,
    db: DbOpt = None,
) -> None:
    """Reconcile continuously: plan (and with --auto-approve apply) on every spec change or tick."""
    from watchfiles import watch as watch_files

    def cycle() -> None:
        try:
            plan, loaded = _build_plan(spec_dir, None, None, db, forecast=True)
        except SpecError as exc:
            for d in exc.diagnostics:
                err.print(str(d), highlight=False)
            return
        out.print(render.summary(plan))
        if plan.empty or not auto_approve:
            return
        adapters = adapters_for(loaded.desired, spec_dir / ".cp", _clock(None))
        # planned a moment ago from a fresh observation: no staleness check to race against
        report = apply_plan(plan, adapters, _store(spec_dir, db), observed_digest=None)
        out.print(f"applied {plan.id}: {sum(o.status == 'done' for o in report.outcomes)} done, "
                  f"{len(report.failed)} failed")

    cycle()
    if once:
        return
    for _ in watch_files(spec_dir, rust_timeout=int(interval * 1000), yield_on_timeout=True,
                         watch_filter=lambda _c, p: "/.cp/" not in p and p.endswith((".yaml", ".yml"))):
        cycle()


# --------------------------------------------------------------------------- entry point


def _version_callback(value: bool) -> None:
    if value:
        out.print(f"controlplane {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_version_callback,
                                                is_eager=True, help="show the version")] = False) -> None:
    pass


def _system_cp() -> str:
    """coreutils' cp: the first ``cp`` on PATH that is not this program."""
    me = Path(sys.argv[0]).resolve()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        cand = Path(d) / "cp"
        if cand.is_file() and os.access(cand, os.X_OK) and cand.resolve() != me:
            return str(cand)
    return "/bin/cp"


def main() -> None:
    sys.exit(run(sys.argv[1:], sys.argv[0]))


def run(args: list[str], argv0: str = "cp") -> int:
    """Run the command line with ``args``; return the exit code (tests call this in-process)."""
    ours = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback}
    invoked_as = Path(argv0).name
    if invoked_as == "cp" and args and args[0] not in ours | {"--help", "-h", "--version"}:
        os.execv(_system_cp(), ["cp", *args])  # not ours: behave exactly like coreutils cp
    command = typer.main.get_command(app)
    prog = invoked_as if invoked_as in ("cp", "controlplane") else "cp"
    try:
        code = command.main(args=args, prog_name=prog, standalone_mode=False)
    except click.ClickException as exc:  # usage errors: click words them
        exc.show()
        code = exc.exit_code
    except typer.Abort:
        err.print("Aborted.")
        code = 1
    except SpecError as exc:
        for d in exc.diagnostics:
            err.print(str(d), highlight=False, soft_wrap=True)
        n = sum(d.severity == "error" for d in exc.diagnostics)
        err.print(f"[red]{n} error(s)[/]; nothing was planned or applied.")
        code = 1
    except (ControlPlaneError, AdapterError) as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False)
        code = 1
    return code if isinstance(code, int) else 0
