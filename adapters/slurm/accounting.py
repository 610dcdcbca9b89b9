"""Usage from Slurm's accounting (``sacct``): the runs of our jobs, however rarely observed.

``squeue`` forgets a job ``MinJobAge`` after it ends (five minutes by default), so a job
that started and ended between two observations would be invisible to usage. With
slurmdbd, ``sacct`` remembers: every run of every job that overlapped a time window,
with its start, end and allocated GPUs (``AllocTRES``: ``gres/gpu=N`` over all its nodes,
and ``gres/gpu:TYPE=N`` when the site accounts GPU types separately).

What this module knows about Slurm 22.05's accounting (all tried on the local cluster):

- ``-X`` keeps the allocation row (no ``.batch``/``.extern`` steps); ``-D`` lists every
  run of a requeued job, each with its own start and end, so each is counted once;
- times are read as epoch seconds (``SLURM_TIME_FORMAT=%s``; ``-S``/``-E`` are wall-clock
  times in ``TZ``, which is UTC here); a running job's end is ``Unknown``, a job that
  never started has no start and is skipped;
- the ``Comment`` (our tag) is stored only when a job ends, so a running job's tag is
  read from ``squeue`` (the adapter joins them by job id); the job name alone is not
  trusted (names are not unique);
- fields are split on a separator nobody types, and ``Comment`` comes last, so a comment
  with the separator in it cannot shift the other columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from adapters.slurm.eviction import observed_state
from adapters.slurm.parse import job_state, parse_time_limit
from adapters.slurm.tags import Tag, parse_tag
from specs.snapshot import JobRun

SEP = "\x1f"
FIELDS = ("JobIDRaw", "State", "Start", "End", "AllocTRES", "Timelimit", "NodeList", "Comment")
ENV = {"TZ": "UTC", "SLURM_TIME_FORMAT": "%s"}


def sacct_argv(since: datetime, until: datetime) -> list[str]:
    """Every run of every job that overlapped ``[since, until]``, one line each."""
    fmt = "%Y-%m-%dT%H:%M:%S"
    return [
        "sacct",
        "-X",
        "-D",
        "-a",
        "-n",
        "-P",
        f"--delimiter={SEP}",
        "-S",
        since.astimezone(UTC).strftime(fmt),
        "-E",
        until.astimezone(UTC).strftime(fmt),
        "--format=" + ",".join(FIELDS),
    ]


@dataclass(frozen=True)
class SacctRow:
    job_id: str
    state: str  # first word: "CANCELLED by 0" -> CANCELLED
    start: datetime | None
    end: datetime | None
    gpus: int
    gpu_type: str | None
    time_limit: int | None
    nodes: str
    comment: str


def parse_sacct(text: str) -> list[SacctRow]:
    rows = []
    for line in text.splitlines():
        cells = line.split(SEP, len(FIELDS) - 1)
        if len(cells) != len(FIELDS):
            continue  # a blank or foreign line: sacct prints nothing else with -n -P
        job_id, state, start, end, tres, limit, nodes, comment = cells
        gpus, gpu_type = parse_gpu_tres(tres)
        rows.append(
            SacctRow(
                job_id=job_id.strip(),
                state=(state.split() or ["UNKNOWN"])[0],
                start=_epoch(start),
                end=_epoch(end),
                gpus=gpus,
                gpu_type=gpu_type,
                time_limit=parse_time_limit(limit),
                nodes=nodes.strip(),
                comment=comment.strip(),
            )
        )
    return rows


def parse_gpu_tres(tres: str) -> tuple[int, str | None]:
    """(GPUs, their type if the site accounts one type) from ``AllocTRES``."""
    total, types = 0, {}
    for item in tres.split(","):
        key, sep, value = item.partition("=")
        if not sep or not value.isdigit():
            continue
        if key == "gres/gpu":
            total = int(value)
        elif key.startswith("gres/gpu:"):
            types[key.removeprefix("gres/gpu:")] = int(value)
    gpu_type = next(iter(types)) if len(types) == 1 else None
    return total or sum(types.values()), gpu_type


def runs_of(rows: list[SacctRow], running_tags: Mapping[str, Tag]) -> list[JobRun]:
    """The runs of our jobs: tagged in accounting (ended jobs) or, for a job still running,
    by the tag ``squeue`` shows for it."""
    out = []
    for row in rows:
        tag = parse_tag(row.comment) or running_tags.get(row.job_id)
        if tag is None or row.start is None:
            continue
        state = observed_state(
            job_state(row.state, has_nodes=bool(row.nodes) and row.nodes != "None"), tag
        )
        # a run with an end is over, whatever the job's state: a requeued job's earlier
        # run reads REQUEUED (an active state) yet ended when Slurm took it back
        ended = row.end
        out.append(
            JobRun(
                job=row.job_id,
                workload=tag.workload,
                started_at=row.start,
                ended_at=ended,
                gpus=row.gpus,
                gpu_type=row.gpu_type,
                state=state,
                time_limit=row.time_limit,
                spec_digest=tag.spec_digest,
                plan_id=tag.plan_id,
            )
        )
    return out


def _epoch(text: str) -> datetime | None:
    text = text.strip()
    return datetime.fromtimestamp(int(text), UTC) if text.isdigit() else None
