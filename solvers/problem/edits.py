"""Which edits of a workload's spec its job follows as it runs, and which need a new job.

A job carries the digest of the spec version it was made of, and the store keeps every
version (``Snapshot.versions``), so an edit is known field by field (specs/diff.py).
Drift (solvers/drift.py) sorts the edits to running work by these sets. A completed job
is judged by them too: an edit made while it ran that it followed in place (a priority,
elastic replicas given back, a wider list of GPU types) was that job's own version, and
does not run the workload again once it completes.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from specs.diff import Change, changes
from specs.models import WorkloadSpec
from specs.snapshot import Job

# fields a running job cannot follow: a new job is needed
REPLACE = frozenset({"gpus", "command", "image", "walltime", "checkpoint", "namespace"})
# fields that constrain where it runs: a new job only if its pool no longer qualifies
PLACEMENT = frozenset({"gpuTypes", "minGpuMemoryGiB", "clusters", "nodePools"})


def fields_of(found: Iterable[Change]) -> set[str]:
    """The top-level fields of a list of changes (``checkpoint.grace`` is ``checkpoint``)."""
    return {f.split(".")[0].split("[")[0] for f, _, _ in found}


def forcing(
    fields: set[str], *, pool_qualifies: bool, ran: int, wanted: int, at_least: int, gang: bool
) -> set[str]:
    """Of the edited ``fields``, those a running job cannot follow: it runs ``ran``
    replicas in a pool the spec may still use or not (``pool_qualifies``), the spec now
    wants ``wanted`` of them, ``at_least`` to run, and it ran as a fixed gang (``gang``:
    none of its replicas may stop while the others run)."""
    out = fields & REPLACE
    if not pool_qualifies:
        out |= fields & PLACEMENT
    resized = fields & {"replicas", "minReplicas"}
    if resized and (at_least > ran or ("replicas" in fields and ran > wanted and gang)):
        out |= resized
    return out


def followed(old: WorkloadSpec, new: WorkloadSpec, *, pool_qualifies: bool, job: Job) -> bool:
    """Whether ``job``, made of ``old``, was as it ran what ``new`` asks, in a pool that
    ``new`` may still use or not (``pool_qualifies``)."""
    image = job.image is not None  # it ran in a container, whose image counts
    fields = fields_of(changes(old, new)) - (set() if image else {"image"})
    return not forcing(
        fields,
        pool_qualifies=pool_qualifies,
        ran=len(job.replicas),
        wanted=new.replicas,
        at_least=new.effective_min_replicas,
        gang=old.effective_min_replicas >= old.replicas,
    )


def edited_while_running(job: Job, digest: str, since: datetime | None) -> bool:
    """The spec (now of ``digest``, first seen by the store at ``since``: None if never
    edited) was edited while ``job``, an ended one of its, ran."""
    return (
        since is not None
        and job.spec_digest not in (None, digest)
        and job.ended_at is not None
        and _utc(since) < _utc(job.ended_at)
        # a spec seen before the job started (a revert to it) was not an edit of it
        and (job.started_at is None or _utc(since) >= _utc(job.started_at))
    )


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo in (UTC, None) else moment.astimezone(UTC)
