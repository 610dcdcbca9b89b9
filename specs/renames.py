"""Projects renamed in the specs (``spec.renamedFrom``): what the clusters and the store
know under an old name belongs to the new one.

A workload is ``project/name``, and that identity is what every job carries in its tag,
what usage, budgets, queue times and failure streaks are recorded by, and what a job's
spec version names. Renaming a project without saying so makes its running jobs foreign
to the specs (cancelled, and started again under the new name) and drops its decayed
usage and this month's spend (a fresh fair share, a full budget). With ``renamedFrom``
the snapshot is rewritten once, before planning, so that every step sees one project:
a job tagged ``old/x`` is ``new/x``'s, keeping its tag in ``tagged_as`` (an adapter
checks a job's tag before it touches it, and the plan's actions carry it on), and a
stored spec version of ``old/x`` counts as ``new/x``'s with the project renamed, so an
otherwise unchanged workload is not taken for an edited one. The store moves what it
recorded under an old name to the new one at its next recording observation
(``carry_renames``, controlplane/store/scheduling.py); until then, and for a plan that
only reads, this reading does it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from specs.actions import Action
from specs.desired import DesiredState
from specs.snapshot import Progress, Snapshot


def aliases(desired: DesiredState) -> dict[str, str]:
    """Old project name -> the project of the specs that carries it on."""
    return {old: name for name, p in desired.projects.items() for old in p.spec.renamed_from}


def earlier_names(desired: DesiredState) -> dict[str, str]:
    """Each workload of a renamed project under an old name -> its name now: what the
    store may have recorded it by (runs, completions, queue times, failures)."""
    before: dict[str, list[str]] = {}
    for old, new in aliases(desired).items():
        before.setdefault(new, []).append(old)
    return {
        f"{old}/{w.metadata.name}": key
        for key, w in desired.workloads.items()
        for old in before.get(w.spec.project, [])
    }


def names_of(desired: DesiredState, workload: str) -> list[str]:
    """``workload`` and its names before its project was renamed (what history has), in
    the specs or no longer (a pruned workload's history is asked for most)."""
    project, _, name = workload.partition("/")
    p = desired.projects.get(project)
    return [workload, *(f"{old}/{name}" for old in sorted(p.spec.renamed_from if p else []))]


def renamed(workload: str, names: dict[str, str]) -> str:
    """``workload`` (project/name) under its project's current name."""
    project, _, rest = workload.partition("/")
    return f"{names[project]}/{rest}" if project in names and rest else workload


def carried_over(desired: DesiredState, snapshot: Snapshot) -> Snapshot:
    """``snapshot`` as the renamed projects see it (itself when no rename touches it)."""
    names = aliases(desired)
    if not names or not _touched(snapshot, names):
        return snapshot
    out = Snapshot.model_validate(snapshot.model_dump())  # a deep copy, as converge makes one
    versions = dict(out.versions)

    def digest(old: str | None) -> str | None:
        """A digest of a spec version of the old project's: the same spec's in the new."""
        spec = versions.get(old or "")
        if spec is None or spec.project not in names:
            return old
        spec = spec.model_copy(update={"project": names[spec.project]})
        versions[spec.digest] = spec
        return spec.digest

    for cluster in out.clusters:
        for job in cluster.jobs:
            if job.workload is not None and (new := renamed(job.workload, names)) != job.workload:
                job.tagged_as, job.workload = job.workload, new
                job.spec_digest = digest(job.spec_digest)
    for failure in out.failures:  # an edit since ends a backoff: a rename is none
        failure.spec_digest = digest(failure.spec_digest)
    out.versions = versions
    for c in out.clusters:
        seen: list[_Record] = [*(c.last_known or []), *c.runs]
        for entry in seen:
            entry.workload = renamed(entry.workload, names)
    # recorded under the old name and the new: the queue time the earlier, the segments of
    # both, the newer failure streak
    out.queue = _carried(out.queue, names, lambda old, new: old if old.since <= new.since else new)
    out.progress = _carried(out.progress, names, _segments)
    out.failures = _carried(
        out.failures, names, lambda old, new: new if new.ended_at >= old.ended_at else old
    )
    for record in out.usage:
        record.project = names.get(record.project, record.project)
    out.spec_since = {renamed(k, names): v for k, v in out.spec_since.items()}
    return out


def tagged(actions: list[Action], snapshot: Snapshot) -> list[Action]:
    """``actions`` with the tag each one's job carries, where its project was renamed
    (``snapshot`` as :func:`carried_over` made it)."""
    tags = {(c.name, j.id): j.tagged_as for c in snapshot.clusters for j in c.jobs if j.tagged_as}
    if not tags:
        return actions
    return [
        a.model_copy(update={"tagged_as": tag})
        if (tag := tags.get((a.cluster, a.job or ""))) is not None
        else a
        for a in actions
    ]


def _carried(entries: list[_R], names: dict[str, str], pick: Callable[[_R, _R], _R]) -> list[_R]:
    """``entries`` under the current names; where one was recorded under an old name and
    one under the new, ``pick(old, new)`` says what stands."""
    out = {e.workload: e for e in entries if renamed(e.workload, names) == e.workload}
    for e in entries:
        if (new := renamed(e.workload, names)) != e.workload:
            e.workload = new
            out[new] = pick(e, out[new]) if new in out else e
    return [out[k] for k in sorted(out)]


def _segments(old: Progress, new: Progress) -> Progress:
    """The segments run under the old name, then under the new."""
    return new.model_copy(
        update={
            "elapsed_seconds": old.elapsed_seconds + new.elapsed_seconds,
            "segments": old.segments + new.segments,
        }
    )


class _Record(Protocol):
    workload: str


_R = TypeVar("_R", bound=_Record)


def _records(snapshot: Snapshot) -> list[_Record]:
    """What the snapshot records by workload, but for the jobs."""
    out: list[_Record] = [*snapshot.queue, *snapshot.progress, *snapshot.failures]
    for c in snapshot.clusters:
        out += [*(c.last_known or []), *c.runs]
    return out


def _touched(snapshot: Snapshot, names: dict[str, str]) -> bool:
    workloads = [j.workload for c in snapshot.clusters for j in c.jobs if j.workload]
    workloads += [r.workload for r in _records(snapshot)] + list(snapshot.spec_since)
    return any(w.partition("/")[0] in names for w in workloads) or any(
        r.project in names for r in snapshot.usage
    )
