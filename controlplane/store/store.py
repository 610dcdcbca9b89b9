"""The history store: plans, every action's outcome, and the scheduling memory.

SQLite under the spec repo's ``.cp/`` by default (embedded, zero set-up); any SQLAlchemy
URL by option (PostgreSQL for several reconcilers). It answers "who preempted my job,
when and why": every applied action is kept with its reason and result, in a chain that
shows tampering. Only this package talks to the database.

:class:`Store` is its parts together over one :class:`Database`:
:class:`~controlplane.store.history.History` (plans, actions, events, verification),
:class:`~controlplane.store.lease.Leases` (one applier at a time),
:class:`~controlplane.store.runs.Runs` (the runs of our jobs: usage, segment progress),
:class:`~controlplane.store.scheduling.SchedulingState` (queue times, placeholders,
completions, failure streaks), :class:`~controlplane.store.versions.Versions` (the
workload specs running jobs were made of),
:class:`~controlplane.store.observations.Observations` (what plans were made against) and
:class:`~controlplane.store.retention.Retention` (the oldest history, removed on purpose).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine

from controlplane.store.actionlog import ActionLog
from controlplane.store.database import Database
from controlplane.store.history import History
from controlplane.store.lease import Leases
from controlplane.store.observations import Observations
from controlplane.store.retention import Retention
from controlplane.store.runs import Runs
from controlplane.store.scheduling import SchedulingState
from controlplane.store.tables import utcnow
from controlplane.store.versions import Versions


class Store(ActionLog, History, Leases, Observations, Retention, Runs, SchedulingState, Versions):
    def __init__(self, url: str, *, init: bool = False, create_dir: bool = False) -> None:
        """Open the store at ``url``. ``init``: create the tables even in a database that
        exists without them (``cp store init``); ``create_dir``: the folder of a SQLite
        file may be created (only the default store under the spec repo's ``.cp/``)."""
        self.db = Database(url, init=init, create_dir=create_dir)
        self.clock: Callable[[], datetime] = utcnow  # history's times; see ``at``
        self.missing: Path | None = None  # see ``absent``

    @classmethod
    def absent(cls, path: Path) -> Store:
        """An empty store in memory in place of the SQLite file ``path``, which is not there:
        what a command that only reads is given, so that it creates no database (a folder
        without specs is left as it was; a deleted store is not silently replaced by an
        empty one, which would then verify as intact). ``missing`` names the file."""
        store = cls("sqlite://", init=True)
        store.missing = path
        return store

    def close(self) -> None:
        """Close the database's pooled connections (the engine stays, one per database
        in the process): a process that opened a store per cycle (``cp watch``) kept a
        connection open for each."""
        self.db.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def at(self, now: datetime) -> None:
        """Record what happens from here on as if the clock read ``now`` (``--now``): each
        record a microsecond after the one before, and after the last the store recorded
        (an apply at the same ``--now`` as one before follows it), so the history keeps its
        order, shows ``now`` to the second, and a run at a given ``--now`` records the same
        times each time."""
        last = self.last_recorded()  # read now: the clock is read inside write transactions
        start = max(now, last + timedelta(microseconds=1)) if last is not None else now
        ticks = itertools.count()
        self.clock = lambda: start + timedelta(microseconds=next(ticks))

    @property
    def engine(self) -> Engine:
        return self.db.engine

    @property
    def name(self) -> str:
        """The database as a person knows it: a file path, or a URL without password."""
        return self.db.name
