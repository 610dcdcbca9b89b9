"""The base of a change on its own simulated hardware (``cp plan --base``).

A simulated cluster's nodes are its Cluster spec's pools, so a change to them is a change
to the hardware: a pull request that removes a node drains it, and the plan moves its work
off it. Both sides of a comparison are planned on one observation, made with the working
specs, and the base plan then saw the node draining too: the comparison read "no
changes". So a simulated cluster whose spec the change edits is observed again as the
base's specs have it (read-only), for the base plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from controlplane.observe import adapters_for
from specs.desired import DesiredState
from specs.snapshot import Snapshot


def base_world(
    observed: Snapshot,
    base: DesiredState,
    head: DesiredState,
    state_dir: Path,
    clock: Callable[[], datetime],
    *,
    db: str | None = None,
) -> Snapshot:
    """``observed`` with each simulated cluster the change edits as the ``base`` specs have
    it (``state_dir`` and ``db``: where its state is, as :func:`adapters_for` finds it)."""
    changed = {
        name: cluster
        for name, cluster in base.clusters.items()
        if cluster.spec.adapter == "simulator"
        and name in head.clusters
        and head.clusters[name].spec != cluster.spec
    }
    if not changed:
        return observed
    adapters = adapters_for(
        dataclasses.replace(base, clusters=changed), state_dir, clock, read_only=True, db=db
    )
    theirs = {name: adapter.observe() for name, adapter in adapters.items()}
    return observed.model_copy(
        update={"clusters": [theirs.get(c.name, c) for c in observed.clusters]}
    )
