"""Opening the store's database: the URL, the schema, and errors a person can act on.

Three promises are kept here:

1. A database is never silently recreated. A SQLite file that does not exist yet is
   created with the schema (first use of a spec repo); one that exists without our tables
   (emptied, truncated to 0 bytes, or somebody else's) is refused until the user runs
   ``cp store init``. A PostgreSQL database always needs ``cp store init`` once: an empty
   shared database and one that lost its tables look the same.
2. Creating and migrating the schema is safe when several processes start at once (two
   first-time ``cp plan``): SQLite serialises on a lock file beside the database,
   PostgreSQL on an advisory lock, and whoever comes second finds the work done.
3. Every database problem reaches the user as one :class:`StoreError` line naming the
   database and what to do: a garbage or truncated file, a read-only one, a directory, a
   URL that is not one, a driver that is missing, a server that does not answer.

SQLite transactions begin ``IMMEDIATE`` (the write lock is taken at the start): two
writers never deadlock on a lock upgrade, and the history chain is appended to by one
process at a time.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Engine, event, inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError
from sqlmodel import Session, SQLModel, col, create_engine

from controlplane.errors import StoreError
from controlplane.store.tables import SCHEMA_VERSION, MetaRow

BUSY_SECONDS = 30  # SQLite: how long a writer waits for another one
# values bound in one IN list: a database binds a parameter per value (PostgreSQL at most
# 65,535 a statement, older SQLite 999)
IN_CHUNK = 900


def chunks(values: Iterable[str]) -> Iterator[list[str]]:
    """``values``, sorted, in lists of at most ``IN_CHUNK`` (one IN list each)."""
    ordered = sorted(values)
    for at in range(0, len(ordered), IN_CHUNK):
        yield ordered[at : at + IN_CHUNK]


def in_chunks(column: Any, values: Iterable[str]) -> Iterator[ColumnElement[bool]]:
    """``column IN values``, as conditions of at most ``IN_CHUNK`` values each."""
    for chunk in chunks(values):
        yield col(column).in_(chunk)


_PG_LOCK = 0x63705F7374  # "cp_st": the advisory lock that guards schema changes


def default_url(spec_dir: Path) -> str:
    return f"sqlite:///{(spec_dir / '.cp' / 'controlplane.db').resolve()}"


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names (None: another database, or one in memory), so that a
    command that only reads can tell a store that is not there before it makes one."""
    return _sqlite_path(_parse(url))


class Database:
    """An engine on a checked URL, with its schema verified (or created, or migrated)."""

    def __init__(self, url: str, *, init: bool = False, create_dir: bool = False) -> None:
        self.url = _parse(url)
        self.name = _display(self.url)
        self.sqlite_path = _sqlite_path(self.url)
        if self.sqlite_path is not None:
            _check_sqlite_path(self.sqlite_path, self.name, create_dir=create_dir)
        self.engine = _shared_engine(self.url, self.name, self.sqlite_path)
        with self.errors():
            self._open(init)

    # ------------------------------------------------------------------ errors

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Turn a database failure inside the block into one StoreError line."""
        try:
            yield
        except StoreError:
            raise
        except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
            raise translate(exc, self.name) from exc

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        with self.errors(), Session(self.engine) as db:
            yield db

    # ------------------------------------------------------------------ schema

    def _open(self, init: bool) -> None:
        with self._schema_lock():
            if self._new_file:
                self._create_whole()
                return
            tables = set(inspect(self.engine).get_table_names())
            if not tables:
                if not init:  # a new SQLite file was made whole above
                    raise StoreError(
                        f"{self.name} has no controlplane tables (emptied, or never "
                        "initialised); run `cp store init` to create them, or "
                        "restore a backup"
                    )
                SQLModel.metadata.create_all(self.engine)
                self._set_version()
                return
            if "plans" not in tables:
                raise StoreError(
                    f"{self.name} is a database of something else (no plans "
                    "table); point --db at the controlplane store"
                )
            version = self._version(tables)
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.name} has schema version {version}, newer than this "
                    f"controlplane ({SCHEMA_VERSION}); upgrade controlplane"
                )
            if version < SCHEMA_VERSION or not set(SQLModel.metadata.tables) <= tables:
                migrate(self.engine, version)
                self._set_version()

    def _create_whole(self) -> None:
        """A new SQLite store is made in a file beside it and renamed into place, so that a
        command interrupted meanwhile leaves no store or a whole one: an empty file would
        read as a store emptied since, and be refused."""
        assert self.sqlite_path is not None
        aside = self.sqlite_path.with_name(self.sqlite_path.name + ".new")
        aside.unlink(missing_ok=True)
        engine = _engine(make_url(f"sqlite:///{aside}"), self.name)
        try:
            SQLModel.metadata.create_all(engine)
            with Session(engine) as db:
                db.merge(MetaRow(key="schema_version", value=str(SCHEMA_VERSION)))
                db.commit()
        finally:
            engine.dispose()
        os.replace(aside, self.sqlite_path)

    @property
    def _new_file(self) -> bool:
        return self.sqlite_path is not None and getattr(self, "_created", False)

    @contextlib.contextmanager
    def _schema_lock(self) -> Iterator[None]:
        if self.sqlite_path is not None:
            lock = self.sqlite_path.with_name(self.sqlite_path.name + ".lock")
            with open(lock, "a") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                # decided under the lock, before anything connects (a connection creates the
                # file): whoever comes second finds the file and schema the first one made
                self._created = not self.sqlite_path.exists()
                yield
            return
        if self.url.get_backend_name() == "postgresql":
            with self.engine.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _PG_LOCK})
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_LOCK})
            return
        yield

    def _version(self, tables: set[str]) -> int:
        if "meta" not in tables:
            return 1  # the first release kept no version
        with Session(self.engine) as db:
            row = db.get(MetaRow, "schema_version")
            return int(row.value) if row is not None else 1

    def _set_version(self) -> None:
        with Session(self.engine) as db:
            db.merge(MetaRow(key="schema_version", value=str(SCHEMA_VERSION)))
            db.commit()


def migrate(engine: Engine, version: int) -> None:
    """Bring a schema of ``version`` up to date: new tables, the columns later versions
    added to old ones (plain ALTER TABLE ADD COLUMN), and data moved where it now lives."""
    SQLModel.metadata.create_all(engine)  # new tables only: existing ones are left as they are
    added: dict[str, tuple[str, ...]] = {
        "plans": ("chain_seq INTEGER", "prev_hash VARCHAR", "hash VARCHAR"),  # 2: the chain
        "events": ("actor VARCHAR",),  # 5: who applied
        "actions": ("acted_on VARCHAR",),  # 13: the job acted on, before a move replaced it
        "completions": ("spec_digest VARCHAR",),  # 6: the spec a completed job ran
        "failures": ("spec_digest VARCHAR", "state VARCHAR"),  # 7: its spec; 8: how it ended
        "runs": (
            "project VARCHAR DEFAULT ''",
            "gpus INTEGER DEFAULT 0",  # 3: usage from runs
            "gpu_type VARCHAR",
            "retired BOOLEAN DEFAULT FALSE",
            "price FLOAT",  # 10: the price it ran at
            "plan_id VARCHAR",  # 11: the plan that submitted it
            "rolled BOOLEAN DEFAULT FALSE",  # 15: counted in a roll-up
        ),
    }
    # 14: a plan's body kept compressed
    added["plans"] += ("packed " + ("BYTEA" if engine.dialect.name == "postgresql" else "BLOB"),)
    with engine.begin() as conn:
        for table, columns in added.items():
            have = {c["name"] for c in inspect(conn).get_columns(table)}
            for column in columns:
                if column.split()[0] not in have:
                    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column}"))
        if version < 9 and "placeholders" in inspect(conn).get_table_names():
            # 9: a placeholder per job (it was one per workload and cluster, so a second
            # fan-out candidate on a cluster replaced the first): the table made again
            made = SQLModel.metadata.tables["placeholders"]
            rows = [dict(r._mapping) for r in conn.execute(made.select())]  # same columns
            made.drop(conn)
            made.create(conn)
            if rows:
                conn.execute(made.insert(), rows)
        if version < 3 and "usage" in inspect(conn).get_table_names():
            # version 2 accrued usage per job between observations: keep it as runs that
            # ended when last seen (the best it knew), then retire the table
            conn.execute(
                text(
                    "INSERT INTO runs (cluster, job, started_at, workload, project, state, ended_at, "
                    "gpus, gpu_type, last_seen) SELECT u.cluster, u.job, u.started_at, u.workload, "
                    "u.project, 'UNKNOWN', u.last_seen, u.gpus, u.gpu_type, u.last_seen FROM usage u "
                    "WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.cluster = u.cluster AND "
                    "r.job = u.job)"
                )
            )
            conn.execute(
                text(
                    "UPDATE runs SET project = substr(workload, 1, "
                    "instr(workload, '/') - 1) WHERE project = ''"
                )
                if engine.dialect.name == "sqlite"
                else text(
                    "UPDATE runs SET project = split_part(workload, '/', 1) WHERE project = ''"
                )
            )
            conn.execute(text("DROP TABLE usage"))


# ------------------------------------------------------------------ URLs and engines


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(
            f"--db {url!r} is not a database URL; use sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB"
        ) from None
    return parsed


def _display(url: URL) -> str:
    path = _sqlite_path(url)
    return str(path) if path is not None else url.render_as_string(hide_password=True)


def _sqlite_path(url: URL) -> Path | None:
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    database = url.database.removeprefix("file:") if url.query.get("uri") else url.database
    return Path(database)


def _check_sqlite_path(path: Path, name: str, *, create_dir: bool) -> None:
    if path.is_dir():
        raise StoreError(f"{name} is a directory, not a database file; point --db at a file")
    if not path.parent.is_dir():
        if not create_dir:
            raise StoreError(
                f"the directory of {name} does not exist; create it first "
                "(--db never creates directories)"
            )
        path.parent.mkdir(parents=True, exist_ok=True)


# One engine per database and process. An engine's dialect, and the statements the ORM
# compiles for it (cached per dialect, beyond the engine's life), stay as long as the
# process: a loop that opened a store per cycle (`cp watch`) grew by ~0.4 MB a cycle.
# A SQLite file replaced since (another inode) gets its own; in-memory ones are never shared.
_ENGINES: dict[tuple[str, int | None], Engine] = {}


def _shared_engine(url: URL, name: str, sqlite_path: Path | None) -> Engine:
    if url.get_backend_name() == "sqlite" and sqlite_path is None:
        return _engine(url, name)
    inode = sqlite_path.stat().st_ino if sqlite_path is not None and sqlite_path.exists() else None
    key = (url.render_as_string(hide_password=False), inode)
    if key not in _ENGINES:
        _ENGINES[key] = _engine(url, name)
    return _ENGINES[key]


def _engine(url: URL, name: str) -> Engine:
    options: dict[str, Any] = {}
    if url.get_backend_name() == "sqlite":
        options["connect_args"] = {"timeout": BUSY_SECONDS}
    try:
        engine = create_engine(url, **options)
    except (NoSuchModuleError, ModuleNotFoundError, ImportError) as exc:
        raise StoreError(
            f"no database driver for {url.drivername} ({exc}); the store supports sqlite and "
            "postgresql+psycopg (pip install 'controlplane[postgres]')"
        ) from None
    except (ArgumentError, SQLAlchemyError) as exc:
        raise StoreError(f"cannot use the store {name}: {_first_line(exc)}") from None
    if url.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own transaction handling begins lazily (deferred): take it over, so that
    # every transaction begins IMMEDIATE (see the module docstring)
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")  # as PostgreSQL enforces them
    cursor.close()


def _sqlite_begin(conn: Any) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


# ------------------------------------------------------------------ errors


def translate(exc: BaseException, name: str) -> StoreError:
    """One line for a database failure: which database, what went wrong, what to do."""
    words = _first_line(exc.orig if isinstance(exc, DBAPIError) and exc.orig else exc)
    lowered = words.lower()
    if "readonly" in lowered or "read-only" in lowered or "read only" in lowered:
        return StoreError(
            f"{name} is read-only ({words}); give this user write access, or use another --db"
        )
    if "not a database" in lowered or "malformed" in lowered or "file is encrypted" in lowered:
        return StoreError(
            f"{name} is not a usable database ({words}); move it aside and run "
            "`cp store init`, or restore a backup"
        )
    if "unable to open database file" in lowered:
        return StoreError(f"cannot open {name} ({words}); check the path and its permissions")
    if any(
        w in lowered
        for w in (
            "connection refused",
            "could not connect",
            "timeout expired",
            "connection timed out",
            "name or service not known",
            "no route to host",
            "connection to server",
        )
    ):
        return StoreError(
            f"cannot reach the store at {name} ({words}); is the server up and the URL right?"
        )
    if "database is locked" in lowered:
        return StoreError(
            f"{name} stayed locked by another process for {BUSY_SECONDS} s; try again"
        )
    return StoreError(f"the store {name} failed: {words}")


def _first_line(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()
    return message[0] if message else type(exc).__name__
