"""What the simulator engine looks up while it works on a cluster's state: jobs by id and by
workload, GPUs held per node, and which waiting jobs are moves pinned to their new nodes."""

from __future__ import annotations

from specs.snapshot import ClusterState, Job, JobState


def pinned_waiting(job: Job) -> bool:
    """A job of ours waiting for nodes named for it: a move whose nodes were not free."""
    return (
        job.state == JobState.PENDING
        and job.workload is not None
        and bool(job.replicas)
        and all(r.node is not None for r in job.replicas)
    )


class Index:
    """Lookups over a cluster's state for a run of actions: jobs by id and by workload, GPUs
    used per node by jobs that hold them, and the jobs removed so far (by object id)."""

    def __init__(self, state: ClusterState) -> None:
        self.nodes = {n.name: n for n in state.nodes}
        self.by_id: dict[str, Job] = {}
        self.by_workload: dict[str, list[Job]] = {}
        self.used: dict[str, int] = {n.name: 0 for n in state.nodes}
        self.removed: set[int] = set()
        self.moved: list[Job] = []  # moved jobs waiting for their new nodes, in move order
        for j in state.jobs:
            self.add(j)

    def add(self, job: Job) -> None:
        self.by_id[job.id] = job
        if job.workload is not None:
            self.by_workload.setdefault(job.workload, []).append(job)
        self.hold(job)

    def remove(self, job: Job) -> None:
        self.release(job)
        self.by_id.pop(job.id, None)
        if job.workload is not None:
            self.by_workload[job.workload].remove(job)
        self.removed.add(id(job))

    def hold(self, job: Job) -> None:
        if job.state.holds_gpus:
            for r in job.replicas:
                if r.node in self.used:
                    self.used[r.node] += r.gpus

    def release(self, job: Job) -> None:
        if job.state.holds_gpus:
            for r in job.replicas:
                if r.node in self.used:
                    self.used[r.node] -= r.gpus
