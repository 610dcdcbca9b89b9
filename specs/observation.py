"""What a plan depends on in an observation of the clusters, and its digest.

A plan records the digest of the observation it was made against (``observedDigest``),
and ``cp apply`` compares it with the clusters' digest at apply time. The observation
itself (:class:`Observation`, a few facts per node and per job of ours) can be kept
beside a plan, so that an apply finding another digest can tell the changes the plan's
actions depend on from those they do not (controlplane/staleness.py): a job of ours that
ended only frees GPUs. An observation read back is the plan's only if it hashes to the
plan's digest: the digest is its own seal.

Counted: every node's name, GPUs, pool and whether it takes work, every job of ours (id,
workload, whether it holds GPUs, where), the limits a cluster sets on its pools, the
reservations on its nodes (counted only where there are some, so a snapshot without any
keeps the digest it had), and whether a cluster could be reached at all (a plan made while
one was down is stale once it answers). Not counted: ``now``, nodes going
idle/mixed/allocated, and foreign jobs — on a busy shared cluster those change every
minute, and a plan must survive the time between review and merge. A foreign job that
takes planned GPUs makes the submitted job wait in the cluster's queue, and the next
reconcile sees it. Nor a cluster gone from the specs: it holds only completed jobs, which
no digest counts.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from specs.snapshot import ClusterState, Snapshot

Window = tuple[str, float, float]  # a reservation: name, start, end (POSIX seconds; 0: none)


@dataclass(frozen=True)
class JobSeen:
    """A job of ours, active when observed."""

    id: str
    workload: str
    holds_gpus: bool
    # (node, GPUs), sorted; node "" where the cluster places; empty while it holds none
    replicas: tuple[tuple[str, int], ...] = ()

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(node for node, _ in self.replicas if node)


@dataclass(frozen=True)
class NodeSeen:
    name: str
    gpus: int
    schedulable: bool
    pool: str | None = None
    windows: tuple[Window, ...] = ()  # sorted


@dataclass(frozen=True)
class ClusterSeen:
    """One cluster: its nodes and active jobs of ours by name (none when not reachable)."""

    name: str
    reachable: bool = True
    nodes: dict[str, NodeSeen] = field(default_factory=dict)
    jobs: dict[str, JobSeen] = field(default_factory=dict)
    pools: tuple[tuple[str, int], ...] = ()  # (pool, max walltime in seconds, 0: none), sorted


@dataclass(frozen=True)
class Observation:
    """The facts of an observation that a plan depends on, by cluster name."""

    clusters: dict[str, ClusterSeen]

    def to_json(self) -> str:
        """The canonical form, the one the digest is of."""
        return json.dumps([_entry(c) for _, c in sorted(self.clusters.items())], sort_keys=True)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str) -> Observation:
        """Read back :meth:`to_json`; a ValueError if ``text`` is not one."""
        try:
            clusters = [_cluster(entry) for entry in json.loads(text)]
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            raise ValueError(f"not an observation ({type(exc).__name__}: {exc})") from None
        return cls({c.name: c for c in clusters})


def observation_of(snapshot: Snapshot) -> Observation:
    """The facts of ``snapshot`` a plan depends on (clusters gone from the specs left out)."""
    return Observation({c.name: _seen(c) for c in snapshot.clusters if not c.gone})


def observed_digest(snapshot: Snapshot) -> str:
    """Hash of what a plan depends on; a plan made against one digest is stale once the
    clusters report another, unless what changed is nothing its actions depend on."""
    return observation_of(snapshot).digest


def _seen(c: ClusterState) -> ClusterSeen:
    if not c.reachable:
        return ClusterSeen(c.name, reachable=False)
    nodes = {
        n.name: NodeSeen(
            n.name,
            n.gpus,
            n.schedulable,
            n.pool,
            tuple(
                sorted(
                    (w.name, w.start.timestamp(), w.end.timestamp() if w.end else 0)
                    for w in n.reservations
                )
            ),
        )
        for n in c.nodes
    }
    jobs = {
        j.id: JobSeen(
            j.id,
            j.workload,
            j.state.holds_gpus,
            tuple(sorted((r.node or "", r.gpus) for r in j.replicas)) if j.state.holds_gpus else (),
        )
        for j in c.jobs
        if j.workload is not None and j.state.active
    }
    pools = tuple(sorted((p.name, p.max_walltime or 0) for p in c.pools))
    return ClusterSeen(c.name, nodes=nodes, jobs=jobs, pools=pools)


# the canonical form: [name, nodes, jobs, (pools), (["reservations", windows])] per
# cluster, or [name, "unreachable"]; the digests of plans made so far are of it


def _entry(c: ClusterSeen) -> list[object]:
    if not c.reachable:
        return [c.name, "unreachable"]
    nodes = sorted([n.name, n.gpus, n.schedulable, n.pool] for n in c.nodes.values())
    jobs = sorted(
        [j.id, j.workload, j.holds_gpus, [list(r) for r in j.replicas]] for j in c.jobs.values()
    )
    entry: list[object] = [c.name, nodes, jobs]
    if c.pools:  # a limit that changed may turn a planned submission away
        entry.append([list(p) for p in c.pools])
    windows = sorted([n.name, *w] for n in c.nodes.values() for w in n.windows)
    if windows:  # an announced maintenance: a planned node may not start the job
        entry.append(["reservations", windows])
    return entry


def _cluster(entry: list[Any]) -> ClusterSeen:
    name = str(entry[0])
    if entry[1] == "unreachable":
        return ClusterSeen(name, reachable=False)
    pools: tuple[tuple[str, int], ...] = ()
    windows: dict[str, list[Window]] = {}
    for extra in entry[3:]:
        if extra and extra[0] == "reservations":
            for node, w_name, start, end in extra[1]:
                windows.setdefault(node, []).append((w_name, start, end))
        else:
            pools = tuple((str(p), int(limit)) for p, limit in extra)
    nodes = {
        n: NodeSeen(n, int(gpus), bool(schedulable), pool, tuple(windows.get(n, [])))
        for n, gpus, schedulable, pool in entry[1]
    }
    jobs = {
        j: JobSeen(j, str(w), bool(holds), tuple((str(node), int(g)) for node, g in replicas))
        for j, w, holds, replicas in entry[2]
    }
    return ClusterSeen(name, nodes=nodes, jobs=jobs, pools=pools)
