"""KAI's ordering rules, one named sort key per rule, used by every engine and step.

- :func:`queue_order` — which queue (department or project) is served next: the one that
  stays within its deserved quota with the job, then higher rank, then the smaller share
  of its allocatable share (allocated + the job, then without it), then creation order;
- :func:`victim_queue_order` — which queue gives GPUs back first (the largest key first):
  the same rule read backwards, with the victims already taken from it;
- :func:`job_order` — inside a project: higher priority, then gangs below their minimum,
  at it, above it, then older, then name;
- :class:`VictimOrder` — job order reversed, for a min-heap of candidate victims (lowest
  priority and newest first);
- :func:`job_id_order` — cluster job ids in numeric order ("9" before "10"), and
  :func:`last_completed` by it;
- :func:`round_winner` — which of a fan-out workload's candidates won their round.

Sort keys rather than comparators: Python sorts and heaps compare tuples, and a key
computed once per item is cheaper than a comparison function called per pair.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from specs.snapshot import Job, JobState

if TYPE_CHECKING:  # the rules read these records; the records do not need the rules
    from solvers.problem import JobRequest, Queue

QueueKey = tuple[int, int, int, float, float, float, int]
JobKey = tuple[int, int, datetime, str]
T = TypeVar("T")

# a queue with no share at all compares by allocation scaled far above any real share
_NO_SHARE_SCALE = 1000

# Starts within this much of each other are the same start: a plan's forecasts are read a
# moment apart (the cluster's backfill view, then a test submission per candidate), and
# fan-out candidates that started between two observations started "at once"; a second
# ticking between two reads must not decide which candidates run, or which one wins.
SAME_START = timedelta(minutes=1)


def queue_order(
    q: Queue,
    *,
    allocated: float,
    request: float,
    share: float,
    rank: int,
    within: bool | None = None,
) -> QueueKey:
    """Queue order for a queue holding ``allocated`` GPUs that asks ``request`` more, with
    ``share`` = max(deserved, fair share) capped by the limit; ``rank`` is creation order.
    ``within``: whether the request stays within deserved, where the caller knows better
    than the sums (per-GPU-type quotas). Smaller first."""
    if share > 0:
        with_job, without = (allocated + request) / share, allocated / share
    else:
        with_job = without = allocated * _NO_SHARE_SCALE
    return (
        0 if (allocated + request <= q.deserved if within is None else within) else 1,
        -q.priority,
        1 if share == 0 and request > 0 else 0,  # no share at all: last
        with_job,
        without,
        share,
        rank,
    )


def victim_queue_order(
    q: Queue, *, allocated: float, taken: float, share: float, rank: int
) -> QueueKey:
    """Reverse queue order for victims: a queue holding ``allocated`` GPUs of which
    ``taken`` are already (or would be) evicted. The largest key gives first."""
    return victim_queue_keys(q, allocated=allocated, share=share, rank=rank)(taken)


def victim_queue_keys(
    q: Queue, *, allocated: float, share: float, rank: int
) -> Callable[[float], QueueKey]:
    """:func:`victim_queue_order` of one queue as a function of ``taken`` alone, for a
    search that asks it again after every victim (the rest is fixed while it runs)."""
    first = (0 if allocated <= q.deserved else 1, -q.priority)
    if share > 0:
        without = allocated / share

        def key(taken: float) -> QueueKey:
            return (*first, 0, (allocated - taken) / share, without, share, rank)

    else:
        none = 1 if allocated > 0 else 0
        without = allocated * _NO_SHARE_SCALE

        def key(taken: float) -> QueueKey:
            return (*first, none, (allocated - taken) * _NO_SHARE_SCALE, without, share, rank)

    return key


def job_order(job: JobRequest, placed: int = 0) -> JobKey:
    """Job order inside a project, for a job holding ``placed`` replicas in this pass.
    Smaller first."""
    tier = 0 if placed < job.min_replicas else (1 if placed == job.min_replicas else 2)
    return (-job.priority, tier, job.created, job.key)


class VictimOrder:
    """Job order reversed: in a min-heap, the *last* job in job order comes out first."""

    __slots__ = ("key",)

    def __init__(self, job: JobRequest, placed: int) -> None:
        self.key = job_order(job, placed)

    def __lt__(self, other: VictimOrder) -> bool:
        return other.key < self.key


def job_id_order(job_id: str) -> tuple[int, int, str]:
    """Numeric job ids in numeric order ("9" before "10"), others after them by name."""
    return (0, int(job_id), "") if job_id.isdigit() else (1, 0, job_id)


def last_completed(jobs: Iterable[Job]) -> dict[str, Job]:
    """The newest completed job (by job id) of each workload among ``jobs``."""
    last: dict[str, Job] = {}
    for job in jobs:
        key = job.workload
        if key is None or job.state != JobState.COMPLETED:
            continue
        if key not in last or job_id_order(job.id) > job_id_order(last[key].id):
            last[key] = job
    return last


def round_winner(candidates: Iterable[T], facts: Callable[[T], tuple[datetime, float, str]]) -> T:
    """The fan-out candidate that won its round, of those that ran: the earliest started,
    and of those started together (``SAME_START`` apart) the cheaper to run (job ids of
    two clusters say nothing), then the lower job id. ``facts``: a candidate's start, its
    cost an hour, its job id."""
    known = [(facts(c), c) for c in candidates]
    first = min(started for (started, _, _), _ in known)
    together = [(f, c) for f, c in known if f[0] - first <= SAME_START]
    return min(together, key=lambda fc: (fc[0][1], job_id_order(fc[0][2])))[1]
