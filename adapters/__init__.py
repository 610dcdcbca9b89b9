"""Cluster adapters behind one protocol (see :mod:`adapters.base`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from adapters.base import Adapter, PermanentError
from specs.models import Cluster


def make_adapter(cluster: Cluster, *, state_dir: Path, clock: Callable[[], datetime]) -> Adapter:
    """The adapter a Cluster spec asks for. ``state_dir`` is the spec repo's ``.cp/``."""
    kind = cluster.spec.adapter
    if kind == "simulator":
        from adapters.simulator import SimulatorAdapter

        return SimulatorAdapter(cluster, state_dir=state_dir, clock=clock)
    if kind == "slurm":
        from adapters.slurm import SlurmAdapter

        return SlurmAdapter(cluster, work_dir=state_dir / "slurm" / cluster.metadata.name)
    raise PermanentError(f"cluster {cluster.metadata.name}: the {kind} adapter is not available yet")
