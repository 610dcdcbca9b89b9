"""Plans made for review (``cp plan --base``, on a pull request) and found again on merge
(``cp apply --reviewed``).

A pull request's plan is the working specs and the base's planned against one
observation, the first carrying the difference (policy figures, fair shares, the
workloads whose fate changes). It is stored under an id of its own, so a plain plan of
the same moment cannot stand in for it, beside the base plan it names. A base that does
not load (the change that fixes it) has the working specs planned alone, and that plan
is the one reviewed. On merge, the last plan made for review of exactly the merged specs
is applied, unless the clusters have followed other specs since it was.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

from adapters.base import Adapter
from controlplane.basehardware import base_world
from controlplane.basespecs import BaseSpecs
from controlplane.errors import PlanNotFoundError
from controlplane.impact import base_diff
from controlplane.observe import adapters_for, edited, half_lives, observe
from controlplane.plan import Plan, PolicyDiff, review_id
from controlplane.statefiles import read_snapshot
from controlplane.workflow import clock, open_store, plan_for, resolve_now, survey, with_policy
from solvers.policy import DEFAULT_POLICY, Policy
from specs.desired import DesiredState
from specs.loader import LoadResult
from specs.observation import observation_of


def plan_change(
    spec_dir: Path,
    loaded: LoadResult,
    base: BaseSpecs,
    *,
    observed: Path | None = None,
    now: datetime | None = None,
    db: str | None = None,
    forecast: bool = False,
    policy: Policy = DEFAULT_POLICY,
) -> Plan:
    """``cp plan --base``: the working specs and the base specs planned against one
    observation (read-only), the plan of the working specs carrying the difference: the
    policy figures, fair shares before -> after and the workloads whose fate changes."""
    store = None
    adapters: dict[str, Adapter] | None = None
    if observed is not None:
        snap = read_snapshot(observed)
        when = resolve_now(now) if now is not None else snap.now
    else:
        when = resolve_now(now)
        store = open_store(spec_dir, db, noting=True)
        desired = _union_clusters(loaded, base.loaded)
        adapters = adapters_for(desired, spec_dir / ".cp", clock(now), read_only=True, db=db)
        # the base's specs are planned against it too: roll-ups only if they hold for both
        same = half_lives(base.loaded.desired) == half_lives(loaded.desired)
        snap = observe(desired, adapters, when, store, record=False, rollups=same)
        # the versions running jobs have where the base's specs differ from them too (the
        # change reverts an edit): the base's plan reads them
        snap.versions = {**store.versions(edited(snap, base.loaded.desired)), **snap.versions}
    use = adapters if forecast else None
    world = snap
    if observed is None:  # simulated hardware the change edits: the base on its own
        world = base_world(
            snap, base.loaded.desired, loaded.desired, spec_dir / ".cp", clock(now), db=db
        )
    mine = {k: a for k, a in (adapters or {}).items() if k in loaded.desired.clusters}
    if store is not None and len(mine) < len(adapters or {}):  # the change removes a cluster
        # planned as merged: the cluster gone from the specs, its work held (the apply
        # after the merge observes the same)
        snap = observe(loaded.desired, mine, when, store, record=False, rollups=same)
    head = plan_for(spec_dir, loaded, snap, when, use, policy)
    before = plan_for(spec_dir, base.loaded, world, when, use, policy)
    diff = base_diff(base.loaded.desired, loaded.desired, before, head, base.label)
    plan = with_policy(head.model_copy(update={"id": review_id(head.id, base.label)}), diff)
    if store is not None:
        with store:
            store.save_plan(before)  # the plan the comment compares with, for `cp show`
            store.save_plan(plan)
            store.keep_observation(observation_of(snap))  # the merge's apply reads it
    return plan


def plan_alone(
    spec_dir: Path,
    loaded: LoadResult,
    label: str,
    *,
    observed: Path | None = None,
    now: datetime | None = None,
    db: str | None = None,
    forecast: bool = False,
    policy: Policy = DEFAULT_POLICY,
) -> Plan:
    """``cp plan --base`` whose base ``label`` does not load (the change that fixes it):
    the working specs planned alone, kept as the plan reviewed against it, so that the
    merge's ``cp apply --reviewed`` finds it."""
    found = survey(
        spec_dir,
        loaded,
        observed=observed,
        now=now,
        db=db,
        forecast=forecast,
        policy=policy,
        noting=True,
    )
    alone = PolicyDiff(against=f"{label} (it does not load: these specs planned alone)", base=label)
    plan = with_policy(found.plan.model_copy(update={"id": review_id(found.plan.id, label)}), alone)
    if found.store is not None:
        with found.store:
            found.store.save_plan(plan)
            found.store.keep_observation(found.seen)
    return plan


def _union_clusters(head: LoadResult, base: LoadResult) -> DesiredState:
    """The working specs, observing every cluster either side names (a cluster the change
    removes is still looked at, so the base plan sees its jobs)."""
    clusters = {**base.desired.clusters, **head.desired.clusters}
    return dataclasses.replace(head.desired, clusters=clusters)


def reviewed_plan(spec_dir: Path, loaded: LoadResult, db: str | None) -> Plan:
    """The plan reviewers saw for exactly these specs (``cp apply --reviewed``, on merge),
    or a PlanNotFoundError saying why there is none."""
    with open_store(spec_dir, db) as store:
        plan = store.reviewed_plan(loaded.desired.digest)
        applied = plan is not None and store.plan_status(plan.id) == "applied"
        last = store.last_applied_plan() if applied else None
        pruned = plan is None and store.pruned_for(loaded.desired.digest)
    if pruned:
        raise PlanNotFoundError(
            f"no reviewed plan for these specs (digest {loaded.desired.digest[:12]}) in this "
            "store; plans of them were pruned from the history (`cp store prune`), the pull "
            "request's perhaps: make one again (cp plan --base REF), or apply without "
            "--reviewed"
        )
    if plan is None:
        raise PlanNotFoundError(
            f"no reviewed plan for these specs (digest {loaded.desired.digest[:12]}): a "
            "reviewed plan is one `cp plan --base REF` made (the pull request's job; a plain "
            "`cp plan` is not one) of exactly these specs, in this store; make one, or apply "
            "without --reviewed"
        )
    if last is not None and last.spec_digest != plan.spec_digest:  # a revert, most likely
        raise PlanNotFoundError(
            f"the reviewed plan of these specs ({plan.id}) was applied, and plan {last.id} "
            "of other specs applied since: the clusters follow those now; plan these "
            "again (cp plan --base REF) or apply without --reviewed"
        )
    return plan
