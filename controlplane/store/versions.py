"""The versions of workload specs the clusters run: a job carries only its spec's digest,
the store keeps what that digest stood for, so a plan can say which fields an edit
changed (``gpus 2 -> 4``) and whether the job must be replaced for it.

Written by observations that record (apply, watch, observe), before any job of a version
is submitted; read by every observation for the versions of running jobs that differ
from the specs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlmodel import col, select

from controlplane.store.database import Database
from controlplane.store.tables import VersionRow, aware
from specs.models import WorkloadSpec


class Versions:
    """The versions table (a part of :class:`~controlplane.store.Store`)."""

    db: Database

    def record_versions(self, specs: Mapping[str, WorkloadSpec], now: datetime) -> None:
        """Keep the version of each workload (``project/name`` -> spec) not yet known."""
        by_digest = {spec.digest: (key, spec) for key, spec in specs.items()}
        with self.db.session() as db:
            known = set(
                db.exec(select(VersionRow.digest).where(col(VersionRow.digest).in_(by_digest)))
            )
            for digest, (key, spec) in sorted(by_digest.items()):
                if digest not in known:
                    body = spec.model_dump_json(by_alias=True, exclude_defaults=True)
                    db.add(VersionRow(digest=digest, workload=key, body=body, first_seen=now))
            db.commit()

    def first_seen(self, digests: Iterable[str]) -> dict[str, datetime]:
        """When the store first saw each of ``digests`` it knows."""
        wanted = sorted(set(digests))
        if not wanted:
            return {}
        with self.db.session() as db:
            rows = db.exec(
                select(VersionRow.digest, VersionRow.first_seen).where(
                    col(VersionRow.digest).in_(wanted)
                )
            )
            return {digest: aware(seen) for digest, seen in rows}

    def versions(self, digests: Iterable[str]) -> dict[str, WorkloadSpec]:
        """The specs behind ``digests`` that the store knows."""
        wanted = sorted(set(digests))
        if not wanted:
            return {}
        with self.db.session() as db:
            rows = db.exec(select(VersionRow).where(col(VersionRow.digest).in_(wanted)))
            return {r.digest: WorkloadSpec.model_validate_json(r.body) for r in rows}
