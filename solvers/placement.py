"""GPU bin-packing: which node a replica goes to.

KAI's rule: among the nodes where the replica fits, the one with the fewest free GPUs,
ties to the alphabetically first name. Nodes of each pool sit in buckets by free GPU
count, so finding the best node costs a few bucket probes instead of a scan of every node.
A gang is placed all-or-nothing inside one pool (one Slurm partition, one GPU type).
"""

from __future__ import annotations

from collections import defaultdict

from sortedcontainers import SortedList

from solvers.problem import NodeInfo, PoolKey


class FreeIndex:
    """Free GPUs per node, bucketed per pool; mutable scratch state of one solve.

    An over-committed node's free GPUs are negative (``NodeInfo.free``): no replica fits
    there, not even one of no GPUs, and the totals count only the GPUs that are free.
    """

    def __init__(
        self, nodes: dict[str, NodeInfo], distinct: frozenset[PoolKey] = frozenset()
    ) -> None:
        self.distinct = distinct  # pools where a gang takes one replica per node
        self.free: dict[str, int] = {}
        self.total = 0  # free GPUs over every node (none of an over-committed one)
        self.pool_of: dict[str, PoolKey] = {}
        self._buckets: dict[PoolKey, dict[int, SortedList]] = defaultdict(dict)
        self._room: dict[PoolKey, tuple[int, int]] = {}  # pool_free, until the pool changes
        for key, n in nodes.items():
            if n.pool is None or not n.schedulable:
                continue
            self.free[key] = n.free
            self.total += max(0, n.free)
            self.pool_of[key] = n.pool
            self._bucket(n.pool, n.free).add(key)

    def _bucket(self, pool: PoolKey, free: int) -> SortedList:
        buckets = self._buckets[pool]
        if free not in buckets:
            buckets[free] = SortedList()
        return buckets[free]

    def best_node(self, pool: PoolKey, gpus: int, avoid: set[str] | None = None) -> str | None:
        """The fitting node with the fewest free GPUs, then the first name (not in ``avoid``)."""
        for free in sorted(f for f, b in self._buckets.get(pool, {}).items() if f >= gpus and b):
            for node in self._buckets[pool][free]:
                if not avoid or node not in avoid:
                    return str(node)
        return None

    def take(self, node: str, gpus: int) -> None:
        self._move(node, -gpus)

    def give(self, node: str, gpus: int) -> None:
        self._move(node, gpus)

    def _move(self, node: str, delta: int) -> None:
        pool = self.pool_of[node]
        self._room.pop(pool, None)
        before = self.free[node]
        self._buckets[pool][before].remove(node)
        self.free[node] = before + delta
        self.total += max(0, before + delta) - max(0, before)
        self._bucket(pool, before + delta).add(node)

    def pool_free(self, pool: PoolKey) -> tuple[int, int]:
        """(total free GPUs, largest free block on one node) in a pool."""
        room = self._room.get(pool)
        if room is None:
            total = largest = 0
            for free, bucket in self._buckets.get(pool, {}).items():
                if bucket:
                    total += max(0, free) * len(bucket)
                    largest = max(largest, free)
            room = self._room[pool] = (total, largest)
        return room

    def place_gang(
        self, pools: list[PoolKey], gpus: int, count: int, holding: frozenset[str] = frozenset()
    ) -> list[str] | None:
        """Place ``count`` replicas of ``gpus`` each inside one pool, or nothing.

        Pools are tried in the order of the node the first replica would take (fewest
        free GPUs, then name), which is plain KAI bin-packing for a single replica.
        """
        firsts = []
        for pool in pools:
            node = self.best_node(pool, gpus)
            if node is not None:
                firsts.append((self.free[node], node, pool))
        for _, _, pool in sorted(firsts):
            placed: list[str] = []
            # distinct pools: no node twice, nor one the job already holds (``holding``)
            avoid: set[str] | None = set(holding) if pool in self.distinct else None
            for _ in range(count):
                node = self.best_node(pool, gpus, avoid)
                if avoid is not None and node is not None:
                    avoid.add(node)
                if node is None:
                    break
                self.take(node, gpus)
                placed.append(node)
            if len(placed) == count:
                return placed
            for node in placed:
                self.give(node, gpus)
        return None
