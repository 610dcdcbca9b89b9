"""Cluster adapters behind one protocol (see :mod:`adapters.base`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

from adapters.base import Adapter, PermanentError
from specs.models import Cluster


def make_adapter(
    cluster: Cluster,
    *,
    state_dir: Path,
    clock: Callable[[], datetime],
    read_only: bool = False,
    namespaces: Mapping[str, str] | None = None,
    simulated: Path | None = None,
) -> Adapter:
    """The adapter a Cluster spec asks for. ``state_dir`` is the spec repo's ``.cp/``;
    ``read_only``: observe without changing anything (``cp plan`` is a what-if);
    ``namespaces``: the projects that name their own Kubernetes namespace; ``simulated``:
    where the simulator keeps its clusters, when not in ``state_dir`` (beside a store
    kept elsewhere; what it kept in ``state_dir`` is read until it has a state there)."""
    kind = cluster.spec.adapter
    if kind == "simulator":
        from adapters.simulator import SimulatorAdapter

        moved = simulated is not None and simulated != state_dir
        return SimulatorAdapter(
            cluster,
            state_dir=simulated if simulated is not None else state_dir,
            clock=clock,
            read_only=read_only,
            earlier=state_dir if moved else None,
        )
    if kind == "slurm":
        from adapters.slurm import SlurmAdapter
        from adapters.slurm.accounted import AccountedSlurmAdapter

        settings = cluster.spec.slurm
        kind_of = AccountedSlurmAdapter if settings and settings.accounting else SlurmAdapter
        # absolute: its jobs start there (--chdir), wherever cp itself runs
        return kind_of(cluster, work_dir=(state_dir / "slurm" / cluster.metadata.name).absolute())
    if kind == "kubernetes":
        from adapters.kubernetes import KubernetesAdapter

        return KubernetesAdapter(cluster, namespaces=namespaces)
    raise PermanentError(
        f"cluster {cluster.metadata.name}: the {kind} adapter is not available yet"
    )
