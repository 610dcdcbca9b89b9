"""Observation: ask every cluster's adapter, and add what only the store knows.

The snapshot gets the queue entry time of every waiting workload (first seen, from the
store) so that job order is "older first" across runs; the jobs we submitted that the
clusters do not show yet (placeholders.py), so nothing is submitted twice; and the
workloads that ran to completion after the cluster has forgotten their job (Slurm keeps
an ended job for ``MinJobAge``, five minutes by default), so a finished workload is not
started again. Likewise the run time of a segmented workload's finished segments
(``progress``) and each workload's streak of failed jobs (``failures``, for the retry
backoff), both kept by the store from the ended jobs observations see; and the running
jobs the latest applies failed to act on (``refusals``, from the store's actions), which
are not evicted again until a backoff has passed.

What an observation writes is decided by ``record``. Observe, apply and watch record:
queue entry times, usage, completions, segment runs, failure streaks, dead placeholders
dropped, and actions an interrupted apply left without their job linked to it. ``cp
plan`` (and status, explain, cost) only read: a plan is a what-if, at any ``--now``, on
any branch, and must leave the store's scheduling state and the clusters as it found
them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from adapters import make_adapter
from adapters.base import Accounting, Adapter, AdapterError, LocalStateError
from controlplane import placeholders, unreachable
from controlplane.activity import busy
from controlplane.completions import recall_completions
from controlplane.statedir import clusters_dir
from solvers.order import job_id_order, last_completed
from solvers.segments import segmented
from solvers.sitepolicy.backoff import CAP_SECONDS, FAILED_STATES
from solvers.sitepolicy.usage import DEFAULT_HALF_LIFE
from specs.actions import Op
from specs.desired import DesiredState
from specs.renames import aliases, earlier_names, renamed
from specs.snapshot import (
    ClusterState,
    Job,
    JobRun,
    JobState,
    LastKnown,
    QueueEntry,
    Snapshot,
)

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.plan import Plan
    from controlplane.store import Store
    from controlplane.store.tables import PlaceholderRow

# the first observation of a cluster reads its accounting this far back: the month's
# budget and most of a fairshare half-life
FIRST_LOOK_BACK = timedelta(days=35)


def adapters_for(
    desired: DesiredState,
    state_dir: Path,
    clock: Callable[[], datetime],
    *,
    read_only: bool = False,
    db: str | None = None,
) -> dict[str, Adapter]:
    """The adapters of the specs' clusters. ``state_dir``: the spec repo's ``.cp/``; ``db``:
    the store given by ``--db``, beside which the simulator keeps its clusters when it is
    a SQLite file (:func:`~controlplane.statedir.clusters_dir`)."""
    namespaces = {
        p: doc.spec.namespace for p, doc in desired.projects.items() if doc.spec.namespace
    }
    simulated = clusters_dir(state_dir, db)
    return {
        name: make_adapter(
            c,
            state_dir=state_dir,
            clock=clock,
            read_only=read_only,
            namespaces=namespaces,
            simulated=simulated,
        )
        for name, c in sorted(desired.clusters.items())
    }


def observe(
    desired: DesiredState,
    adapters: dict[str, Adapter],
    now: datetime,
    store: Store | None = None,
    *,
    record: bool = True,
    rollups: bool = True,
) -> Snapshot:
    """The clusters' state as of ``now``, with what the store remembers: lagging
    placeholders injected, forgotten completions recalled, queue times, usage, progress
    and failure streaks. With ``record`` (observe, apply, watch) the store learns from it
    too; without (plan), nothing is written. ``rollups``: the usage of past months as the
    store's roll-ups, which hold for these specs' half-lives only (a snapshot that leaves
    the process, or plans specs with others, has every run's instead). A cluster whose adapter fails is reported
    unreachable, with the error, and the others are still observed."""
    clusters = []
    for name in sorted(adapters):
        with busy(f"observing cluster {name}"):
            clusters.append(_observe(adapters[name]))
    snap = Snapshot(now=now, clusters=clusters)
    if store is None:
        return snap
    snap.clusters += unreachable.removed(desired, store.clusters_with_work())
    # a renamed project's workloads are in the store under their old names too (planning
    # reads them as the new ones: specs/renames.py)
    earlier = earlier_names(desired)
    workloads = set(desired.workloads) | set(earlier)
    snap = _with_last_known(snap, store, desired)
    snap, accounted = _with_runs(snap, adapters, store)
    snap = _without_theirs(snap, store, workloads)
    snap = with_unseen_endings(snap)
    seen = {c.name: c.runs for c in snap.clusters if c.reachable}
    prices = desired.gpu_prices()
    if record:
        store.link_jobs(_tagged(snap))
        store.record_runs(seen, now, complete=accounted, prices=prices)
        store.retire_runs(workloads)
    snap = reap_placeholders(snap, store, record=record)
    snap = recall_completions(snap, store, workloads, record=record, earlier=earlier)
    active = {
        earlier.get(j.workload, j.workload)
        for c in snap.clusters
        for j in c.jobs
        if j.workload and j.state.active
    }
    since = store.queue_times(
        {k for k in workloads if earlier.get(k, k) not in active},
        now,
        record=record,
        entered=_lost_places(snap),
    )
    snap.queue = [QueueEntry(workload=k, since=v) for k, v in sorted(since.items())]
    if record:
        record_endings(snap, store, desired)
        store.carry_renames(earlier)  # what was recorded under old names, this time too
    # recorded above, or (read-only) counted from what was just seen, as if recorded
    unrecorded = None if record else seen
    snap.usage = store.usage_records(now, unrecorded, half_lives(desired) if rollups else None)
    segmented_ones = {k for k in workloads if segmented(desired.workloads[earlier.get(k, k)].spec)}
    snap.progress = store.progress(segmented_ones, now=now, seen=unrecorded, prices=prices)
    snap.failures = store.failures(workloads)
    snap.refusals = store.refusals(
        {
            (c.name, j.id): j.submitted_at or j.started_at
            for c in snap.clusters
            for j in c.jobs
            if j.state.active
        }
    )
    if record:
        store.record_versions({k: w.spec for k, w in desired.workloads.items()}, now)
    snap.versions = store.versions(edited(snap, desired))
    snap.spec_since = _spec_since(snap, desired, store)
    return snap


def _lost_places(snap: Snapshot) -> dict[str, datetime]:
    """Workloads whose latest job lost its GPUs without their doing (a node failure, a
    preemption), and when that job entered the queue: each keeps its place (work that had
    waited less took the room first when it re-entered at the loss; KAI's evicted pod
    keeps its pod group, and its age)."""
    ended = sorted(
        ((j.workload, j) for c in snap.clusters for j in c.jobs if j.workload and j.ended_at),
        key=lambda kj: (kj[1].ended_at, job_id_order(kj[1].id)),
    )
    latest = dict(ended)  # the newest of each workload wins
    return {
        k: when
        for k, j in latest.items()
        if j.state in _NOT_ITS_DOING
        and (when := j.submitted_at or j.started_at or j.ended_at) is not None
    }


_NOT_ITS_DOING = frozenset({JobState.NODE_FAIL, JobState.PREEMPTED})


def half_lives(desired: DesiredState) -> dict[str, int]:
    """Each project's fair-share half-life, in seconds, by its name and the names it had
    (its runs recorded under them decay as its own)."""
    out: dict[str, int] = {}
    for name, project in desired.projects.items():
        fs = project.spec.fairshare
        half_life = fs.half_life if fs is not None and fs.half_life else DEFAULT_HALF_LIFE
        for known in (name, *project.spec.renamed_from):
            out[known] = half_life
    return out


def _spec_since(snap: Snapshot, desired: DesiredState, store: Store) -> dict[str, datetime]:
    """For each workload whose last completed job ran another version of its spec: when
    the store first saw the spec it has now (known only once an observation recorded it)."""
    current = {k: w.spec.digest for k, w in desired.workloads.items()}
    last = last_completed(j for c in snap.clusters for j in c.jobs)
    names = aliases(desired)
    for old in [k for k in last if renamed(k, names) != k]:  # its project was renamed since
        last.setdefault(renamed(old, names), last.pop(old))  # a job of the new name is newer
    edits = {
        k: current[k]
        for k, j in last.items()
        if k in current and j.spec_digest not in (None, current[k])
    }
    seen = store.first_seen(edits.values())
    return {k: seen[d] for k, d in sorted(edits.items()) if d in seen}


def _with_last_known(snap: Snapshot, store: Store, desired: DesiredState) -> Snapshot:
    """Each cluster that did not answer, with the workloads the store knows may be there
    (only those are held for it: one never submitted there is planned elsewhere): a run
    not seen ending, sized by what it held, or a job submitted and not seen starting (a
    placeholder), sized by the submit that made it (by its spec when that plan is gone)."""
    down = [c.name for c in snap.clusters if not c.reachable]
    if not down:
        return snap
    known = {name: store.running_on(name) for name in down}
    running = {(name, k) for name, there in known.items() for k in there}
    plans: dict[str, Plan | None] = {}  # each plan read once, however many jobs it made
    for ph in store.placeholders():
        if ph.cluster in known and not known[ph.cluster].get(ph.workload):
            if ph.plan_id not in plans:
                plans[ph.plan_id] = store.get_plan(ph.plan_id)
            gpus = _submitted_gpus(plans[ph.plan_id], ph)
            if gpus is None and ph.workload in desired.workloads:
                spec = desired.workloads[ph.workload].spec
                gpus = spec.gpus * spec.replicas
            known[ph.cluster][ph.workload] = gpus or 0
    clusters = [
        c.model_copy(
            update={
                "last_known": [
                    LastKnown(workload=k, gpus=g, running=(c.name, k) in running)
                    for k, g in sorted(known[c.name].items())
                ]
            }
        )
        if c.name in known
        else c
        for c in snap.clusters
    ]
    return snap.model_copy(update={"clusters": clusters})


def _submitted_gpus(plan: Plan | None, ph: PlaceholderRow) -> int | None:
    """The GPUs the submit that made a placeholder asked for; None: not known."""
    for a in plan.actions if plan is not None else []:
        if a.op == Op.SUBMIT and a.workload == ph.workload and a.cluster == ph.cluster:
            return sum(r.gpus for r in a.replicas or [])
    return None


def edited(snap: Snapshot, desired: DesiredState) -> set[str]:
    """The spec digests of our active (or completed) jobs whose workload's spec has
    changed since."""
    current = {k: w.spec.digest for k, w in desired.workloads.items()}
    names = aliases(desired)  # a job of a renamed project's is its new name's workload's
    return {
        j.spec_digest
        for c in snap.clusters
        for j in c.jobs
        if j.workload is not None
        and (j.state.active or j.state == JobState.COMPLETED)
        and j.spec_digest is not None
        and j.spec_digest != current.get(renamed(j.workload, names), j.spec_digest)
    }


def _with_runs(
    snap: Snapshot, adapters: dict[str, Adapter], store: Store
) -> tuple[Snapshot, set[str]]:
    """Each cluster's runs since its accounting was last recorded: from the cluster's
    accounting when it keeps one (jobs that started and ended in between included), else
    read off the jobs the observation shows. Also the clusters whose runs are complete up
    to now: not one that did not answer, nor one whose accounting failed (its window is
    read again next time)."""
    clusters, complete = [], set()
    for c in snap.clusters:
        if not c.reachable:
            clusters.append(c)
            continue
        adapter = adapters[c.name]
        runs = runs_from_jobs(c)
        if isinstance(adapter, Accounting):
            since = store.accounting_since(c.name) or snap.now - FIRST_LOOK_BACK
            try:
                with busy(f"reading the accounting of cluster {c.name}"):
                    runs = adapter.runs(since, snap.now)
            except AdapterError:
                pass  # what the jobs show now; the window stays open for the next look
            else:
                complete.add(c.name)
        else:
            complete.add(c.name)
        clusters.append(c.model_copy(update={"runs": runs}))
    return snap.model_copy(update={"clusters": clusters}), complete


def _without_theirs(snap: Snapshot, store: Store, workloads: set[str]) -> Snapshot:
    """Tagged jobs of workloads these specs do not name, from plans this store never made:
    another control plane's (another spec repo with its own store, on the same cluster),
    or a hand-made job with a look-alike tag. They are not ours: their GPUs count, they
    are never pruned, and their runs are not charged to a project of the same name."""
    named = {
        plan
        for c in snap.clusters
        for plan, workload in (
            *((j.plan_id, j.workload) for j in c.jobs),
            *((r.plan_id, r.workload) for r in c.runs),
        )
        if plan is not None and workload is not None and workload not in workloads
    }
    foreign = named - store.known_plans(named) if named else set()
    if not foreign:
        return snap

    def theirs(plan: str | None, workload: str | None) -> bool:
        return plan in foreign and workload not in workloads

    clusters = [
        c.model_copy(
            update={
                "jobs": [
                    j.model_copy(
                        update={
                            "workload": None,
                            "owner": f"another control plane (plan {j.plan_id})",
                        }
                    )
                    if theirs(j.plan_id, j.workload)
                    else j
                    for j in c.jobs
                ],
                "runs": [r for r in c.runs if not theirs(r.plan_id, r.workload)],
            }
        )
        for c in snap.clusters
    ]
    return snap.model_copy(update={"clusters": clusters})


def with_unseen_endings(snap: Snapshot) -> Snapshot:
    """Our jobs that ended since the last look and that the clusters no longer show, as
    their accounting tells it (Slurm forgets an ended job ``MinJobAge`` after it ends,
    five minutes by default): added as ended jobs, so a completed workload is remembered
    as such and not run again, and a failed one starts its retry backoff."""
    ended = {JobState.COMPLETED, *FAILED_STATES}
    clusters = []
    for c in snap.clusters:
        shown = {j.id for j in c.jobs}
        last: dict[str, JobRun] = {}  # a requeued job's runs: its newest tells its end
        for r in c.runs:
            if r.job not in shown and (r.job not in last or r.started_at > last[r.job].started_at):
                last[r.job] = r
        gone = [
            Job(
                id=r.job,
                workload=r.workload,
                state=r.state,
                started_at=r.started_at,
                ended_at=r.ended_at,
                gpu_type=r.gpu_type,
                walltime=r.time_limit,
                spec_digest=r.spec_digest,
                plan_id=r.plan_id,  # a fan-out candidate's round: it may have won it
                reason="ended before it was observed; from the cluster's accounting",
            )
            for r in last.values()
            if r.ended_at is not None and r.state in ended
        ]
        clusters.append(c.model_copy(update={"jobs": [*c.jobs, *gone]}) if gone else c)
    return snap.model_copy(update={"clusters": clusters})


def runs_from_jobs(cluster: ClusterState) -> list[JobRun]:
    """The runs of our jobs an observation shows (started ones: running or ended)."""
    return [
        JobRun(
            job=j.id,
            workload=j.workload,
            started_at=j.started_at,
            ended_at=None if j.state.active else j.ended_at,
            gpus=j.gpus,
            gpu_type=j.gpu_type,
            state=j.state,
            time_limit=j.walltime,
            spec_digest=j.spec_digest,
            plan_id=j.plan_id,
        )
        for j in cluster.jobs
        if j.workload and j.started_at is not None
    ]


def _tagged(snap: Snapshot) -> list[tuple[str, str, str, str]]:
    """(plan id, workload, cluster, job id) of every job of ours the clusters show."""
    return [
        (j.plan_id, j.workload, c.name, j.id)
        for c in snap.clusters
        for j in c.jobs
        if j.workload and j.plan_id
    ]


def _observe(adapter: Adapter) -> ClusterState:
    """One cluster's report; a cluster whose adapter fails is reported unreachable, with
    the error, so the others are still planned (controlplane/unreachable.py). A broken
    state file of our own is no unreachable cluster: it stops the command."""
    try:
        return adapter.observe()
    except LocalStateError:
        raise
    except AdapterError as exc:
        return ClusterState(
            name=adapter.cluster, reachable=False, error=f"{type(exc).__name__}: {exc}"
        )


def record_endings(snap: Snapshot, store: Store, desired: DesiredState) -> None:
    """The ended jobs that extend or end failure streaks."""
    ended = [
        j
        for c in snap.clusters
        for j in c.jobs
        if j.workload in desired.workloads
        and j.ended_at is not None
        and (j.state in FAILED_STATES or j.state == JobState.COMPLETED)
    ]
    if ended:
        store.record_endings(ended, fresh_after=CAP_SECONDS)


def reap_placeholders(snap: Snapshot, store: Store, *, record: bool = True) -> Snapshot:
    """Inject the lagging placeholders; with ``record``, drop those whose job started or
    died."""
    verdicts = placeholders.judge(store.placeholders(), snap)
    for v in verdicts:
        if record and not v.fate.live:
            ph = v.placeholder
            store.drop_placeholder(ph.workload, ph.cluster, job=ph.job)
    return placeholders.inject(snap, verdicts)
