"""When and where Slurm would start a request: ``sbatch --test-only``.

rv-style fan-out submits one workload to several partitions or clusters and keeps the
first to run; choosing the candidates needs Slurm's own backfill estimate. ``sbatch
--test-only`` gives it without queueing anything, printing to stderr::

    sbatch: Job 17 to start at 2026-11-22T07:10:39 using 2 processors on nodes a100-[1-2] in partition gpu-a100

and exiting 1 with "Requested node configuration is not available" when the request can
never run there. Cost to know about: every call consumes a job id (the number in the
message is real and is skipped by the next submission), and it is one controller RPC;
do not call it in a tight loop on a busy production controller.

What test-only cannot tell (measured on 22.05): whether a job with ``--time-min`` would
be *backfilled*. It treats every higher-priority pending job as holding its nodes from
now on for its whole time limit, so a request that the backfill scheduler would start
at once in the gap before that job's reservation gets the same late estimate as
without ``--time-min``. The gap is visible elsewhere: squeue shows a pending job's
expected start (``%S``) and the nodes it is scheduled on (``%Y``). :func:`backfill_fits`
judges a backfill request from those reservations and the free GPUs per node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from adapters.slurm import hostlist
from adapters.slurm.parse import parse_time
from specs.actions import NEVER, Never
from specs.snapshot import ClusterState, Reservation

_WILL_START = re.compile(
    r"Job (?P<job>\d+) to start at (?P<start>\S+) using \d+ processors on nodes (?P<nodes>\S+)"
    r" in partition (?P<partition>\S+)"
)
_IMPOSSIBLE = re.compile(
    r"Requested node configuration is not available|Requested partition configuration not available"
    r"|Node count specification invalid",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class StartForecast:
    start: datetime  # aware UTC
    nodes: tuple[str, ...]
    partition: str


def parse_test_only(text: str) -> StartForecast | Never | None:
    """A forecast, NEVER, or None when the output says neither (the caller raises)."""
    m = _WILL_START.search(text)
    if m:
        start = parse_time(m.group("start"))
        if start is not None:
            return StartForecast(
                start, tuple(hostlist.expand(m.group("nodes"))), m.group("partition")
            )
    if _IMPOSSIBLE.search(text):
        return NEVER
    return None


def parse_reservations(text: str) -> dict[str, datetime]:
    """``squeue -h -t PD -o "%i|%S|%Y"`` to node -> the earliest expected start of a pending
    job scheduled on it (the end of the backfill window there). Jobs without a planned
    start or node list reserve nothing."""
    out: dict[str, datetime] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != 3:
            continue
        start = parse_time(parts[1])
        if start is None or parts[2].strip() in ("", "(null)"):
            continue
        try:
            nodes = hostlist.expand(parts[2].strip())
        except ValueError:
            continue
        for node in nodes:
            if node not in out or start < out[node]:
                out[node] = start
    return out


def backfill_fits(
    state: ClusterState,
    reservations: dict[str, datetime],
    now: datetime,
    *,
    partition: str | None,
    gpu_type: str | None,
    nodes: int,
    gpus_per_node: int,
    time_min: int,
) -> bool:
    """Could ``nodes`` nodes of ``partition`` start the request now and keep it ``time_min``
    seconds before a pending job's reservation, or a reservation of the node itself (an
    announced maintenance), needs them? GPUs only, and a node whose every CPU is taken
    (``full``) has no room; memory is not modelled."""
    used: dict[str, int] = {}
    for job in state.jobs:
        if job.state.holds_gpus:
            for r in job.replicas:
                if r.node:
                    used[r.node] = used.get(r.node, 0) + r.gpus
    fit = 0
    for node in state.nodes:
        if not node.schedulable or (partition is not None and node.partition != partition):
            continue
        if node.full:  # every CPU taken: nothing starts here, whatever GPUs are free
            continue
        if gpu_type is not None and node.gpu_type not in (None, gpu_type):
            continue
        if node.gpus - used.get(node.name, 0) < gpus_per_node:
            continue
        ends = reservations.get(node.name)
        if ends is not None and (ends - now).total_seconds() < time_min:
            continue
        if any(_meets(w, now, time_min) for w in node.reservations):
            continue  # an announced maintenance (or other reservation) comes too soon
        fit += 1
    return fit >= nodes


def _meets(window: Reservation, now: datetime, seconds: int) -> bool:
    """A job started now and running ``seconds`` would run into ``window``."""
    return not window.over(now) and (window.start - now).total_seconds() < seconds
