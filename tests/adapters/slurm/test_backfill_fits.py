"""Whether a backfill candidate could start now (``--time-min``), judged from what the
cluster shows: a node all of whose CPUs are taken starts nothing, whatever GPUs it has
free (user trial: such a node counted as room, so a candidate was forecast to start now
that Slurm would leave waiting)."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.slurm.forecast import backfill_fits
from specs.snapshot import ClusterState, Node

NOW = datetime(2026, 11, 22, 10, tzinfo=UTC)


def _fits(*nodes: Node) -> bool:
    state = ClusterState(name="c", nodes=list(nodes))
    return backfill_fits(
        state, {}, NOW, partition="gpu", gpu_type="a100", nodes=1, gpus_per_node=4, time_min=900
    )


def _node(name: str, **extra: object) -> Node:
    return Node.model_validate(
        {"name": name, "gpus": 8, "gpu_type": "a100", "partition": "gpu", **extra}
    )


def test_an_idle_node_can_start_it() -> None:
    assert _fits(_node("n1"))


def test_a_node_with_every_cpu_taken_cannot() -> None:
    assert not _fits(_node("n1", full=True))
    assert _fits(_node("n1", full=True), _node("n2"))
