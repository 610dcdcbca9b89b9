"""The observations plans were made against, kept in the store (SQLite, real): read back by
their digest, sealed by it, dropped after OBSERVATION_DAYS, and added to an older store."""

from __future__ import annotations

import sqlite3
import zlib
from datetime import timedelta
from pathlib import Path

from controlplane.store import Store
from controlplane.store.observations import OBSERVATION_DAYS
from specs.observation import Observation, observation_of
from specs.snapshot import ClusterState, Job, Node, Replica, Snapshot
from tests.builders import NOW


def seen(job: str = "1") -> Observation:
    ours = Job(id=job, workload="chem/a", replicas=[Replica(node="n-1", gpus=4)])
    c = ClusterState(name="c", nodes=[Node(name="n-1", gpus=8)], jobs=[ours])
    return observation_of(Snapshot(now=NOW, clusters=[c]))


def test_an_observation_is_read_back_by_its_digest(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/db")
    store.at(NOW)
    store.keep_observation(seen())
    store.keep_observation(seen())  # once per digest
    assert store.observation(seen().digest) == seen()
    assert store.observation(seen("2").digest) is None


def test_an_edited_observation_counts_as_none(tmp_path: Path) -> None:
    """Not chained: the digest the (chained) plan records is its seal."""
    store = Store(f"sqlite:///{tmp_path}/db")
    store.keep_observation(seen())
    with sqlite3.connect(tmp_path / "db") as db:
        other = zlib.compress(seen("2").to_json().encode())  # another world, under this digest
        db.execute("UPDATE observations SET body = ?", (other,))
    assert store.observation(seen().digest) is None


def test_old_observations_are_dropped_as_new_ones_are_kept(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/db")
    store.at(NOW)
    store.keep_observation(seen())
    store.at(NOW + timedelta(days=OBSERVATION_DAYS, hours=1))
    store.keep_observation(seen("2"))
    assert store.observation(seen().digest) is None
    assert store.observation(seen("2").digest) == seen("2")


def test_a_store_from_before_gets_the_table(tmp_path: Path) -> None:
    Store(f"sqlite:///{tmp_path}/db").close()
    with sqlite3.connect(tmp_path / "db") as db:
        db.execute("DROP TABLE observations")
        db.execute("UPDATE meta SET value = '11' WHERE key = 'schema_version'")
    store = Store(f"sqlite:///{tmp_path}/db")
    store.keep_observation(seen())
    assert store.observation(seen().digest) == seen()
