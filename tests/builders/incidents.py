"""What befalls a cluster between two plans, injected into the file-backed simulator: a
node fails (its jobs end as Slurm ends them, NODE_FAIL) or comes back, a job of ours
fails. The simulator has no failures of its own; these change its state file as the
cluster would have, and its accounting closes the runs they end. And :class:`Flaky`, an
adapter whose cluster stops answering while ``down`` is set."""

from __future__ import annotations

from datetime import datetime

from adapters.base import ActionResult, Adapter, TemporaryError
from adapters.simulator.adapter import SimulatorAdapter
from adapters.simulator.engine import SimulatedCluster
from specs.actions import Action
from specs.snapshot import ClusterState, Job, JobState, Refusal


class Flaky:
    """An adapter that fails like a cluster that is down while ``down`` is set."""

    def __init__(self, inner: Adapter) -> None:
        self.inner = inner
        self.cluster = inner.cluster
        self.down = False

    def observe(self) -> ClusterState:
        if self.down:
            raise TemporaryError("connection refused")
        return self.inner.observe()

    def execute(self, action: Action, *, plan_id: str) -> ActionResult:
        if self.down:
            raise TemporaryError("connection refused")
        return self.inner.execute(action, plan_id=plan_id)


def node_down(sim: SimulatorAdapter, which: int, spare: str, now: datetime) -> str | None:
    """Node ``which`` (modulo the usable ones, ``spare`` never) fails: its jobs end as
    NODE_FAIL. Its name, or None when there is none to fail."""
    with sim.change() as cluster:
        usable = [n for n in cluster.state.nodes if n.name != spare and n.state != "down"]
        if not usable:
            return None
        node = usable[which % len(usable)]
        node.state = "down"
        for job in cluster.state.jobs:
            if job.state.active and any(r.node == node.name for r in job.replicas):
                _end(cluster, job, JobState.NODE_FAIL, now)
        return node.name


def node_up(sim: SimulatorAdapter, which: int) -> str | None:
    """A failed node (``which``, modulo the failed ones) is back, empty."""
    with sim.change() as cluster:
        down = [n for n in cluster.state.nodes if n.state == "down"]
        if not down:
            return None
        node = down[which % len(down)]
        node.state = "idle"
        return node.name


def job_fails(sim: SimulatorAdapter, which: int, now: datetime) -> str | None:
    """A running job of ours (``which``, modulo them) exits with an error."""
    with sim.change() as cluster:
        ours = [j for j in cluster.state.jobs if j.workload and j.state is JobState.RUNNING]
        if not ours:
            return None
        job = ours[which % len(ours)]
        _end(cluster, job, JobState.FAILED, now, exit_code="1:0")
        return job.id


def _end(
    cluster: SimulatedCluster,
    job: Job,
    state: JobState,
    now: datetime,
    exit_code: str | None = None,
) -> None:
    cluster._close_run(job, now, state)
    job.state, job.ended_at, job.exit_code = state, now, exit_code


class Refusing:
    """An adapter whose cluster refuses to act on the jobs in ``refuse`` (as Slurm denies
    an ``scancel`` of a job another user owns): those actions fail, the rest run."""

    def __init__(self, inner: Adapter) -> None:
        self.inner = inner
        self.cluster = inner.cluster
        self.refuse: set[str] = set()
        self.refused: list[str] = []  # the jobs it refused to act on, in order

    def observe(self) -> ClusterState:
        return self.inner.observe()

    def execute(self, action: Action, *, plan_id: str) -> ActionResult:
        if action.job in self.refuse:
            self.refused.append(action.job)
            return ActionResult(ok=False, message=f"job {action.job}: Access/permission denied")
        return self.inner.execute(action, plan_id=plan_id)


def refusal(job: str, at: datetime, *, op: str = "cancel", count: int = 1) -> Refusal:
    """The store's record that the cluster refused ``op`` on job ``job`` of cluster sim,
    ``count`` times in a row, the last at ``at`` (as Slurm denies a job another user owns)."""
    return Refusal(
        cluster="sim",
        job=job,
        op=op,
        count=count,
        at=at,
        message=f"job {job}: Access/permission denied",
    )
