"""``cp store``: the store's own housekeeping (creating its tables on purpose, forgetting a
cluster that is gone, pruning the oldest history)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from controlplane import pruning, workflow
from controlplane.cli.app import (
    DbOpt,
    DirAfterArg,
    DirArg,
    DirOpt,
    JsonOpt,
    age,
    app,
    examples,
    load,
    out,
    spec_dir_of,
    write_json,
)
from controlplane.cli.views.words import counted
from controlplane.errors import ControlPlaneError
from specs.durations import parse_duration

store_app = typer.Typer(
    help=(
        "The store's housekeeping: create or upgrade its tables, forget a cluster that is "
        "gone, prune the oldest history."
    ),
    no_args_is_help=True,
)
app.add_typer(store_app, name="store")


@store_app.command(
    "init", epilog=examples("cp store init --db postgresql+psycopg://cp@db.example/controlplane")
)
def init(spec_dir: DirArg = Path("."), as_json: JsonOpt = False, db: DbOpt = None) -> None:
    """Create the store's tables (or upgrade them) in a database that has none.

    Needed once for a PostgreSQL store, and to start again in a SQLite file that lost its
    tables (which is otherwise refused, so that history is never silently thrown away)."""
    store = workflow.open_store(spec_dir, db, init=True)
    if as_json:
        write_json({"ok": True, "store": store.name})
    else:
        out.print(f"store ready: {store.name}", highlight=False, soft_wrap=True)


@store_app.command(
    "forget-cluster", epilog=examples("cp store forget-cluster old-west examples/quickstart")
)
def forget_cluster(
    name: Annotated[str, typer.Argument(help="a cluster no longer in the specs")],
    given_dir: DirAfterArg = None,
    dir_option: DirOpt = None,
    as_json: JsonOpt = False,
    db: DbOpt = None,
) -> None:
    """Forget a cluster that is gone for good, removed from the specs while the store still
    knew work of ours there (which plans hold meanwhile: it may be running). Its runs not
    seen ending end when they were last seen (their usage stands), its placeholders go, and
    the next plan starts their workloads anew where the specs allow; what completed there
    stays done. A cluster in the specs is refused: remove it first, or let its work end."""
    spec_dir = spec_dir_of(given_dir, dir_option)
    loaded = load(spec_dir)
    if name in loaded.desired.clusters:
        raise ControlPlaneError(
            f"cluster {name} is in the specs: remove its Cluster document first (or keep it, "
            "and let the plans stop what no workload needs there)"
        )
    store = workflow.open_store(spec_dir, db)
    known = store.clusters_with_work() - loaded.desired.clusters.keys()
    if name not in known:  # a typo would pass for done, and the work stay held
        others = f" (it knows some on {', '.join(sorted(known))})" if known else ""
        raise ControlPlaneError(
            f"the store knows no work of ours on a cluster {name!r} outside the specs{others}: "
            "nothing to forget"
        )
    runs, placeholders = store.forget_cluster(name)
    if as_json:
        write_json({"cluster": name, "runs": runs, "placeholders": placeholders})
    else:
        out.print(
            f"forgot cluster {name}: {counted(runs, 'run')} not seen ending, "
            f"{counted(placeholders, 'placeholder')}",
            highlight=False,
            soft_wrap=True,
        )


AgeOpt = Annotated[
    str,
    typer.Option(
        "--older-than",
        metavar="AGE",
        callback=age,
        help="history older than this goes: 90d, 12h, 2d12h (its first records first)",
    ),
]


@store_app.command(
    "prune",
    epilog=examples(
        "cp store prune examples/quickstart --older-than 90d --dry-run",
        "cp store prune . --older-than 90d --json",
    ),
)
def prune(
    older_than: AgeOpt,
    spec_dir: DirArg = Path("."),
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="say what would go; remove nothing")
    ] = False,
    wait: Annotated[
        float,
        typer.Option(min=0.0, help="seconds to wait for an apply in progress to finish"),
    ] = 60.0,
    vacuum: Annotated[
        bool,
        typer.Option(
            "--vacuum", help="SQLite: then rewrite the file without the freed space (it shrinks)"
        ),
    ] = False,
    as_json: JsonOpt = False,
    db: DbOpt = None,
) -> None:
    """Remove the oldest history: plans, their actions and events, older than AGE.

    The history is one chain, so what goes is its beginning, up to the first record that
    must stay: one newer than AGE, or of a plan an apply may resume or that was applied
    last. A removed plan's id, specs and status are kept (sealed for `cp history
    --verify`): its running jobs stay ours, its specs applied, its plan file not applied
    again.
    What is left verifies from a checkpoint (`cp history --verify` prints it with the
    head). Runs, completions and failure streaks stay: usage, budgets and finished work
    count on them. One transaction, under the apply lease (an apply in progress is waited
    for; not for --dry-run): an interrupted prune removes nothing. SQLite reuses the space
    freed; --vacuum returns it to the disk (the file is rewritten: it takes a while)."""
    before, pruned, vacuumed = pruning.prune(
        spec_dir, db, parse_duration(older_than), dry_run=dry_run, wait=wait, vacuum=vacuum
    )
    if as_json:
        write_json(
            {
                "dryRun": dry_run,
                "before": before.isoformat(),
                "since": pruned.since,
                "through": pruned.through,
                "plans": pruned.plans,
                "actions": pruned.actions,
                "events": pruned.events,
                "observations": pruned.observations,
                "stopped": pruned.stopped,
                "vacuumed": vacuumed,
            }
        )
        return
    vacuumed_note = "; the file was vacuumed" if vacuumed else ""
    if vacuum and not vacuumed and not dry_run:
        vacuumed_note = "; not vacuumed: only a SQLite store needs it"
    told = pruning.told(pruned, dry_run=dry_run) + vacuumed_note
    out.print(told, highlight=False, soft_wrap=True)
