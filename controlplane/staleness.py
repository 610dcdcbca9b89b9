"""Whether a saved plan still holds: which changes in the clusters since it was made matter
to its actions.

A saved plan (a plan file, the plan a pull request's reviewers saw, applied on merge) is
carried out later than it was made, and the clusters move on meanwhile. Its digest says
only that something changed; with the observation it was made against (kept in the store,
specs/observation.py) an apply looks at what changed:

- A job of ours that ended (completed, failed, cancelled by somebody) only frees GPUs: the
  plan's placements still fit. It does not matter, unless an action names the job or its
  workload (the job to cancel, preempt, move or resize is gone; the workload submitted or
  withdrawn is another story now).
- A node that changed (gone, drained or down, other GPUs or pool, its reservations, a new
  node) matters where an action places work on it, and nowhere else.
- A pool's limits matter in a cluster the plan acts on.
- Everything else matters: a job of ours that appeared or changed (started, moved,
  requeued: the plan did not count it as it is now), a cluster that answers now, or no
  longer does.
- A plan that evicts running work (preempt, move, shrink) decided each eviction on what
  every job held and every node offered: for it, every change matters (a job that ended
  may have freed the room an eviction was to make).

A plan is also made as of a time (``cp plan --now`` may look ahead): applied before that
time, what it decided by the clock (a minRuntime over, a walltime ended, a month's budget)
would act early, so it is refused until then (:func:`not_ahead`).

Foreign jobs are not in the observation at all (specs/observation.py says why). Pure:
the findings are sentences in a fixed order (cluster, then nodes, then jobs, by name).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from controlplane.errors import StalePlanError
from controlplane.plan import Plan, shrinks
from specs.actions import Action, Op
from specs.observation import ClusterSeen, JobSeen, NodeSeen, Observation

# what the plan does to a job or workload it names, as a sentence says it
_DOES = {
    Op.SUBMIT: "submits",
    Op.RESIZE: "resizes",
    Op.MOVE: "moves",
    Op.PREEMPT: "preempts",
    Op.CANCEL: "cancels",
}
SHOWN = 5  # changes a refusal names; the rest are counted


@dataclass
class Changes:
    """What changed since a plan was made: what matters to it, and what does not."""

    matter: list[str] = field(default_factory=list)
    unaffected: list[str] = field(default_factory=list)

    def told(self) -> str:
        """The changes that matter, as one clause (the first few, the rest counted)."""
        more = len(self.matter) - SHOWN
        return "; ".join(self.matter[:SHOWN]) + (f"; and {more} more" if more > 0 else "")


# how far ahead of the apply's clock a plan's own may be (two machines' clocks: the one
# that planned, the one that applies)
SKEW = timedelta(minutes=1)


def not_ahead(plan: Plan, now: datetime, replan: str) -> None:
    """Refuse ``plan`` (StalePlanError) if it was made as of a time later than ``now``."""
    if plan.created_at > now + SKEW:
        made, at = (f"{t:%Y-%m-%d %H:%M:%S} UTC" for t in (plan.created_at, now))
        raise StalePlanError(
            f"plan {plan.id} was made as of {made}, later than now ({at}): what it decided "
            "by the clock (minRuntime, walltime ends, budgets) would act early; nothing was "
            f"applied: apply it at that time or later, or {replan}"
        )


def check(plan: Plan, then: Observation | None, now: Observation, replan: str) -> list[str]:
    """Refuse ``plan`` (StalePlanError, saying ``replan``) if the clusters, observed
    ``now``, changed since ``then`` in a way its actions depend on; ``then`` None (not
    kept): if they changed at all. Returns the changes it does not depend on."""
    if now.digest == plan.observed_digest:
        return []
    if then is None or then.digest != plan.observed_digest:
        raise StalePlanError(
            f"plan {plan.id} was made against another state of the clusters (jobs or nodes "
            "changed since, and the store does not hold the observation it was made against, "
            f"to tell whether that matters to it); {replan}"
        )
    found = changes(plan, then, now)
    if found.matter:
        raise StalePlanError(
            f"plan {plan.id} was made against another state of the clusters, and what "
            f"changed since matters to it: {found.told()}; {replan}"
        )
    return found.unaffected


def changes(plan: Plan, then: Observation, now: Observation) -> Changes:
    """The changes from ``then`` (what ``plan`` was made against) to ``now``, sorted into
    those that matter to its actions and those that do not."""
    found = Changes()
    acts = _Acts(plan.actions)
    for name in sorted(then.clusters.keys() | now.clusters.keys()):
        _cluster(found, acts, name, then.clusters.get(name), now.clusters.get(name))
    if acts.evictions and found.unaffected:
        found.matter += found.unaffected
        found.matter.append(
            f"the plan evicts running work ({', '.join(acts.evictions[:3])}"
            f"{', ...' if len(acts.evictions) > 3 else ''}), decided on the clusters as they were"
        )
        found.unaffected = []
    return found


class _Acts:
    """What the plan's actions name: jobs, workloads, and the nodes they place work on."""

    def __init__(self, actions: list[Action]) -> None:
        self.jobs: dict[tuple[str, str], Op] = {}
        self.workloads: dict[str, Op] = {}
        self.placed: dict[tuple[str, str], list[str]] = {}  # (cluster, node) -> workloads
        self.clusters = {a.cluster for a in actions}
        self.evictions = [
            f"{a.op.value} {a.workload}"
            for a in actions
            if a.op in (Op.PREEMPT, Op.MOVE) or shrinks(a)
        ]
        for a in actions:
            if a.job is not None:
                self.jobs.setdefault((a.cluster, a.job), a.op)
            for name in {a.workload, a.tagged_as} - {None}:
                self.workloads.setdefault(str(name), a.op)
            if a.op in (Op.SUBMIT, Op.MOVE, Op.RESIZE):
                for r in a.replicas or []:
                    if r.node is not None:
                        there = self.placed.setdefault((a.cluster, r.node), [])
                        if a.workload not in there:
                            there.append(a.workload)


def _cluster(
    found: Changes, acts: _Acts, name: str, then: ClusterSeen | None, now: ClusterSeen | None
) -> None:
    if then is None or now is None:
        found.matter.append(
            f"cluster {name} is observed now, and was not when the plan was made"
            if then is None
            else f"cluster {name} was observed when the plan was made, and is not now"
        )
        return
    if then.reachable != now.reachable:
        found.matter.append(
            f"cluster {name} answers now (it did not when the plan was made)"
            if now.reachable
            else f"cluster {name} does not answer now"
        )
        return
    if then.pools != now.pools:
        said = f"the limits cluster {name} sets on its pools changed"
        if name in acts.clusters:
            found.matter.append(said)
        else:
            found.unaffected.append(f"{said} (the plan does nothing there)")
    for node in sorted(then.nodes.keys() | now.nodes.keys()):
        was, _is = then.nodes.get(node), now.nodes.get(node)
        if was != _is:
            said = _node_change(node, was, _is)
            placed = acts.placed.get((name, node))
            if placed:
                found.matter.append(f"{said}, where the plan places {', '.join(placed)}")
            else:
                found.unaffected.append(said)
    for job in sorted(then.jobs.keys() | now.jobs.keys()):
        _job(found, acts, name, then.jobs.get(job), now.jobs.get(job))


def _node_change(name: str, was: NodeSeen | None, now: NodeSeen | None) -> str:
    if was is None:
        return f"node {name} is new"
    if now is None:
        return f"node {name} is gone"
    said = []
    if was.schedulable != now.schedulable:
        said.append(
            "takes work again" if now.schedulable else "takes no new work (drained or down)"
        )
    if was.gpus != now.gpus:
        said.append(f"has {now.gpus} GPUs, not {was.gpus}")
    if was.pool != now.pool:
        said.append(f"is in pool {now.pool}, not {was.pool}")
    if was.windows != now.windows:
        said.append("has other reservations")
    return f"node {name} " + " and ".join(said)


def _job(
    found: Changes, acts: _Acts, cluster: str, was: JobSeen | None, now: JobSeen | None
) -> None:
    if was is None and now is not None:
        found.matter.append(f"job {now.id} ({now.workload}) appeared, {_where(now)}")
        return
    if was is None or was == now:
        return
    if now is None:  # it ended: its GPUs are free
        if (op := acts.jobs.get((cluster, was.id))) is not None:
            found.matter.append(f"job {was.id} ({was.workload}), which the plan {_DOES[op]}, ended")
        elif (op := acts.workloads.get(was.workload)) is not None:
            found.matter.append(
                f"job {was.id} of {was.workload}, a workload the plan {_DOES[op]}, ended"
            )
        else:
            found.unaffected.append(f"job {was.id} ({was.workload}) ended")
        return
    if was.workload != now.workload:
        found.matter.append(f"job {now.id} is {now.workload} now, not {was.workload}")
    else:
        found.matter.append(
            f"job {now.id} ({now.workload}) is {_where(now)} now, not {_where(was)}"
        )


def _where(job: JobSeen) -> str:
    if not job.holds_gpus:
        return "queued"
    on = Counter(job.replicas)  # replicas alike on one node, once with their number
    return "running on " + ", ".join(
        f"{node or 'a node the cluster chose'} ({f'{n} x ' if n > 1 else ''}"
        f"{gpus} GPU{'' if gpus == 1 else 's'})"
        for (node, gpus), n in on.items()
    )
