"""Scratch state of one scheduling pass: allocations per queue, free GPUs, fair shares.

The allocate (and later reclaim / preempt / consolidate) steps all read and update one
:class:`Session`; it is created from a :class:`~solvers.problem.Problem` and thrown away.
:func:`place` bin-packs a gang and charges its queues; a :class:`Statement` (KAI's name)
applies evictions and placements with an undo log so a simulation can be rolled back; a
:class:`Grant` is what a pass started or grew, whichever engine decided it.

Stand-ins of work held for a cluster that did not answer (``Problem.stand_ins``) are
charged as running work, so every gate on new work counts them; ``unseen`` keeps what they
hold per queue, and :meth:`Session.seen` is a queue's allocation without it, the measure by
which running work is given back (limits, reclaim's victims). Of a GPU type's quota, only
its limit counts them, where their type is known (``unseen_t``: solvers/problem/standins.py).
Fair shares divide the GPUs of the clusters that answered: a stand-in's demand is left out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from solvers.fairshare import ShareNode, compute_fair_shares
from solvers.order import job_id_order
from solvers.placement import FreeIndex
from solvers.problem import JobRequest, PoolKey, Problem, Queue, node_key, stand_in_types
from specs.actions import Reason

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # a job whose submit time is unknown goes first


@dataclass(frozen=True)
class Grant:
    """A workload newly started, or grown, by this pass."""

    key: str
    nodes: tuple[str, ...]  # node keys of every replica after the pass
    pool: PoolKey
    reason: Reason


@dataclass
class Session:
    problem: Problem
    index: FreeIndex
    alloc: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    alloc_np: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    fair: dict[str, float] = field(default_factory=dict)
    tasks: dict[str, list[str]] = field(default_factory=dict)  # workload -> node keys
    pool: dict[str, PoolKey] = field(default_factory=dict)  # workload -> pool
    # per-GPU-type quotas: GPUs per (queue, type), all and non-preemptible, kept only for
    # the queues whose quota is a per-type list (``per_type``: whether any is)
    alloc_t: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    alloc_np_t: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    per_type: bool = False
    # of ``alloc``, what stand-ins hold (Problem.stand_ins), per queue: it keeps new work
    # out, but running work is taken back only for what ``seen`` holds
    unseen: dict[str, float] = field(default_factory=dict)
    # and per (queue, GPU type), for per-type limits only: not in ``alloc_t``, which is what
    # work the clusters show holds of each type (it never decides who gives work back)
    unseen_t: dict[tuple[str, str], float] = field(default_factory=dict)
    # waiting fan-out candidates that fit now: (cluster, job id) -> (node name, GPUs) held
    held: dict[tuple[str, str], list[tuple[str, int]]] = field(default_factory=dict)
    _chains: dict[str, list[Queue]] = field(default_factory=dict, repr=False)
    _shares: dict[str, float] = field(default_factory=dict, repr=False)  # fixed with ``fair``
    # the fair shares past usage did not bend (worked out when first asked for)
    _unbent: Callable[[], dict[str, float]] | None = field(default=None, repr=False)
    _unbent_shares: dict[str, float] | None = field(default=None, repr=False)

    @classmethod
    def open(
        cls,
        problem: Problem,
        usage: dict[str, float] | None = None,
        k: float = 1.0,
        k_by_queue: dict[str, float] | None = None,
    ) -> Session:
        """Charge running work and divide fair shares; ``usage`` (normalised past usage by
        queue id) and ``k`` bend only the over-quota split (time-based fairshare)."""
        s = cls.before(problem)
        s.fair = _fair_shares(problem, s, usage or {}, k, k_by_queue or {})
        s._shares = {}
        if any(u > 0 for u in (usage or {}).values()):  # the shares usage did not bend
            s._unbent = lambda: _fair_shares(problem, s, {}, k, k_by_queue or {})
        return s

    def unbent_fair(self, qid: str) -> float:
        """The queue's fair share had past usage not bent the over-quota split (its fair
        share, where there is no usage)."""
        if self._unbent is None:
            return self.fair.get(qid, 0.0)
        if self._unbent_shares is None:
            self._unbent_shares = self._unbent()
        return self._unbent_shares.get(qid, 0.0)

    @classmethod
    def before(cls, problem: Problem) -> Session:
        """The state a pass starts from: running work charged to its queues and holding its
        GPUs, waiting fan-out candidates holding theirs; no fair shares yet. Work winding
        down (``ending``) holds its GPUs, charged to no queue: as good as gone, no victim."""
        distinct = frozenset(k for k, p in problem.pools.items() if p.one_replica_per_node)
        limits = {k: p.max_walltime for k, p in problem.pools.items()}
        s = cls(problem, FreeIndex(problem.nodes, distinct, limits), per_type=problem.typed)
        types = stand_in_types(problem) if s.per_type and problem.stand_ins else {}
        for job in problem.jobs.values():
            if job.running:
                s.tasks[job.key] = list(job.placed)
                if job.pool:
                    s.pool[job.key] = job.pool
                if not job.ending:
                    s.charge(job, len(job.placed) * job.gpus)
                if job.key in problem.stand_ins:  # its GPU type, where known
                    gpus, gpu_type = len(job.placed) * job.gpus, types.get(job.key)
                    for q in s.chain(job.queue):
                        s.unseen[q.id] = s.unseen.get(q.id, 0.0) + gpus
                        if gpu_type is not None and q.typed is not None:
                            typed = q.id, gpu_type
                            s.unseen_t[typed] = s.unseen_t.get(typed, 0.0) + gpus
        for kept in problem.kept_running:  # a second job a refused cancel leaves running
            s.charge(kept.request, kept.job.gpus, kept.pool)
        s.hold_queued()
        s.hold_candidates()
        return s

    def hold_queued(self) -> None:
        """Workloads whose job an earlier plan submitted and the cluster has yet to start:
        their GPUs count against their queues (quotas, limits, fair shares) as the work
        they are about to be, and they hold the nodes they were pinned to where those
        have the room now (a victim still winding down there makes it as it ends), so
        nothing else is planned onto them. One the cluster places holds a best fit."""
        waiting = sorted(
            [*self.problem.queued.values(), *self.problem.kept_queued],
            key=lambda q: (q.job.submitted_at or _EPOCH, job_id_order(q.job.id)),
        )
        for q in waiting:
            asks = [r.gpus for r in q.job.replicas]
            self.charge(q.request, sum(asks), q.pool)
            named = [node_key(q.cluster, r.node) for r in q.job.replicas if r.node is not None]
            if q.pool is None or not asks:
                continue
            if len(named) == len(asks):
                self._hold_on(q.pool, named, asks)
            elif not named:
                self.hold(q.pool, asks, q.job.walltime)

    def hold_candidates(self) -> None:
        """Fan-out workloads whose candidates wait in the clusters' queues: their GPUs count
        once against their queues' caps, and a candidate that fits now holds the GPUs the
        cluster is about to start it on, so nothing else is planned onto them. Candidates
        take room in the order the cluster starts them: submission, then job id. One that
        names its nodes (a cluster that says where it will start it, or an earlier round
        of the same plan) holds those, where they have the room. Nothing placed after
        may cost a held one its start in the cluster's pass (solvers/placement.py)."""
        waiting = []
        for key, jobs in sorted(self.problem.candidates.items()):
            job = self.problem.fan_out[key]
            self.charge(job, job.replicas * job.gpus)
            waiting += [(cluster, j) for cluster, j in jobs if j.pool is not None]
        waiting.sort(key=lambda cj: (cj[1].submitted_at or _EPOCH, job_id_order(cj[1].id)))
        starts: list[tuple[list[str], list[int]]] = []
        for cluster, j in waiting:
            pool, asks = (cluster, j.pool or ""), [r.gpus for r in j.replicas]
            named = [node_key(cluster, r.node) for r in j.replicas if r.node is not None]
            nodes, sizes = None, asks
            if named and len(named) == len(asks):
                nodes = self._hold_on(pool, named, asks)
            if nodes is None:
                nodes, sizes = self.hold(pool, asks, j.walltime), sorted(asks, reverse=True)
            if nodes is not None:
                names = [self.problem.nodes[n].name for n in nodes]
                self.held[cluster, j.id] = list(zip(names, sizes, strict=True))
                if nodes:  # a job of no replicas asks the pass for nothing
                    starts.append((nodes, sizes))
        self.index.hold_for_cluster(starts)

    def _hold_on(self, pool: PoolKey, nodes: list[str], asks: list[int]) -> list[str] | None:
        """Take ``asks`` on exactly ``nodes`` (node keys), if all of them have the room."""
        need: dict[str, int] = defaultdict(int)
        for node, gpus in zip(nodes, asks, strict=True):
            need[node] += gpus
        index = self.index
        if any(index.pool_of.get(n) != pool or index.free[n] < g for n, g in need.items()):
            return None
        for node, gpus in need.items():
            index.take(node, gpus)
        return nodes

    def hold(self, pool: PoolKey, asks: list[int], lasts: int | None) -> list[str] | None:
        """Take the GPUs of a job the cluster places: one entry of ``asks`` per node, on
        distinct nodes, tightest fit first (as the clusters place), none it would not end
        on before the node's next reservation (``lasts``: its time limit). Nothing is taken
        when they do not all fit now: such a job waits, and holds nothing until room appears."""
        taken: list[tuple[str, int]] = []
        for gpus in sorted(asks, reverse=True):
            node = self.index.best_node(pool, gpus, {n for n, _ in taken}, lasts=lasts)
            if node is None:
                for n, g in taken:
                    self.index.give(n, g)
                return None
            self.index.take(node, gpus)
            taken.append((node, gpus))
        return [n for n, _ in taken]

    def seen(self, qid: str) -> float:
        """What the queue holds by work the clusters show (``alloc`` less what stand-ins
        hold): the measure of a queue that gives running work back (limits, reclaim)."""
        held = self.alloc.get(qid, 0.0)
        return held - self.unseen.get(qid, 0.0) if self.unseen else held

    def typed_held(self, qid: str, gpu_type: str) -> float:
        """What the queue holds of ``gpu_type`` against its limit on it: ``alloc_t`` and
        what stand-ins of that type hold (``unseen_t``)."""
        held = self.alloc_t[qid, gpu_type]
        return held + self.unseen_t.get((qid, gpu_type), 0.0) if self.unseen_t else held

    def chain(self, queue_id: str) -> list[Queue]:
        """The queue and its ancestors, leaf first (cached: the tree is fixed for a session)."""
        if queue_id in self._chains:
            return self._chains[queue_id]
        out = []
        q: Queue | None = self.problem.queues.get(queue_id)
        while q is not None:
            out.append(q)
            q = self.problem.queues.get(q.parent) if q.parent else None
        self._chains[queue_id] = out
        return out

    def pools_for(self, job: JobRequest) -> list[PoolKey]:
        """Where the job may place replicas: a job holding GPUs grows in its own pool (one
        Slurm job, one partition); a new one may use any eligible pool; a running job this
        plan evicted from everywhere, any of its own cluster's (placed again, it moves, and
        a job moves within its cluster: elsewhere it is a new job, a later round's submit)."""
        if self.tasks.get(job.key) and job.key in self.pool:
            return [self.pool[job.key]]
        if job.running:
            return [p for p in job.pools if p[0] == job.cluster]
        return job.pools

    def charge(self, job: JobRequest, gpus: float, pool: PoolKey | None = None) -> None:
        """Charge (or, negative, refund) ``gpus`` to the job's queues; per GPU type too,
        by the pool it holds (``pool``: the one it held, when that changed since)."""
        gpu_type = None
        if self.per_type:
            where = pool or self.pool.get(job.key)
            gpu_type = self.problem.pools[where].gpu_type if where else None
        for q in self.chain(job.queue):
            self.alloc[q.id] += gpus
            if not job.preemptible:
                self.alloc_np[q.id] += gpus
            if gpu_type is not None and q.typed is not None:
                self.alloc_t[q.id, gpu_type] += gpus
                if not job.preemptible:
                    self.alloc_np_t[q.id, gpu_type] += gpus

    def over_type_quota(
        self, job: JobRequest, gpu_type: str, gpus: float
    ) -> tuple[Queue, float, bool] | None:
        """The first level whose quota on ``gpu_type`` ``gpus`` more would break, what it
        holds there and whether its limit binds (else, non-preemptible work, its deserved)."""
        for q in self.chain(job.queue):
            if q.typed is None:
                continue
            quota = q.on(gpu_type)
            held = self.typed_held(q.id, gpu_type)
            if quota.limit is not None and held + gpus > quota.limit:
                return q, held, True
            held_np = self.alloc_np_t[q.id, gpu_type]
            if not job.preemptible and held_np + gpus > quota.deserved:
                return q, held_np, False
        return None

    def within_deserved(self, q: Queue, job: JobRequest, gpus: float) -> bool:
        """Whether ``gpus`` more for ``job`` keep ``q`` within deserved: its sum, and for a
        per-type quota its deserved on some GPU type the job may use."""
        if self.alloc[q.id] + gpus > q.deserved:
            return False
        if q.typed is None:
            return True
        types = {self.problem.pools[p].gpu_type for p in self.pools_for(job)}
        return any(self.alloc_t[q.id, t] + gpus <= q.on(t).deserved for t in types)

    def typed_pools(self, job: JobRequest, pools: list[PoolKey], gpus: float) -> list[PoolKey]:
        """``pools`` whose GPU type the job's per-type quotas leave room for."""
        if not self.per_type:
            return pools
        types = {p: self.problem.pools[p].gpu_type for p in pools}
        room = {t: self.over_type_quota(job, t, gpus) is None for t in set(types.values())}
        return [p for p in pools if room[types[p]]]

    def allocatable_share(self, q: Queue) -> float:
        """max(deserved, fair share), capped by the limit."""
        share = self._shares.get(q.id)
        if share is None:
            share = max(q.deserved, self.fair.get(q.id, 0.0))
            share = self._shares[q.id] = share if q.limit is None else min(share, q.limit)
        return share


def place(
    session: Session, job: JobRequest, count: int, prefer: list[str] | None = None
) -> list[str] | None:
    """Bin-pack ``count`` replicas of ``job`` as one gang and charge them; None if they do not fit.

    A job that already holds GPUs stays in its pool: its replicas form one gang. With
    ``prefer`` (the nodes a job was just evicted from), the replicas go back there when
    they fit, so a job that finds its old place free is not restarted elsewhere."""
    s = session
    pools = s.typed_pools(job, s.pools_for(job), count * job.gpus)
    back = (prefer or [])[:count]
    home = {n: c * job.gpus for n, c in Counter(back).items()}
    if (
        len(back) == count
        and all(
            s.index.free.get(n, 0) >= g and s.index.pool_of[n] in pools for n, g in home.items()
        )
        and s.index.leaves_room(home)
    ):
        nodes: list[str] | None = list(back)
        for n in back:
            s.index.take(n, job.gpus)
    else:
        holding = frozenset(s.tasks.get(job.key, ()))
        nodes = s.index.place_gang(pools, job.gpus, count, holding, lasts=job.walltime)
    if nodes is None:
        return None
    s.tasks.setdefault(job.key, []).extend(nodes)
    s.pool[job.key] = s.index.pool_of[nodes[0]] if nodes else pools[0]
    s.charge(job, count * job.gpus)
    return nodes


@dataclass(frozen=True)
class Chunk:
    """Replicas of one victim job that go together: a whole gang, or one elastic replica."""

    key: str
    nodes: tuple[str, ...]  # node keys, one per replica


class Statement:
    """Evictions and placements applied to the session with an undo log (KAI's statement)."""

    def __init__(self, session: Session) -> None:
        self.s = session
        # job, tasks before, pool before, GPUs given back (+) or taken (-) per node
        self._log: list[
            tuple[JobRequest, list[str] | None, PoolKey | None, list[tuple[str, int]]]
        ] = []
        self.before: dict[str, list[str]] = {}  # every touched job's replicas before the trial
        self.victims: list[Chunk] = []
        self.removed: dict[str, list[str]] = {}  # victim -> replicas evicted
        self.readded: dict[str, list[str]] = {}  # victim -> replicas placed again
        self.placed: list[str] = []  # the waiting job's new replicas

    def _remember(self, job: JobRequest) -> tuple[list[str] | None, PoolKey | None]:
        tasks = self.s.tasks.get(job.key)
        self.before.setdefault(job.key, list(tasks or []))
        return (list(tasks) if tasks is not None else None), self.s.pool.get(job.key)

    def evict(self, job: JobRequest, nodes: tuple[str, ...] | list[str]) -> None:
        tasks, pool = self._remember(job)
        left = list(tasks or [])
        for n in nodes:
            left.remove(n)
            self.s.index.give(n, job.gpus)
        self.s.tasks[job.key] = left
        self.s.charge(job, -len(nodes) * job.gpus)
        self._log.append((job, tasks, pool, [(n, job.gpus) for n in nodes]))

    def place(self, job: JobRequest, count: int) -> list[str] | None:
        tasks, pool = self._remember(job)
        nodes = place(self.s, job, count)
        if nodes is not None:
            self._log.append((job, tasks, pool, [(n, -job.gpus) for n in nodes]))
        return nodes

    def put(self, job: JobRequest, nodes: list[str]) -> None:
        """Place replicas on the given nodes (the caller checked that they fit); the job's
        pool is theirs (a victim put back home after a simulation placed it elsewhere)."""
        tasks, pool = self._remember(job)
        for n in nodes:
            self.s.index.take(n, job.gpus)
        self.s.tasks.setdefault(job.key, []).extend(nodes)
        if nodes:
            self.s.pool[job.key] = self.s.index.pool_of[nodes[0]]
        self.s.charge(job, len(nodes) * job.gpus)
        self._log.append((job, tasks, pool, [(n, -job.gpus) for n in nodes]))

    def rollback(self) -> None:
        s = self.s
        for job, tasks, pool, moves in reversed(self._log):
            held_in = s.pool.get(job.key)  # the pool the undone change was charged to
            if tasks is None:
                s.tasks.pop(job.key, None)
            else:
                s.tasks[job.key] = tasks
            if pool is None:
                s.pool.pop(job.key, None)
            else:
                s.pool[job.key] = pool
            for node, gpus in moves:
                (s.index.take if gpus > 0 else s.index.give)(node, abs(gpus))
            s.charge(job, sum(g for _, g in moves), held_in)
        self._log.clear()

    def evicted_count(self, key: str) -> int:
        """Replicas of a victim that the simulation could not place again."""
        return len(self.removed.get(key, [])) - len(self.readded.get(key, []))


def _fair_shares(
    problem: Problem, s: Session, usage: dict[str, float], k: float, k_by_queue: dict[str, float]
) -> dict[str, float]:
    request: dict[str, float] = defaultdict(float)
    for job in problem.jobs.values():
        if (job.blocked is not None and not job.running) or job.key in problem.stand_ins:
            continue  # a stand-in holds GPUs on a cluster that did not answer: not in total
        gpus = (
            job.replicas * job.gpus
            if not job.running
            else max(job.replicas, len(job.placed)) * job.gpus
        )
        for q in s.chain(job.queue):
            request[q.id] += gpus
    # work waiting in the clusters' queues is charged (``before``): it asks for as much; so
    # does fan-out work, its candidates queued or not submitted yet (unless it may not start)
    waiting = [(q.request, sum(r.gpus for r in q.job.replicas)) for q in problem.queued.values()]
    fan = [j for k, j in problem.fan_out.items() if k in problem.candidates or j.blocked is None]
    for job, gpus in [*waiting, *((j, j.replicas * j.gpus) for j in fan)]:
        for q in s.chain(job.queue):
            request[q.id] += gpus

    def share_node(qid: str) -> ShareNode:
        q = problem.queues[qid]
        return ShareNode(
            id=qid,
            deserved=q.deserved,
            limit=q.limit,
            weight=q.weight,
            priority=q.priority,
            request=request[qid],
            usage=usage.get(qid, 0.0),
            k=k_by_queue.get(qid),
            order=(problem.order[qid], q.name),
            held=s.seen(qid),
            children=[share_node(c) for c in q.children],
        )

    return compute_fair_shares([share_node(t) for t in problem.top], problem.total_gpus, k)
