"""GPU bin-packing: which node a replica goes to.

KAI's rule: among the nodes where the replica fits, the one with the fewest free GPUs,
ties to the alphabetically first name. Nodes of each pool sit in buckets by free GPU
count, so finding the best node costs a few bucket probes instead of a scan of every node.
A gang is placed all-or-nothing inside one pool (one Slurm partition, one GPU type).

Waiting jobs the cluster places itself (fan-out candidates) hold the GPUs its next pass
starts them on, but the cluster does not know what is held: its pass fits them, in its
order, by the same rule on the nodes as it finds them, and work placed beside a held job
can make another node the tighter fit for one before it. Once they are held
(:meth:`FreeIndex.hold_for_cluster`), no placement may cost one of them its start in that
pass (:meth:`FreeIndex.leaves_room`), whether the plan's work lands before it or after.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping

from sortedcontainers import SortedList

from solvers.problem import NodeInfo, PoolKey

Picks = list[str | None]  # a held job's node per ask in the cluster's pass; None: fits nowhere


class FreeIndex:
    """Free GPUs per node, bucketed per pool; mutable scratch state of one solve.

    An over-committed node's free GPUs are negative (``NodeInfo.free``): no replica fits
    there, not even one of no GPUs, and the totals count only the GPUs that are free.
    """

    def __init__(
        self,
        nodes: dict[str, NodeInfo],
        distinct: frozenset[PoolKey] = frozenset(),
        limits: Mapping[PoolKey, int | None] | None = None,
    ) -> None:
        self.distinct = distinct  # pools where a gang takes one replica per node
        # nodes with a reservation ahead (a maintenance), where only work that ends before
        # it begins may go; and each pool's time limit, a job's own where it sets none
        self.windows = {k: n for k, n in nodes.items() if n.closes_in is not None}
        self.limits = limits or {}
        self.free: dict[str, int] = {}
        self.total = 0  # free GPUs over every node (none of an over-committed one)
        self.pool_of: dict[str, PoolKey] = {}
        self._buckets: dict[PoolKey, dict[int, SortedList]] = defaultdict(dict)
        self._room: dict[PoolKey, tuple[int, int]] = {}  # pool_free, until the pool changes
        # jobs the cluster places, held where its next pass starts them: per pool, in its
        # order, (node keys, GPUs per node); GPUs held per node; the smallest ask per pool;
        # the nodes the pass gives them as the nodes are now (until a pick changes)
        self._waiting: dict[PoolKey, list[tuple[list[str], list[int]]]] = {}
        self._held: Counter[str] = Counter()
        self._least: dict[PoolKey, int] = {}
        self._trace: dict[PoolKey, list[Picks]] = {}
        self._rooms: dict[PoolKey, list[list[int]]] = {}  # the pick's free GPUs at each ask
        # per pool: for each size of a held ask, the last place in the pass of an ask that
        # large; and per size how many held nodes have the room only with their held GPUs
        # (until one of them changes)
        self._last: dict[PoolKey, dict[int, int]] = {}
        self._held_roomy: dict[PoolKey, dict[int, int]] = {}
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

    def best_node(
        self, pool: PoolKey, gpus: int, avoid: set[str] | None = None, *, lasts: int | None
    ) -> str | None:
        """The fitting node with the fewest free GPUs, then the first name (not in ``avoid``),
        that leaves the cluster's next pass the room it needs (:meth:`leaves_room`), and
        whose next reservation a job of time limit ``lasts`` (seconds; None: none, so the
        pool's) would not run into."""
        held = pool in self._least  # candidates wait in the pool: keep them their start
        for free in sorted(f for f, b in self._buckets.get(pool, {}).items() if f >= gpus and b):
            for node in self._buckets[pool][free]:
                if (
                    (not avoid or node not in avoid)
                    and (not self.windows or not self.runs_into(node, lasts))
                    and (not held or self.leaves_room({node: gpus}))
                ):
                    return str(node)
        return None

    def runs_into(self, node: str, lasts: int | None) -> bool:
        """Whether a job of time limit ``lasts`` started on ``node`` now would run into
        the node's next reservation (a job without one has its pool's)."""
        info = self.windows.get(node)
        if info is None:
            return False
        return info.runs_into(lasts if lasts is not None else self.limits.get(self.pool_of[node]))

    def reserved(self, pools: list[PoolKey], gpus: int, lasts: int | None) -> list[NodeInfo]:
        """The nodes of ``pools`` with the free GPUs for a replica of ``gpus`` that a job of
        time limit ``lasts`` may not take for their next reservation, by name."""
        return sorted(
            (
                info
                for node, info in self.windows.items()
                if self.pool_of.get(node) in pools
                and self.free[node] >= gpus
                and self.runs_into(node, lasts)
            ),
            key=lambda n: n.name,
        )

    def take(self, node: str, gpus: int) -> None:
        self._move(node, -gpus)

    def give(self, node: str, gpus: int) -> None:
        self._move(node, gpus)

    def _move(self, node: str, delta: int) -> None:
        pool = self.pool_of[node]
        self._room.pop(pool, None)
        if pool in self._waiting:  # candidates wait in the pool: what they are told changes
            if pool in self._trace and (delta > 0 or self._alters(pool, node, -delta)):
                del self._trace[pool]  # the pass picks other nodes now: worked out when asked
            if self._held.get(node):
                self._held_roomy.pop(pool, None)
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
        self,
        pools: list[PoolKey],
        gpus: int,
        count: int,
        holding: frozenset[str] = frozenset(),
        *,
        lasts: int | None,
    ) -> list[str] | None:
        """Place ``count`` replicas of ``gpus`` each inside one pool, or nothing; a job of
        time limit ``lasts`` (seconds; None: none) on no node whose next reservation it
        would run into.

        Pools are tried in the order of the node the first replica would take (fewest
        free GPUs, then name), which is plain KAI bin-packing for a single replica.
        """
        firsts = []
        for pool in pools:
            node = self.best_node(pool, gpus, lasts=lasts)
            if node is not None:
                firsts.append((self.free[node], node, pool))
        for _, _, pool in sorted(firsts):
            placed: list[str] = []
            # distinct pools: no node twice, nor one the job already holds (``holding``)
            avoid: set[str] | None = set(holding) if pool in self.distinct else None
            for _ in range(count):
                node = self.best_node(pool, gpus, avoid, lasts=lasts)
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

    # ------------------------------------------------------------------ the cluster's pass

    def hold_for_cluster(self, waiting: list[tuple[list[str], list[int]]]) -> None:
        """Waiting jobs the cluster places itself and starts at its next pass, in the order
        it starts them, each as (node keys, GPUs per node) where their GPUs are taken now.
        From now on :meth:`leaves_room` keeps each of them its start."""
        self._trace.clear()
        self._held_roomy.clear()
        for nodes, asks in waiting:
            pool = self.pool_of[nodes[0]]
            self._waiting.setdefault(pool, []).append((nodes, asks))
            self._least[pool] = min(self._least.get(pool, asks[0]), *asks)
            last = self._last.setdefault(pool, {})
            placed = sum(len(a) for _, a in self._waiting[pool]) - len(asks)
            for k, gpus in enumerate(asks, start=1):
                last[gpus] = placed + k
            for node, gpus in zip(nodes, asks, strict=True):
                self._held[node] += gpus

    def leaves_room(self, change: Mapping[str, int]) -> bool:
        """Whether taking ``change`` (GPUs per node key; negative: given back) leaves the
        cluster's next pass starting every held job it starts as the nodes are now. A node
        with fewer GPUs than any of them asks for, held ones included, changes nothing."""
        if not self._least:  # nothing held: nothing to keep
            return True
        pools: dict[PoolKey, dict[str, int]] = defaultdict(dict)
        for node, gpus in change.items():
            pool = self.pool_of.get(node)  # none: a node nothing is placed on
            if pool in self._least and self._base(node) + max(0, -gpus) >= self._least[pool]:
                pools[pool][node] = gpus
        for pool, taken in pools.items():
            if self._roomy(pool, taken):
                continue  # every held job starts, wherever the pass puts it
            now = self._passed(pool)
            (node, gpus), *more = taken.items()
            if not more and gpus > 0 and not self._alters(pool, node, gpus):
                continue  # the pass gives every job the nodes it gives it now
            after = self._pass(pool, taken)
            if any(_starts(was) and not _starts(new) for was, new in zip(now, after, strict=True)):
                return False
        return True

    def _roomy(self, pool: PoolKey, taken: Mapping[str, int]) -> bool:
        """Whether, ``taken`` taken, the pass surely starts every held job of the pool: the
        i-th ask of the pass finds a node that fits if more nodes have the room for it than
        asks come before it, since each ask takes room on one node only. A few bucket probes
        per size asked for, where the pass is a replay."""
        held = self._held_roomy.get(pool)
        if held is None:  # free only with what is held there: they have the room too
            nodes = {n for ns, _ in self._waiting[pool] for n in ns}
            held = self._held_roomy[pool] = {
                size: sum(self.free[n] < size <= self._base(n) for n in nodes)
                for size in self._last[pool]
            }
        buckets = self._buckets[pool]
        for size, last in self._last[pool].items():
            room = held[size] + sum(len(b) for f, b in buckets.items() if f >= size)
            for node, gpus in taken.items():
                before = self._base(node)
                room += (before - gpus >= size) - (before >= size)
            if room < last:
                return False
        return True

    def _base(self, node: str) -> int:
        """The node's free GPUs as the cluster sees them: those held for its pass are free."""
        return self.free[node] + self._held.get(node, 0)

    def _passed(self, pool: PoolKey) -> list[Picks]:
        if pool not in self._trace:
            rooms: list[list[int]] = []
            self._trace[pool] = self._pass(pool, {}, rooms)
            self._rooms[pool] = rooms
        return self._trace[pool]

    def _pass(
        self, pool: PoolKey, taken: Mapping[str, int], rooms: list[list[int]] | None = None
    ) -> list[Picks]:
        """The nodes the cluster's pass gives each held job, ``taken`` taken first: each
        job in turn, one node per ask, the tightest that fits; it starts if all fit.
        ``rooms``, if given, gets the free GPUs of each pick when it was picked."""
        free = {n: self._base(n) for nodes, _ in self._waiting[pool] for n in nodes}
        for n, g in taken.items():  # the nodes read here, not from the buckets: a few
            free[n] = free.get(n, self._base(n)) - g
        order = SortedList((f, n) for n, f in free.items())  # those few, tightest first
        out = []
        for _, asks in self._waiting[pool]:
            picks: Picks = []
            for gpus in asks:
                picks.append(self._tightest(pool, gpus, free, order, picks))
                if picks[-1] is None:
                    break
            if rooms is not None:
                rooms.append([free.get(n, self.free[n]) for n in picks if n is not None])
            for n, g in _started(picks, asks).items():
                if n in free:
                    order.remove((free[n], n))
                free[n] = free.get(n, self.free[n]) - g
                order.add((free[n], n))
            out.append(picks)
        return out

    def _tightest(
        self, pool: PoolKey, gpus: int, free: Mapping[str, int], order: SortedList, avoid: Picks
    ) -> str | None:
        """The node best fit picks for ``gpus``, not one in ``avoid``: those in ``free``
        (``order``: them by free GPUs) with the GPUs free there, the others with those of
        their bucket."""
        best: tuple[int, str] | None = None
        for f, n in order.islice(order.bisect_left((gpus, ""))):
            if n not in avoid:
                best = (f, n)
                break
        for f in sorted(f for f, b in self._buckets[pool].items() if f >= gpus and b):
            if best is not None and f > best[0]:
                break
            node = next(
                (str(n) for n in self._buckets[pool][f] if n not in free and n not in avoid), None
            )
            if node is not None:
                best = min(best, (f, node)) if best is not None else (f, node)
                break
        return best[1] if best is not None else None

    def _alters(self, pool: PoolKey, node: str, gpus: int) -> bool:
        """Whether taking ``gpus`` on ``node`` changes a pick of the pass as the nodes are
        now: the node no longer fits an ask the pass gives it, or it becomes the tighter
        fit for one the pass gives another node. (No pick changes: nor does the pass.)"""
        here = 0  # GPUs the pass gave on the node so far
        left = self._base(node) - gpus
        trace = zip(self._waiting[pool], self._passed(pool), self._rooms[pool], strict=True)
        for (_, asks), picks, rooms in trace:
            for k, (ask, pick, was) in enumerate(zip(asks, picks, rooms, strict=False)):
                room = left - here
                if pick == node:
                    if room < ask:
                        return True
                    continue
                fits = room >= ask and node not in picks[:k]
                if fits and (room, node) < (was, pick):
                    return True  # now the tighter fit
            if _starts(picks):
                here += sum(g for p, g in zip(picks, asks, strict=True) if p == node)
        return False


def _starts(picks: Picks) -> bool:
    return None not in picks


def _started(picks: Picks, asks: list[int]) -> dict[str, int]:
    """The GPUs per node the pass gives a job it starts (none for one that waits)."""
    return (
        {p: g for p, g in zip(picks, asks, strict=True) if p is not None} if _starts(picks) else {}
    )
