"""When and where Slurm would start a request: ``sbatch --test-only``.

rv-style fan-out submits one workload to several partitions or clusters and keeps the
first to run; choosing the candidates needs Slurm's own backfill estimate. ``sbatch
--test-only`` gives it without queueing anything, printing to stderr::

    sbatch: Job 17 to start at 2026-11-22T07:10:39 using 2 processors on nodes a100-[1-2] in partition gpu-a100

and exiting 1 with "Requested node configuration is not available" when the request can
never run there. Cost to know about: every call consumes a job id (the number in the
message is real and is skipped by the next submission), and it is one controller RPC;
do not call it in a tight loop on a busy production controller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from adapters.slurm import hostlist
from adapters.slurm.parse import parse_time

Never = Literal["never"]
NEVER: Never = "never"

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
