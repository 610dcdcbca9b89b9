"""The embedded simulator: a cluster made from a Cluster spec's node pools.

It behaves like a tiny, obedient scheduler: a submitted job starts at once on the nodes
the plan names (or, with no node named, where it packs tightest; if it does not fit
yet it waits PENDING and starts, first come first served, at an observe that finds
room), preempt and cancel free the GPUs, and a job whose walltime has run out is
COMPLETED at the next observe. As a forecaster (fan-out) it says "now" for a request
that fits at once and "unknown" otherwise.
:class:`SimulatedCluster` holds the logic over an in-memory :class:`ClusterState`;
:class:`SimulatorAdapter` persists it as JSON under the spec repo's ``.cp/`` so that
``cp apply`` followed by ``cp plan`` shows the world moved on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from adapters.base import ActionResult, PermanentError
from specs.actions import Action, Op
from specs.models import Cluster
from specs.snapshot import ClusterState, Job, JobState, Node, Replica


def node_name(pool: str, index: int) -> str:
    return f"{pool}-{index:02d}"


def nodes_from_spec(cluster: Cluster) -> list[Node]:
    return [
        Node(name=node_name(p.name, i), pool=p.name, gpu_type=p.gpu_type,
             gpus=p.gpus_per_node, partition=p.partition)
        for p in cluster.spec.node_pools
        for i in range(1, p.nodes + 1)
    ]


class SimulatedCluster:
    """Executes plan actions against a ClusterState held in memory.

    ``schedule=False`` never starts a job that the plan did not place on nodes: it waits
    PENDING. That is the virtual world of a plan (controlplane/converge.py), where fan-out
    candidates are left to a real cluster's own scheduler and must not be assumed to run.
    """

    def __init__(self, state: ClusterState, *, next_id: int | None = None, id_prefix: str = "",
                 schedule: bool = True) -> None:
        self.state = state
        self.id_prefix = id_prefix
        self.schedule = schedule
        if next_id is None:  # continue after the ids the state already holds
            numbers = [int(j.id[len(id_prefix):]) for j in state.jobs
                       if j.id.startswith(id_prefix) and j.id[len(id_prefix):].isdigit()]
            next_id = max(numbers, default=999) + 1
        self.next_id = next_id

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
        """Time passes: jobs whose walltime ran out complete, waiting jobs that now fit start
        (oldest first); node states follow usage."""
        for j in self.state.jobs:
            if (j.state == JobState.RUNNING and j.walltime and j.started_at
                    and j.started_at + timedelta(seconds=j.walltime) <= now):
                j.state = JobState.COMPLETED
                j.ended_at = j.started_at + timedelta(seconds=j.walltime)
        if self.schedule:
            for j in self.state.jobs:
                if j.state == JobState.PENDING:
                    placed = self._fit(j.pool, j.replicas)
                    if placed is not None:
                        j.replicas, j.state, j.started_at = placed, JobState.RUNNING, now
        used = self.used()
        for n in self.state.nodes:
            if n.state in ("down", "drain"):
                continue
            u = used.get(n.name, 0)
            n.state = "idle" if u == 0 else ("allocated" if u >= n.gpus else "mixed")

    # ------------------------------------------------------------------ actions

    def execute(self, action: Action, *, plan_id: str, now: datetime) -> ActionResult:
        if action.op == Op.SUBMIT:
            return self._submit(action, plan_id, now)
        job = self.find(action.job)
        if job is None:
            return ActionResult(ok=True, job=action.job, message="job already gone")
        if job.workload is None:
            raise PermanentError(f"job {job.id} was not created by the control plane; not touching it")
        if action.op in (Op.PREEMPT, Op.CANCEL):
            self.state.jobs.remove(job)
            return ActionResult(ok=True, job=job.id, message=f"{action.op.value}ed")
        # move / resize: the replicas after the action
        self._check_fits(action.replicas or [], ignore=job)
        job.replicas = [Replica(node=r.node, gpus=r.gpus) for r in action.replicas or []]
        return ActionResult(ok=True, job=job.id, message=f"{action.op.value}d")

    def _submit(self, action: Action, plan_id: str, now: datetime) -> ActionResult:
        candidate = action.submit.candidate if action.submit else None
        for j in self.state.jobs:  # idempotent: a rerun of the same plan finds its own job
            if (j.workload == action.workload and j.plan_id == plan_id and j.state.active
                    and j.candidate == candidate):
                return ActionResult(ok=True, job=j.id, message="already submitted by this plan")
        wanted = list(action.replicas or [])
        if wanted and all(r.node is None for r in wanted):
            # the cluster places it: where it fits now, else it waits for room
            chunks = self._per_node(action)
            fit = self._fit(action.pool, chunks) if self.schedule else None
            replicas, state = (fit, JobState.RUNNING) if fit is not None else (chunks, JobState.PENDING)
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
        )
        self.next_id += 1
        self.state.jobs.append(job)
        return ActionResult(ok=True, job=job.id,
                            message="started" if state == JobState.RUNNING else "queued")

    @staticmethod
    def _per_node(action: Action) -> list[Replica]:
        """What a job the cluster places asks of each node, as Slurm reports it: replicas
        that share a node (``submit.nodes`` below the replica count) are one entry."""
        replicas = list(action.replicas or [])
        nodes = action.submit.nodes if action.submit and action.submit.nodes else len(replicas)
        group = max(1, len(replicas) // max(1, nodes))
        return [Replica(node=None, gpus=sum(r.gpus for r in replicas[i:i + group]))
                for i in range(0, len(replicas), group)]

    def _fit(self, pool: str | None, asks: list[Replica]) -> list[Replica] | None:
        """A node for each entry of ``asks`` in ``pool``, distinct nodes, tightest fit then
        name; None when they do not fit now."""
        used = self.used()
        free = {n.name: n.gpus - used[n.name] for n in self.state.nodes
                if n.pool == pool and n.schedulable}
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
        used = self.used()
        free = {n.name: n.gpus - used[n.name] for n in self.state.nodes}
        pool_nodes = {n.name for n in self.state.nodes if n.pool == action.pool and n.schedulable}
        out = []
        for r in action.replicas or []:
            node = r.node
            if node is None:
                fits = sorted((f, name) for name, f in free.items()
                              if name in pool_nodes and f >= r.gpus)
                if not fits:
                    raise PermanentError(f"no node in pool {action.pool} has {r.gpus} free GPUs")
                node = fits[0][1]
            free[node] = free.get(node, 0) - r.gpus
            out.append(Replica(node=node, gpus=r.gpus))
        return out

    def _check_fits(self, replicas: list[Replica], ignore: Job | None = None) -> None:
        used = self.used()
        if ignore is not None and ignore.state.holds_gpus:
            for r in ignore.replicas:
                if r.node in used:
                    used[r.node] -= r.gpus
        nodes = {n.name: n for n in self.state.nodes}
        for r in replicas:
            node = nodes.get(r.node or "")
            if node is None or not node.schedulable:
                raise PermanentError(f"node {r.node} does not exist or is not schedulable")
            used[node.name] += r.gpus
            if used[node.name] > node.gpus:
                raise PermanentError(
                    f"node {node.name} has {node.gpus} GPUs; this would use {used[node.name]}")


class SimulatorAdapter:
    """The file-backed simulator: state in ``STATE_DIR/simulator/<cluster>.json``."""

    def __init__(self, cluster: Cluster, *, state_dir: Path, clock: Callable[[], datetime]) -> None:
        self.spec = cluster
        self.cluster = cluster.metadata.name
        self.path = state_dir / "simulator" / f"{self.cluster}.json"
        self.clock = clock

    def _load(self) -> SimulatedCluster:
        if self.path.exists():
            raw = json.loads(self.path.read_text())
            sim = SimulatedCluster(ClusterState.model_validate(raw["state"]), next_id=raw["nextId"])
        else:
            sim = SimulatedCluster(ClusterState(name=self.cluster))
        self._sync_nodes(sim)
        sim.refresh(self.clock())
        return sim

    def _sync_nodes(self, sim: SimulatedCluster) -> None:
        """The spec's pools are the simulator's hardware: add new nodes, drop removed ones
        (a removed node's jobs are lost, as on a real cluster)."""
        wanted = {n.name: n for n in nodes_from_spec(self.spec)}
        have = {n.name: n for n in sim.state.nodes}
        nodes = []
        for name, node in wanted.items():
            old = have.get(name)
            nodes.append(node if old is None or old.gpus != node.gpus else old)
        sim.state.nodes = nodes
        alive = set(wanted)
        sim.state.jobs = [j for j in sim.state.jobs
                          if all(r.node in alive for r in j.replicas if r.node)]

    def _save(self, sim: SimulatedCluster) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        body = {"nextId": sim.next_id, "state": sim.state.model_dump(mode="json", by_alias=True)}
        tmp.write_text(json.dumps(body, indent=1))
        os.replace(tmp, self.path)  # atomic: a crash leaves the old or the new state

    def observe(self) -> ClusterState:
        sim = self._load()
        self._save(sim)
        return sim.state

    def execute(self, action: Action, *, plan_id: str) -> ActionResult:
        sim = self._load()
        result = sim.execute(action, plan_id=plan_id, now=self.clock())
        self._save(sim)
        return result

    def forecast(self, actions: Sequence[Action], *, now: datetime) -> list[datetime | None]:
        """Fan-out estimates: ``now`` for a submit that fits at once, else unknown (None)."""
        sim = self._load()
        return [now if a.op == Op.SUBMIT and sim.fits_now(a) else None for a in actions]
