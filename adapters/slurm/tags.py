"""How a Slurm job says it belongs to the control plane, and to which workload and plan.

Slurm keeps no labels, so the identity travels in the job's ``--comment``:
``cp:v1;workload=chem/md-run;plan=<id>[;spec=<digest>][;ckpt=USR1@600][;cand=<candidate>]``
``[;elastic=1]``, and ``;evicted=<plan id>`` once a plan preempted it with its checkpoint
signal. ``elastic=1``: its tasks run on when a node is taken from it (shrink.py).
The comment survives a crash of the control plane, a restart of slurmctld and a requeue,
which is what lets ``observe`` recognise our jobs and ``execute`` refuse to touch anybody
else's; the spec digest lets a resubmission of the same workload spec find the job
another plan already made.

The tag has no spaces on purpose: ``scontrol -o`` prints one ``key=value`` line per job
and a comment with spaces would read as extra keys. Values are percent-encoded, so a
``;``, ``=``, ``%`` or blank inside a plan id cannot break the format either. The job
name (``cp.chem.md-run``) is for people reading ``squeue`` and a cheap server-side
filter; it is never trusted alone, because names are not unique.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

PREFIX = "cp:v1"
_SAFE = "/@:-._~"  # characters left readable; everything else is %XX
_SPLIT = re.compile(r"[;\s]+")  # ';' is ours; whitespace is tolerated (hand-written tags)


@dataclass(frozen=True)
class Tag:
    workload: str  # project/name
    plan_id: str | None = None
    # "SIGNAL@SECONDS" when the workload checkpoints on a signal: preempt then requeues
    # rather than cancels, and a move can re-create the --signal option from the job alone
    checkpoint: str | None = None
    # the fan-out candidate this job was submitted as: one plan may submit several jobs of
    # one workload, one per candidate, and a resumed apply must find each of them
    candidate: str | None = None
    # the digest of the workload spec it runs (specs.models.WorkloadSpec.digest)
    spec_digest: str | None = None
    # the plan that preempted it: it winds down within its checkpoint grace (eviction.py)
    evicted: str | None = None
    # launched so that its tasks run on when a node is taken away: shrunk in place (shrink.py)
    elastic: bool = False


def format_tag(tag: Tag) -> str:
    """The ``--comment`` value for a job we create."""
    parts = [PREFIX, f"workload={quote(tag.workload, safe=_SAFE)}"]
    if tag.plan_id is not None:
        parts.append(f"plan={quote(tag.plan_id, safe=_SAFE)}")
    if tag.checkpoint is not None:
        parts.append(f"ckpt={quote(tag.checkpoint, safe=_SAFE)}")
    if tag.candidate is not None:
        parts.append(f"cand={quote(tag.candidate, safe=_SAFE)}")
    if tag.spec_digest is not None:
        parts.append(f"spec={quote(tag.spec_digest, safe=_SAFE)}")
    if tag.evicted is not None:
        parts.append(f"evicted={quote(tag.evicted, safe=_SAFE)}")
    if tag.elastic:
        parts.append("elastic=1")
    return ";".join(parts)


def parse_tag(comment: str | None) -> Tag | None:
    """Our tag from a job comment, or None for anything that is not unmistakably ours.

    Unknown keys are ignored (a newer v1 writer may add some); a comment without the
    exact ``cp:v1`` marker or without a ``project/name`` workload is foreign.
    """
    if not comment:
        return None
    tokens = [t for t in _SPLIT.split(comment.strip()) if t]
    if not tokens or tokens[0] != PREFIX:
        return None
    fields: dict[str, str] = {}
    for token in tokens[1:]:
        key, sep, value = token.partition("=")
        if sep and key not in fields:
            fields[key] = unquote(value)
    workload = fields.get("workload", "")
    project, slash, name = workload.partition("/")
    if not (project and slash and name) or "/" in name:
        return None
    return Tag(
        workload=workload,
        plan_id=fields.get("plan") or None,
        checkpoint=fields.get("ckpt") or None,
        candidate=fields.get("cand") or None,
        spec_digest=fields.get("spec") or None,
        evicted=fields.get("evicted") or None,
        elastic=fields.get("elastic") == "1",
    )


def job_name(workload: str) -> str:
    """``chem/md-run`` -> ``cp.chem.md-run``: readable in squeue, usable with ``squeue --name``."""
    return "cp." + workload.replace("/", ".")
