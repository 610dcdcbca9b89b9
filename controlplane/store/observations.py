"""The observations plans were made against, kept so that an apply finding the clusters
changed since can tell whether the change matters to the plan (controlplane/staleness.py)
rather than refuse it for any change at all.

Kept for the plans that are applied later, if at all: those ``cp plan`` stores (a plan
file, a pull request's review); an apply that plans for itself acts at once. One row per
digest, whatever the number of plans made against it; rows older than
``OBSERVATION_DAYS`` are dropped as new ones are kept (a plan made before then is refused
on any change, as a plan whose observation was never kept is).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlmodel import col, delete

from controlplane.store.database import Database
from controlplane.store.tables import ObservationRow, aware
from specs.observation import Observation

OBSERVATION_DAYS = 30


class Observations:
    """The observations table (a part of :class:`~controlplane.store.Store`)."""

    db: Database
    clock: Callable[[], datetime]

    def keep_observation(self, seen: Observation) -> None:
        """Keep ``seen`` (a plan was made against it), once per digest, for 30 days from
        the last plan made against it."""
        now = self.clock()
        digest = seen.digest
        with self.db.session() as db:
            horizon = now - timedelta(days=OBSERVATION_DAYS)
            db.exec(delete(ObservationRow).where(col(ObservationRow.kept_at) < horizon))
            row = db.get(ObservationRow, digest)
            if row is None:
                body = zlib.compress(seen.to_json().encode())
                db.add(ObservationRow(digest=digest, body=body, kept_at=now))
            elif aware(row.kept_at) < now:  # seen again: kept from now, for the new plan
                row.kept_at = now
                db.add(row)
            try:
                db.commit()
            except IntegrityError:  # caught here: the session would make it a StoreError
                db.rollback()  # another plan kept it at the same moment (PostgreSQL)

    def observation(self, digest: str) -> Observation | None:
        """The observation of ``digest``, if the store kept it and it still hashes to it
        (a record edited or damaged is as good as none)."""
        with self.db.session() as db:
            row = db.get(ObservationRow, digest)
            body = row.body if row is not None else None
        if body is None:
            return None
        try:
            seen = Observation.from_json(zlib.decompress(body).decode())
        except (zlib.error, UnicodeDecodeError, ValueError):
            return None
        return seen if seen.digest == digest else None
