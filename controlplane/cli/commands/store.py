"""``cp store``: the store's own housekeeping (creating its tables on purpose)."""

from __future__ import annotations

from pathlib import Path

import typer

from controlplane import workflow
from controlplane.cli.app import DbOpt, DirArg, JsonOpt, app, examples, out, write_json

store_app = typer.Typer(
    help="The store's housekeeping: create or upgrade its tables.", no_args_is_help=True
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
