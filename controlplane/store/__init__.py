"""The history store (sqlmodel): :mod:`~controlplane.store.tables` holds the rows,
:mod:`~controlplane.store.database` opens the database (schema, migrations, errors),
:mod:`~controlplane.store.chain` the tamper-evident history,
:mod:`~controlplane.store.pricebook` what a GPU-hour cost since when, and
:mod:`~controlplane.store.store` the :class:`Store` that reads and writes them."""

from controlplane.store.database import default_url, sqlite_file
from controlplane.store.store import Store
from controlplane.store.tables import ActionRow, PlaceholderRow, PlanRow

__all__ = ["ActionRow", "PlaceholderRow", "PlanRow", "Store", "default_url", "sqlite_file"]
