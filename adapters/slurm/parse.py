"""Reading what sinfo, squeue and scontrol print, defensively.

Output formats are chosen so that parsing cannot be fooled by what users put into job
names and comments: squeue and sinfo print with ASCII record/unit separators (``\\x1e``,
``\\x1f``) that no sane name contains, the free-text comment comes last and absorbs any
surplus separators, and records are split on the record separator rather than on
newlines. ``--json`` would be just as safe, but its schema changes with every Slurm
release and 22.05 ignores its filters, while these % formats have been stable for a
decade.

Times: the adapter runs every command with ``TZ=UTC`` and ``SLURM_TIME_FORMAT=standard``,
so the zone-less timestamps Slurm prints are UTC by construction; :func:`parse_time`
attaches that zone. Anything unexpected (``N/A``, ``Unknown``, a new spelling) becomes
None rather than an exception: one odd job must not blind the whole observe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from adapters.slurm import hostlist
from specs.durations import parse_duration
from specs.snapshot import JobState, NodeState

RS, US = "\x1e", "\x1f"

# ------------------------------------------------------------------------------ squeue

# %i id (123 or 123_4 for array tasks)  %A unique id (what scontrol calls JobId)
# %T long state  %j name  %P partition  %D node count  %N allocated nodes
# %b GRES per node  %V submit time  %S start time  %l time limit  %r reason  %k comment
# %n the nodes it asked for (--nodelist: where a plan placed it), before it gets them; %k
# (the comment, our tag) stays last: it may hold the separator, and the split keeps it whole
_SQUEUE_FIELDS = (
    "%i", "%A", "%T", "%j", "%P", "%D", "%N", "%b", "%V", "%S", "%l", "%r", "%n", "%k"
)  # fmt: skip
SQUEUE_FORMAT = RS + US.join(_SQUEUE_FIELDS)


@dataclass(frozen=True)
class QueueRow:
    job_id: str
    unique_id: str
    state: str
    name: str
    partition: str | None
    num_nodes: int
    nodes: list[str]
    gres_per_node: str | None
    submitted: datetime | None
    started: datetime | None
    time_limit: int | None
    reason: str | None
    comment: str | None
    requested: list[str] = field(default_factory=list)  # --nodelist, while it waits


def _null(text: str) -> str | None:
    text = text.strip()
    return None if text in ("", "(null)", "N/A", "None", "n/a") else text


def _nodes(text: str) -> list[str]:
    """A hostlist expression's node names; none when empty or unreadable."""
    if _null(text) is None:
        return []
    try:
        return hostlist.expand(text.strip())
    except ValueError:
        return []


def parse_squeue(text: str) -> list[QueueRow]:
    rows = []
    for record in text.split(RS)[1:]:
        cols = record.rstrip("\n").split(US, len(_SQUEUE_FIELDS) - 1)
        if len(cols) != len(_SQUEUE_FIELDS):
            continue  # a truncated record: skip it rather than misread the rest
        (
            jid,
            uid,
            state,
            name,
            part,
            nnodes,
            nodes,
            gres,
            sub,
            start,
            limit,
            reason,
            asked,
            comment,
        ) = cols
        node_names, requested = _nodes(nodes), _nodes(asked)
        rows.append(
            QueueRow(
                job_id=jid.strip(),
                unique_id=uid.strip() or jid.strip(),
                state=state.strip(),
                name=name,
                partition=_null(part),
                num_nodes=int(nnodes) if nnodes.strip().isdigit() else max(len(node_names), 1),
                nodes=node_names,
                gres_per_node=_null(gres),
                submitted=parse_time(sub),
                started=parse_time(start),
                time_limit=parse_time_limit(limit),
                reason=_null(reason),
                comment=_null(comment),
                requested=requested,
            )
        )
    return rows


# ------------------------------------------------------------------------------- sinfo

# %a: the partition's availability (up, down, drain, inact), and %l its time limit
# (MaxTime), per node-and-partition row
SINFO_FORMAT = RS + US.join(("%N", "%P", "%T", "%G", "%a", "%l"))


@dataclass
class NodeRow:
    name: str
    partitions: list[str] = field(default_factory=list)
    state: str = ""
    gres: str | None = None
    # partitions of the node that take no new jobs: Slurm queues a job sent there
    # (PartitionDown) however idle the node is
    closed: list[str] = field(default_factory=list)
    # each partition's time limit in seconds (MaxTime; absent: unlimited or not shown)
    limits: dict[str, int] = field(default_factory=dict)


def parse_sinfo(text: str) -> list[NodeRow]:
    """One row per node; ``sinfo -N`` repeats a node once per partition it belongs to.

    Records without the availability column (an older format) count as available, and
    without the time limit column as unlimited.
    """
    nodes: dict[str, NodeRow] = {}
    for record in text.split(RS)[1:]:
        cols = record.rstrip("\n").split(US)
        if len(cols) not in (4, 5, 6):
            continue
        name, part, state, gres, avail, limit = (c.strip() for c in [*cols, "up", ""][:6])
        if not name:
            continue
        row = nodes.setdefault(name, NodeRow(name=name, state=state, gres=_null(gres)))
        part = part.rstrip("*")  # '*' marks the default partition
        if part and part not in row.partitions:
            row.partitions.append(part)
            if avail.lower() not in ("up", ""):
                row.closed.append(part)
            seconds = parse_time_limit(limit) if limit else None
            if seconds is not None:
                row.limits[part] = seconds
    return list(nodes.values())


# --------------------------------------------------------------------------- scontrol


@dataclass
class Allocation:
    """GPUs a job holds on each node (from ``scontrol -o -d show job``)."""

    per_node: dict[str, int] = field(default_factory=dict)
    gpu_type: str | None = None
    per_job: int | None = None  # TresPerJob (``--gpus=N``), for jobs without a per-node request


# The detail block of -d: "Nodes=a100-[1-2] CPU_IDs=0-1 Mem=1024 GRES=gpu:a100_80:3(IDX:0-2)".
# Anchoring on CPU_IDs and Mem keeps a comment like "Nodes=x" from matching.
_DETAIL = re.compile(r"(?:^|\s)Nodes=(\S+) CPU_IDs=\S+ Mem=\d+ GRES=(\S*)")
_JOB_ID = re.compile(r"^JobId=(\d+)\s")
_TRES_PER_JOB = re.compile(r"\sTresPerJob=(\S+)")


def parse_allocations(text: str) -> dict[str, Allocation]:
    out: dict[str, Allocation] = {}
    for line in text.splitlines():
        m = _JOB_ID.match(line)
        if not m:
            continue
        alloc = Allocation()
        for nodes, gres in _DETAIL.findall(line):
            gpu_type, count = parse_gpu_gres(gres)
            alloc.gpu_type = alloc.gpu_type or gpu_type
            try:
                for node in hostlist.expand(nodes):
                    alloc.per_node[node] = count
            except ValueError:
                continue
        per_job = _TRES_PER_JOB.search(line)
        if per_job:
            gpu_type, count = parse_gpu_gres(per_job.group(1))
            alloc.gpu_type = alloc.gpu_type or gpu_type
            alloc.per_job = count or None
        out[m.group(1)] = alloc
    return out


# ----------------------------------------------------------------------------- fields

# gpu, gpu:2, gpu:a100_80, gpu:a100_80:2, gres:gpu:2 (22.05), gres/gpu=2, gres/gpu:a100_80=2 (23.x+)
_GPU = re.compile(r"^(?:gres[:/])?gpu(?::([^:=]+))?(?:[:=](\d+))?$")


def parse_gpu_gres(text: str | None) -> tuple[str | None, int]:
    """(GPU type, GPU count) of a GRES string; (None, 0) when it names no GPUs.

    Several GPU entries are summed; the type reported is the one with the most GPUs
    (a node with two GPU types is rare and the snapshot has one type per node).
    Socket and index annotations in parentheses are ignored.
    """
    if not text:
        return None, 0
    text = re.sub(r"\([^)]*\)", "", text)
    total, best_type, best_count = 0, None, -1
    for entry in text.split(","):
        m = _GPU.match(entry.strip())
        if not m:
            continue
        gpu_type, count = m.group(1), m.group(2)
        if count is None and gpu_type is not None and gpu_type.isdigit():
            gpu_type, count = None, gpu_type  # "gpu:2" is a count, not a type
        n = int(count) if count is not None else 1
        total += n
        if n > best_count:
            best_type, best_count = gpu_type, n
    return best_type, total


def parse_time(text: str) -> datetime | None:
    """A Slurm timestamp printed under ``TZ=UTC`` as an aware UTC datetime."""
    text = text.strip()
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def parse_time_limit(text: str) -> int | None:
    """``1:00:00``, ``2-00:00:00``, ``30:00`` in seconds; None for UNLIMITED and the like."""
    try:
        return parse_duration(text.strip())
    except ValueError:
        return None


# ------------------------------------------------------------------------------ states

_JOB_STATES = {s.value: s for s in JobState} | {
    # Slurm states the snapshot does not name, mapped to the closest one that keeps
    # the GPU accounting right (does it hold its nodes? is it still on the cluster?)
    "CONFIGURING": JobState.RUNNING,  # nodes allocated, booting
    "RESIZING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.COMPLETING,
    "STOPPED": JobState.SUSPENDED,
    "REQUEUE_FED": JobState.REQUEUED,
    "REQUEUE_HOLD": JobState.REQUEUED,
    "RESV_DEL_HOLD": JobState.PENDING,
    "BOOT_FAIL": JobState.NODE_FAIL,
    "DEADLINE": JobState.TIMEOUT,
    "OUT_OF_MEMORY": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "REVOKED": JobState.CANCELLED,
}


def job_state(text: str, *, has_nodes: bool) -> JobState:
    """Slurm's long job state; an unknown one counts as running if it holds nodes."""
    state = text.strip().upper().split("+")[0].split(" ")[0]
    known = _JOB_STATES.get(state)
    if known is not None:
        return known
    return JobState.RUNNING if has_nodes else JobState.PENDING


def node_state(text: str) -> NodeState:
    """sinfo's long (%T) or compact (%t) node state folded into the snapshot's five.

    Suffixes: ``*`` not responding (down); ``~``/``#``/``!``/``%`` power saving, which a
    cloud cluster resumes on demand, so the base state still holds; ``@``/``$``/``^`` a
    pending reboot or maintenance reservation: no new work (drain). Anything unknown is
    down, so the solver never plans onto a node Slurm would not use.
    """
    raw = text.strip().lower()
    if not raw:
        return "down"
    if raw.endswith("*") or "not_responding" in raw or "no_respond" in raw:
        return "down"
    words = set(re.split(r"[+\s]", raw.rstrip("~#!%@$^-*")))
    if any(w.startswith(("drain", "drng", "fail")) for w in words):
        return "drain"
    if (
        words & {"maint", "reserved", "resv", "reboot_requested", "reboot_issued", "reboot"}
        or raw[-1:] in "@$^"
    ):
        return "drain"
    if words & {
        "down",
        "inval",
        "unknown",
        "unk",
        "future",
        "futr",
        "boot",
        "powering_down",
        "powered_down",
        "power_down",
        "blocked",
        "npc",
    }:
        return "down"
    if words & {"allocated", "alloc"}:
        return "allocated"
    if words & {"mixed", "mix", "completing", "comp"}:
        return "mixed"  # completing: jobs winding down, the node still takes work
    if words & {"idle", "planned", "plnd", "powering_up", "pow_up"}:
        return "idle"
    return "down"
