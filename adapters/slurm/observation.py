"""Parsed Slurm rows turned into the snapshot's Node and Job objects.

This is where Slurm's view meets the specs: a node belongs to the spec node pool whose
partition it is in (and, when two pools share a partition, whose GPU type it has), and a
job belongs to a workload only if its comment carries our tag. Pure functions, so the
mapping is tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from adapters.slurm.eviction import observed_state
from adapters.slurm.parse import (
    Allocation,
    NodeRow,
    QueueRow,
    job_state,
    node_state,
    parse_gpu_gres,
)
from adapters.slurm.reservations import ReservationRow, node_windows
from adapters.slurm.tags import parse_tag
from specs.models import NodePool
from specs.snapshot import ClusterState, Job, JobState, Node, PoolState, Replica, Reservation


def match_pool(
    pools: Sequence[NodePool], partitions: Iterable[str], gpu_type: str | None
) -> NodePool | None:
    """The spec pool for a node (or job) in ``partitions`` with ``gpu_type``.

    A pool without a partition matches on GPU type alone. Among several candidates the
    one with the same GPU type wins, then spec order, so the answer is deterministic.
    """
    parts = set(partitions)
    candidates = [p for p in pools if p.partition in parts]
    if not candidates:
        candidates = [p for p in pools if p.partition is None and gpu_type is not None]
    same_type = [p for p in candidates if gpu_type is not None and p.gpu_type == gpu_type]
    if same_type:
        return same_type[0]
    if candidates and (gpu_type is None or all(p.partition is not None for p in candidates)):
        return candidates[0]
    return None


def build_node(
    row: NodeRow,
    pools: Sequence[NodePool],
    windows: Mapping[str, list[Reservation]] | None = None,
) -> Node:
    """The snapshot's node for a sinfo row; ``windows``: every node's reservations."""
    gpu_type, gpus = parse_gpu_gres(row.gres)
    pool = match_pool(pools, row.partitions, gpu_type)
    if pool is not None and gpu_type is None and gpus:
        gpu_type = pool.gpu_type  # untyped GRES ("gpu:8"): the spec says what they are
    partition: str | None = row.partitions[0] if row.partitions else None
    if pool is not None and pool.partition in row.partitions:
        partition = pool.partition
    state = node_state(row.state)
    # the partitions our jobs would go to: the pool's, else any of the node's
    targets = [partition] if pool is not None and pool.partition else row.partitions
    if state != "down" and targets and all(p in row.closed for p in targets):
        state = "drain"  # the node is fine, but no job sent there would start
    return Node(
        name=row.name,
        pool=pool.name if pool else None,
        gpu_type=gpu_type,
        gpus=gpus,
        state=state,
        partition=partition,
        # ALLOCATED: every CPU is taken, so no job starts here whatever GPUs are free
        # (mixed: some CPUs are free)
        full=state == "allocated",
        reservations=(windows or {}).get(row.name, []),
    )


def cluster_state(
    name: str,
    rows: Sequence[NodeRow],
    reserved: Iterable[ReservationRow],
    jobs: list[Job],
    pools: Sequence[NodePool],
) -> ClusterState:
    """The cluster as observed: its nodes (with their reservations), jobs, pool limits and
    partitions (a pool naming one it lacks, a typo, is then known as such)."""
    windows = node_windows(reserved)
    return ClusterState(
        name=name,
        nodes=[build_node(row, pools, windows) for row in rows],
        jobs=jobs,
        pools=pool_states(rows, pools),
        partitions=sorted({p for row in rows for p in row.partitions}),
    )


def pool_states(rows: Iterable[NodeRow], pools: Sequence[NodePool]) -> list[PoolState]:
    """The time limit (MaxTime) of each pool's partition, for pools whose partition has
    one: Slurm keeps a job that asks for more pending (PartitionTimeLimit) for ever."""
    limits: dict[str, int] = {}
    for row in rows:
        limits |= row.limits
    return [
        PoolState(name=p.name, max_walltime=limits[p.partition])
        for p in pools
        if p.partition is not None and p.partition in limits
    ]


def _replicas(row: QueueRow, alloc: Allocation | None, held: bool) -> list[Replica]:
    _, per_node = parse_gpu_gres(row.gres_per_node)
    if held and row.nodes:
        if alloc is not None and alloc.per_node:
            # the exact allocation: right even for --gpus / --gpus-per-task jobs
            return [Replica(node=n, gpus=alloc.per_node.get(n, 0)) for n in row.nodes]
        if not per_node and alloc is not None and alloc.per_job:
            per_node = -(-alloc.per_job // len(row.nodes))
        return [Replica(node=n, gpus=per_node) for n in row.nodes]
    count = max(row.num_nodes, 1)
    if not per_node and alloc is not None and alloc.per_job:
        per_node = -(-alloc.per_job // count)
    if len(row.requested) == count:  # waiting for the nodes a plan pinned it to
        return [Replica(node=n, gpus=per_node) for n in row.requested]
    return [Replica(node=None, gpus=per_node) for _ in range(count)]


def build_job(row: QueueRow, alloc: Allocation | None, pools: Sequence[NodePool]) -> Job:
    tag = parse_tag(row.comment)
    state = observed_state(job_state(row.state, has_nodes=bool(row.nodes)), tag)
    # A job that ended while pending still lists a StartTime (when it was cancelled) but
    # no nodes: only a job that got nodes has really started.
    started = row.nodes and state not in (JobState.PENDING, JobState.REQUEUED)
    gpu_type, _ = parse_gpu_gres(row.gres_per_node)
    if gpu_type is None and alloc is not None:
        gpu_type = alloc.gpu_type
    partitions = row.partition.split(",") if row.partition else []
    pool = match_pool(pools, partitions, gpu_type)
    replicas = _replicas(row, alloc, held=bool(started))
    if gpu_type is None and pool is not None and any(r.gpus for r in replicas):
        gpu_type = pool.gpu_type  # untyped request in a single-type pool
    return Job(
        id=row.job_id,
        workload=tag.workload if tag else None,
        plan_id=tag.plan_id if tag else None,
        state=state,
        submitted_at=row.submitted,
        started_at=row.started if started else None,
        replicas=replicas,
        pool=pool.name if pool else None,
        partition=row.partition,
        gpu_type=gpu_type,
        walltime=row.time_limit,
        reason=row.reason if state in (JobState.PENDING, JobState.REQUEUED) else None,
        candidate=tag.candidate if tag else None,
        spec_digest=tag.spec_digest if tag else None,
    )
