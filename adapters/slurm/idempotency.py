"""Has this plan already submitted this workload? Answered without re-reading the queue each time.

``submit`` must never double a job: a retried apply, or one that crashed after sbatch
returned, finds the job its plan already created (tagged with workload and plan id)
and returns it. Reading the whole queue before every sbatch does that, but squeue
reads every job slurmctld remembers, so an apply of 1,000 submissions on a busy
cluster would pay a thousand full reads (measured: 27 ms each with ~1,500 remembered
jobs, more than twice the sbatch itself).

So the adapter reads the queue once per plan and keeps, per plan id, which workloads
(and, for fan-out, which candidates of a workload) have a job that is active or
COMPLETED. A completed one counts because resubmitting it would run finished work twice
(a resumed apply whose job was short); a job that failed,
timed out or was cancelled is submitted again, as a retry of the same decision. Why
this is as safe as a read before every sbatch:

- only this plan creates jobs tagged with its plan id, and the index records every
  job id sbatch returns;
- an sbatch that fails ambiguously (timeout, controller restart: the job may exist)
  drops the plan's entry, so the next attempt reads the queue again;
- a hit is confirmed with a cheap ``squeue -j ID``: a job that has since failed, or
  that Slurm has forgotten, is submitted again, as a fresh read would do;
- a new process (restart after a crash) starts with an empty index, and entries
  older than ``ttl`` are read again.

Two processes applying the same plan at once are not guarded here (nor were they by a
read before sbatch: check-then-act races); the store's leader lease excludes that.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from adapters.slurm.parse import QueueRow, job_state
from adapters.slurm.tags import parse_tag
from specs.snapshot import JobState


@dataclass
class _Entry:
    loaded: float
    # (workload, fan-out candidate or None) -> job id
    jobs: dict[tuple[str, str | None], str] = field(default_factory=dict)


class PlanIndex:
    def __init__(
        self,
        read_queue: Callable[[], list[QueueRow]],
        read_job: Callable[[str], QueueRow | None],
        *,
        ttl: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read_queue = read_queue
        self._read_job = read_job
        self._ttl = ttl
        self._clock = clock
        self._plans: dict[str, _Entry] = {}
        self._specs: _Entry | None = None  # active jobs by (workload@spec digest, candidate)

    def lookup(self, plan_id: str, workload: str, candidate: str | None = None) -> str | None:
        """The id of an active or completed job this plan already created for ``workload``
        (as fan-out ``candidate``)."""
        key = (workload, candidate)
        entry = self._plans.get(plan_id)
        if entry is None or self._clock() - entry.loaded > self._ttl:
            entry = self._load(plan_id)
            return entry.jobs.get(key)  # just read: no need to confirm
        job_id = entry.jobs.get(key)
        if job_id is None:
            return None
        row = self._read_job(job_id)
        if row is not None and _counts(row):
            return job_id
        del entry.jobs[key]
        return None

    def lookup_spec(
        self, workload: str, spec_digest: str, candidate: str | None = None
    ) -> str | None:
        """The id of an active job of ``workload`` submitted for the same spec by any plan:
        a repeat of the submission (two applies of plans made apart, in any order)."""
        key = (f"{workload}@{spec_digest}", candidate)
        entry = self._specs
        if entry is None or self._clock() - entry.loaded > self._ttl:
            entry = self._specs = self._load_specs()
            return entry.jobs.get(key)
        job_id = entry.jobs.get(key)
        if job_id is None:
            return None
        row = self._read_job(job_id)
        if row is not None and job_state(row.state, has_nodes=bool(row.nodes)).active:
            return job_id
        del entry.jobs[key]
        return None

    def record(
        self,
        plan_id: str,
        workload: str,
        job_id: str,
        candidate: str | None = None,
        spec_digest: str | None = None,
    ) -> None:
        entry = self._plans.get(plan_id)
        if entry is not None:
            entry.jobs[(workload, candidate)] = job_id
        if self._specs is not None and spec_digest is not None:
            self._specs.jobs[(f"{workload}@{spec_digest}", candidate)] = job_id

    def forget(self, plan_id: str) -> None:
        """After an ambiguous failure: the next lookup reads the queue again."""
        self._plans.pop(plan_id, None)
        self._specs = None

    def _load_specs(self) -> _Entry:
        entry = _Entry(loaded=self._clock())
        for row in self._read_queue():
            tag = parse_tag(row.comment)
            if tag is None or tag.spec_digest is None:
                continue
            if job_state(row.state, has_nodes=bool(row.nodes)).active:
                entry.jobs.setdefault(
                    (f"{tag.workload}@{tag.spec_digest}", tag.candidate), row.job_id
                )
        return entry

    def _load(self, plan_id: str) -> _Entry:
        entry = _Entry(loaded=self._clock())
        completed: dict[tuple[str, str | None], str] = {}
        for row in self._read_queue():
            tag = parse_tag(row.comment)
            if tag is None or tag.plan_id != plan_id or not _counts(row):
                continue
            key = (tag.workload, tag.candidate)
            if job_state(row.state, has_nodes=bool(row.nodes)).active:
                entry.jobs.setdefault(key, row.job_id)
            else:
                completed.setdefault(key, row.job_id)
        entry.jobs = completed | entry.jobs  # an active job wins over a completed one
        self._plans[plan_id] = entry
        return entry


def _counts(row: QueueRow) -> bool:
    """The job stands for the plan's submission: still on the cluster, or ran to the end."""
    state = job_state(row.state, has_nodes=bool(row.nodes))
    return state.active or state is JobState.COMPLETED
