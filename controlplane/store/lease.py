"""The apply lease: one reconciler acts on the clusters at a time.

Several reconcilers may share one database (a CI job and a ``cp watch`` on PostgreSQL):
whoever holds the lease applies; the others wait or report who holds it. A lease expires
(a holder that crashed cannot block forever), and a holder on this host whose process is
gone is taken over at once (controlplane/apply.py decides that).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel, select

from controlplane.store.database import Database
from controlplane.store.tables import LeaseRow
from controlplane.store.tables import aware as _aware
from controlplane.store.tables import utcnow as _utcnow

_LEASES = SQLModel.metadata.tables["leases"]
_ATTEMPTS = 3  # a lease released while another process looks is simply taken again


class Leases:
    """The lease table (a part of :class:`~controlplane.store.Store`)."""

    db: Database

    def acquire_lease(
        self,
        holder: str,
        *,
        ttl: float = 300.0,
        name: str = "apply",
        now: datetime | None = None,
        takeover: str | None = None,
    ) -> str | None:
        """Take (or renew) the lease; return None on success, else who holds it until when.

        ``takeover`` names a holder known to be dead (its process is gone): its lease is
        taken even before it expires. One conditional UPDATE (or a guarded INSERT)
        decides, so two reconcilers racing for an expired lease cannot both win, on
        SQLite and PostgreSQL alike."""
        now = now or _utcnow()
        expires = now + timedelta(seconds=ttl)
        table = _LEASES
        free = (table.c.holder == holder) | (table.c.expires_at < now)
        if takeover is not None:
            free = free | (table.c.holder == takeover)
        for _ in range(_ATTEMPTS):
            with self.db.errors(), self.db.engine.begin() as conn:
                taken = conn.execute(
                    update(table)
                    .where(table.c.name == name)
                    .where(free)
                    .values(holder=holder, expires_at=expires)
                ).rowcount
                if taken:
                    return None
                try:
                    with conn.begin_nested():
                        conn.execute(
                            insert(table).values(name=name, holder=holder, expires_at=expires)
                        )
                    return None
                except IntegrityError:
                    row = conn.execute(
                        select(table.c.holder, table.c.expires_at).where(table.c.name == name)
                    ).one_or_none()
                    if row is not None:
                        return f"{row.holder} until {_aware(row.expires_at).isoformat()}"
            # released between our insert and our look (PostgreSQL, read committed): again
        return "another reconciler (the lease changed hands while we looked; try again)"

    def lease_holder(self, name: str = "apply") -> str | None:
        """Who holds the lease (expired or not), or None."""
        with self.db.session() as db:
            row = db.get(LeaseRow, name)
            return row.holder if row else None

    def lease_held(self, holder: str, name: str = "apply", now: datetime | None = None) -> bool:
        """Whether ``holder`` holds the lease now (its row, not expired)."""
        with self.db.session() as db:
            row = db.get(LeaseRow, name)
            return (
                row is not None
                and row.holder == holder
                and _aware(row.expires_at) > (now or _utcnow())
            )

    def release_lease(self, holder: str, name: str = "apply") -> None:
        table = _LEASES
        with self.db.errors(), self.db.engine.begin() as conn:
            conn.execute(delete(table).where(table.c.name == name, table.c.holder == holder))
