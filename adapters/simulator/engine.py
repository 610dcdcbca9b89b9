"""The simulator's engine: a tiny, obedient scheduler over an in-memory ClusterState.

A submitted job starts at once on the nodes the plan names (or, with no node named, where
it packs tightest; if it does not fit yet it waits PENDING), preempt and cancel free the
GPUs, and when time passes (``refresh``) a job whose walltime runs out is COMPLETED at that
moment, and waiting jobs start, first come first served, the moment room appears for them:
not whenever somebody next looks, which after a jump of the clock would put their starts,
ends and usage late by the jump. A move restarts the job on its new nodes; where they
are not free yet it stops and waits for them, as a moved job's new Slurm job or Kubernetes
pods do, and starts once an action frees them (moves that trade places).

Pure: the time is an argument and nothing is read or written outside the state it is
given, so the reconciler's virtual world (controlplane/converge.py) runs on it as well as
the file-backed adapter (adapters/simulator/adapter.py).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta

from adapters.base import ActionResult, PermanentError
from adapters.simulator.index import Index, pinned_waiting
from specs.actions import Action, Op
from specs.models import Cluster
from specs.snapshot import ClusterState, Job, JobRun, JobState, Node, Replica


def node_name(pool: str, index: int) -> str:
    return f"{pool}-{index:02d}"


def nodes_from_spec(cluster: Cluster) -> list[Node]:
    return [
        Node(
            name=node_name(p.name, i),
            pool=p.name,
            gpu_type=p.gpu_type,
            gpus=p.gpus_per_node,
            partition=p.partition,
        )
        for p in cluster.spec.node_pools
        for i in range(1, p.nodes + 1)
    ]


class SimulatedCluster:
    """Executes plan actions against a ClusterState held in memory.

    ``schedule=False`` never starts a job that the plan did not place on nodes: it waits
    PENDING. That is the virtual world of a plan (controlplane/converge.py), where fan-out
    candidates are left to a real cluster's own scheduler and must not be assumed to run.
    """

    def __init__(
        self,
        state: ClusterState,
        *,
        next_id: int | None = None,
        id_prefix: str = "",
        schedule: bool = True,
        accounting: list[JobRun] | None = None,
        open_since: dict[str, datetime] | None = None,
    ) -> None:
        self.state = state
        self.id_prefix = id_prefix
        self.schedule = schedule
        # the accounting database: runs that ended as jobs left (preempted, cancelled) or
        # changed shape (moved, resized); the runs of jobs still in ``state`` are read off
        # them, a resized one's since ``open_since``
        self.accounting = list(accounting or [])
        self.open_since = dict(open_since or {})
        if next_id is None:  # continue after the ids the state already holds
            numbers = [
                int(j.id[len(id_prefix) :])
                for j in state.jobs
                if j.id.startswith(id_prefix) and j.id[len(id_prefix) :].isdigit()
            ]
            next_id = max(numbers, default=999) + 1
        self.next_id = next_id
        self._ix: Index | None = None  # set while execute_many runs

    # ------------------------------------------------------------------ views

    def used(self) -> dict[str, int]:
        used = {n.name: 0 for n in self.state.nodes}
        for j in self.state.jobs:
            if j.state.holds_gpus:
                for r in j.replicas:
                    if r.node in used:
                        used[r.node] += r.gpus
        return used

    def find(self, job_id: str | None) -> Job | None:
        return next((j for j in self.state.jobs if j.id == job_id), None)

    def refresh(self, now: datetime) -> None:
        """Time passes, up to ``now``: each job whose walltime runs out completes then, and
        the cluster starts waiting jobs (oldest first) the moment room appears for them, at
        each such end, and at ``now``. A job started at an end may itself end before
        ``now``. Node states follow usage."""
        self._ix = ix = Index(self.state)
        try:
            ends = [(end, i) for i, j in enumerate(self.state.jobs) if (end := _end(j))]
            heapq.heapify(ends)
            while ends and ends[0][0] <= now:
                moment = ends[0][0]
                while ends and ends[0][0] == moment:
                    job = self.state.jobs[heapq.heappop(ends)[1]]
                    ix.release(job)
                    job.state, job.ended_at = JobState.COMPLETED, moment
                for i in self._start_waiting(moment):
                    if (end := _end(self.state.jobs[i])) is not None:
                        heapq.heappush(ends, (end, i))
            self._start_waiting(now)
        finally:
            self._ix = None
        for n in self.state.nodes:
            if n.state in ("down", "drain"):
                continue
            u = ix.used.get(n.name, 0)
            n.state = "idle" if u == 0 else ("allocated" if u >= n.gpus else "mixed")

    def forget(self, before: datetime) -> None:
        """Jobs that ended before ``before`` leave the queue, as Slurm forgets a job
        ``MinJobAge`` after its end; their runs stay in the accounting."""
        kept = []
        for j in self.state.jobs:
            if j.state.active or j.ended_at is None or j.ended_at >= before:
                kept.append(j)
                continue
            if (run := self._run_of(j)) is not None:
                self.accounting.append(run)
            self.open_since.pop(j.id, None)
        if len(kept) < len(self.state.jobs):
            self.state.jobs = kept

    def _start_waiting(self, moment: datetime) -> list[int]:
        """Start, at ``moment``, the waiting jobs that fit (in submission order; a moved job
        on the nodes it waits for); the positions of those started."""
        if not self.schedule:
            return []
        started = []
        for i, j in enumerate(self.state.jobs):
            if j.state != JobState.PENDING or (j.submitted_at and j.submitted_at > moment):
                continue  # not waiting, or not submitted yet at that moment
            if pinned_waiting(j):  # a moved job: on its nodes, once they have room
                if not self._startable(j):
                    continue
            elif (placed := self._fit(j.pool, j.replicas)) is not None:
                j.replicas = placed
            else:
                continue
            j.state, j.started_at = JobState.RUNNING, moment
            self._index().hold(j)
            started.append(i)
        return started

    # ------------------------------------------------------------------ actions

    def execute(self, action: Action, *, plan_id: str, now: datetime) -> ActionResult:
        return self.execute_many([action], plan_id=plan_id, now=now, strict=False)[0]

    def execute_many(
        self, actions: Iterable[Action], *, plan_id: str, now: datetime, strict: bool = True
    ) -> list[ActionResult]:
        """Carry out ``actions`` in order. The jobs are indexed once (by id, by workload,
        GPUs used per node), so each action costs what it touches, not the whole cluster;
        removed jobs leave the state's job list in one pass at the end (also when an
        action fails: the state then holds the actions before it). ``strict``: a moved job
        still waiting for its nodes at the end is an error (a whole plan, run at once, must
        leave every move running)."""
        self._ix = Index(self.state)
        if self.schedule:  # a cluster of its own: moves left waiting by earlier actions too
            self._ix.moved = [j for j in self.state.jobs if pinned_waiting(j)]
        try:
            done = []
            for action in actions:
                done.append(self._execute(action, plan_id, now))
                if self._ix.moved:
                    self._start_moved(now)
            if strict and self._ix.moved:
                self._check_fits(self._ix.moved[0].replicas)
            return done
        finally:
            if self._ix.removed:
                self.state.jobs = [j for j in self.state.jobs if id(j) not in self._ix.removed]
            self._ix = None

    def _execute(self, action: Action, plan_id: str, now: datetime) -> ActionResult:
        ix = self._index()
        if action.op == Op.SUBMIT:
            return self._submit(action, plan_id, now)
        job = ix.by_id.get(action.job or "")
        if job is None:
            return ActionResult(ok=True, job=action.job, message="job already gone")
        if job.workload is None:
            raise PermanentError(
                f"job {job.id} was not created by the control plane; not touching it"
            )
        if job.workload not in (action.workload, action.tagged_as):  # as the real ones check
            raise PermanentError(
                f"job {job.id} belongs to workload {job.workload}, not {action.workload}; refusing"
            )
        if action.op in (Op.PREEMPT, Op.CANCEL):
            if not job.state.active:  # it ended meanwhile: its run stays as it ended
                return ActionResult(
                    ok=True, job=job.id, message=f"job already ended ({job.state.value})"
                )
            self._close_run(job, now, JobState.CANCELLED)
            ix.remove(job)
            return ActionResult(ok=True, job=job.id, message=f"{action.op.value}ed")
        # move / resize: the replicas after the action
        replicas = action.replicas or []
        self._check_nodes(replicas)
        if (short := self._short(replicas, ignore=job)) is not None:
            if action.op == Op.MOVE and job.state.holds_gpus:
                return self._wait_for_room(job, replicas, now)
            raise PermanentError(short)
        self._close_run(job, now, JobState.RUNNING)
        if job.state.holds_gpus:
            self.open_since[job.id] = now
            if action.op == Op.MOVE:  # a restart on other nodes (a new job on Slurm, new
                job.started_at = now  # pods on Kubernetes): walltime and minRuntime anew
        ix.release(job)
        self._land(job, replicas)
        ix.hold(job)
        return ActionResult(ok=True, job=job.id, message=f"{action.op.value}d")

    def _land(self, job: Job, replicas: list[Replica]) -> None:
        job.replicas = [Replica(node=r.node, gpus=r.gpus) for r in replicas]
        where = self._index().nodes.get(job.replicas[0].node or "") if job.replicas else None
        if where is not None and where.pool != job.pool:  # moved to another pool: its type
            job.pool, job.gpu_type, job.partition = where.pool, where.gpu_type, where.partition

    def _wait_for_room(self, job: Job, replicas: list[Replica], now: datetime) -> ActionResult:
        """A move whose nodes are still held (by a job another action of the plan moves
        away): the job stops where it ran and waits for them."""
        ix = self._index()
        self._close_run(job, now, JobState.RUNNING)
        ix.release(job)
        job.state, job.started_at = JobState.PENDING, None
        self._land(job, replicas)
        ix.moved.append(job)
        nodes = ", ".join(sorted({r.node or "" for r in replicas}))
        return ActionResult(ok=True, job=job.id, message=f"moved: waits for room on {nodes}")

    def _start_moved(self, now: datetime) -> None:
        """Start the moved jobs whose nodes have room now, in the order they were moved."""
        ix = self._index()
        for job in list(ix.moved):
            if self._startable(job):
                job.state, job.started_at = JobState.RUNNING, now
                ix.hold(job)
                ix.moved.remove(job)

    # ------------------------------------------------------------------ accounting

    def _run_of(self, job: Job) -> JobRun | None:
        """The run a job of ours is in (or ended with), as accounting records it."""
        if job.workload is None or job.started_at is None:
            return None
        return JobRun(
            job=job.id,
            workload=job.workload,
            started_at=self.open_since.get(job.id, job.started_at),
            ended_at=job.ended_at if not job.state.active else None,
            gpus=job.gpus,
            gpu_type=job.gpu_type,
            state=job.state,
            time_limit=job.walltime,
            spec_digest=job.spec_digest,
            plan_id=job.plan_id,
        )

    def _close_run(self, job: Job, now: datetime, state: JobState) -> None:
        run = self._run_of(job) if job.state.holds_gpus else None
        if run is not None:
            self.accounting.append(run.model_copy(update={"ended_at": now, "state": state}))
            self.open_since.pop(job.id, None)

    def runs(
        self, since: datetime, until: datetime, earlier: Iterable[JobRun] = ()
    ) -> list[JobRun]:
        """Runs of our jobs that overlapped ``[since, until]`` (``earlier``: runs kept
        outside the engine, as the adapter's accounting file)."""
        current = [r for j in self.state.jobs if (r := self._run_of(j)) is not None]
        return [
            r
            for r in [*earlier, *self.accounting, *current]
            if r.started_at <= until and (r.ended_at is None or r.ended_at >= since)
        ]

    def _index(self) -> Index:
        if self._ix is None:  # a view outside execute_many (fits_now): a fresh index
            return Index(self.state)
        return self._ix

    def _submit(self, action: Action, plan_id: str, now: datetime) -> ActionResult:
        ix = self._index()
        candidate = action.submit.candidate if action.submit else None
        digest = action.submit.spec_digest if action.submit else None
        for j in ix.by_workload.get(action.workload, []):
            # idempotent: the job this plan made, or an active one of the same spec (a
            # repeat from another plan, whatever the order) is this submission
            if (
                j.state.active
                and j.candidate == candidate
                and (j.plan_id == plan_id or (digest is not None and j.spec_digest == digest))
            ):
                return ActionResult(ok=True, job=j.id, message=f"already submitted as job {j.id}")
        wanted = list(action.replicas or [])
        if wanted and all(r.node is None for r in wanted):
            # the cluster places it: where it fits now, else it waits for room
            chunks = self._per_node(action)
            fit = self._fit(action.pool, chunks) if self.schedule else None
            replicas, state = (
                (fit, JobState.RUNNING) if fit is not None else (chunks, JobState.PENDING)
            )
        else:
            replicas, state = self._placed(action), JobState.RUNNING
            self._check_fits(replicas)
        job = Job(
            id=f"{self.id_prefix}{self.next_id}",
            workload=action.workload,
            state=state,
            submitted_at=now,
            started_at=now if state == JobState.RUNNING else None,
            replicas=replicas,
            plan_id=plan_id,
            pool=action.pool,
            partition=action.submit.partition if action.submit else None,
            gpu_type=action.submit.gpu_type if action.submit else None,
            walltime=action.submit.walltime if action.submit else None,
            candidate=candidate,
            spec_digest=digest,
        )
        self.next_id += 1
        self.state.jobs.append(job)
        ix.add(job)
        return ActionResult(
            ok=True, job=job.id, message="started" if state == JobState.RUNNING else "queued"
        )

    @staticmethod
    def _per_node(action: Action) -> list[Replica]:
        """What a job the cluster places asks of each node, as Slurm reports it: replicas
        that share a node (``submit.nodes`` below the replica count) are one entry."""
        replicas = list(action.replicas or [])
        nodes = action.submit.nodes if action.submit and action.submit.nodes else len(replicas)
        group = max(1, len(replicas) // max(1, nodes))
        return [
            Replica(node=None, gpus=sum(r.gpus for r in replicas[i : i + group]))
            for i in range(0, len(replicas), group)
        ]

    def _fit(self, pool: str | None, asks: list[Replica]) -> list[Replica] | None:
        """A node for each entry of ``asks`` in ``pool``, distinct nodes, tightest fit then
        name; None when they do not fit now."""
        used = self._index().used
        free = {
            n.name: n.gpus - used[n.name]
            for n in self.state.nodes
            if n.pool == pool and n.schedulable
        }
        out: list[Replica] = []
        for ask in asks:
            fits = sorted((f, name) for name, f in free.items() if f >= ask.gpus)
            if not fits:
                return None
            node = fits[0][1]
            del free[node]  # one entry per node, as one Slurm job has one task set per node
            out.append(Replica(node=node, gpus=ask.gpus))
        return out

    def fits_now(self, action: Action) -> bool:
        """Would the cluster start this submit at once?"""
        return self._fit(action.pool, self._per_node(action)) is not None

    def _placed(self, action: Action) -> list[Replica]:
        """Fill in nodes the plan left to the cluster: tightest fit in the pool, then name."""
        ix = self._index()
        taken: Counter[str] = Counter()  # GPUs this action's earlier replicas take
        out = []
        for r in action.replicas or []:
            node = r.node
            if node is None:
                fits = sorted(
                    (f, n.name)
                    for n in self.state.nodes
                    if n.pool == action.pool
                    and n.schedulable
                    and (f := n.gpus - ix.used[n.name] - taken[n.name]) >= r.gpus
                )
                if not fits:
                    raise PermanentError(f"no node in pool {action.pool} has {r.gpus} free GPUs")
                node = fits[0][1]
            taken[node or ""] += r.gpus
            out.append(Replica(node=node, gpus=r.gpus))
        return out

    def _startable(self, job: Job) -> bool:
        """Whether a job waiting on the nodes it names can start there now."""
        return self._unusable(job.replicas) is None and self._short(job.replicas) is None

    def _check_fits(self, replicas: list[Replica], ignore: Job | None = None) -> None:
        self._check_nodes(replicas)
        if (short := self._short(replicas, ignore)) is not None:
            raise PermanentError(short)

    def _check_nodes(self, replicas: list[Replica]) -> None:
        if (why := self._unusable(replicas)) is not None:
            raise PermanentError(why)

    def _unusable(self, replicas: list[Replica]) -> str | None:
        """Why a node named cannot take work: it does not exist, or is not schedulable."""
        nodes = self._index().nodes
        for r in replicas:
            node = nodes.get(r.node or "")
            if node is None or not node.schedulable:
                return f"node {r.node} does not exist or is not schedulable"
        return None

    def _short(self, replicas: list[Replica], ignore: Job | None = None) -> str | None:
        """Why ``replicas`` do not fit now (a node lacks the GPUs; ``ignore``'s own GPUs
        count as free); None if they fit. The nodes named must exist."""
        ix = self._index()
        extra: Counter[str] = Counter()
        for r in replicas:
            extra[r.node or ""] += r.gpus
        if ignore is not None and ignore.state.holds_gpus:
            for r in ignore.replicas:
                if r.node is not None and r.node in extra:
                    extra[r.node] -= r.gpus
        for name, gpus in extra.items():
            node = ix.nodes[name]
            if ix.used[name] + gpus > node.gpus:
                return f"node {name} has {node.gpus} GPUs; this would use {ix.used[name] + gpus}"
        return None


def _end(job: Job) -> datetime | None:
    """When a running job's walltime runs out (None: it has none, or it is not running)."""
    if job.state == JobState.RUNNING and job.walltime and job.started_at:
        return job.started_at + timedelta(seconds=job.walltime)
    return None
