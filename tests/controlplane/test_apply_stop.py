"""A stop request (SIGTERM to `cp watch`) ends an apply between two actions: what ran is
recorded, the plan is left interrupted, and applying it again finishes it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.base import Adapter
from controlplane import workflow
from controlplane.apply import run_plan
from controlplane.errors import StalePlanError
from controlplane.lease import holding_lease
from controlplane.observe import adapters_for
from controlplane.plan import Plan
from controlplane.store import Store
from specs.loader import LoadResult

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class World:
    """The quick start, planned, with its store and adapters."""

    specs: Path
    loaded: LoadResult
    plan: Plan
    store: Store
    adapters: dict[str, Adapter]


@pytest.fixture
def world(tmp_path: Path) -> World:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    loaded = workflow.load(specs)
    return World(
        specs,
        loaded,
        workflow.build_plan(specs, loaded),
        workflow.open_store(specs, None),
        adapters_for(loaded.desired, specs / ".cp", workflow.clock(None)),
    )


def test_a_stop_request_leaves_a_resumable_plan(world: World) -> None:
    store, plan = world.store, world.plan
    asked = []

    def stop() -> bool:  # the signal arrives while the third action runs
        asked.append(1)
        return len(asked) > 3

    with holding_lease(store) as lease:
        first = run_plan(plan, world.adapters, store, observed=None, lease=lease, stop=stop)
    assert first.stopped and [o.status for o in first.outcomes] == ["done"] * 3
    assert store.plan_status(plan.id) == "interrupted"
    with holding_lease(store) as lease:
        second = run_plan(plan, world.adapters, store, observed=None, lease=lease)
    assert second.ok and second.resumed and not second.stopped
    assert [o.status for o in second.outcomes][:3] == ["skipped"] * 3
    assert store.plan_status(plan.id) == "applied"
    assert store.verify().ok


def test_a_plan_applied_after_an_interrupted_one_supersedes_it(world: World) -> None:
    """Resuming an interrupted plan after a newer plan was applied carried out actions
    the newer one had already decided otherwise (user trial: a submit of a workload no
    longer in the specs). A fresh plan applied under the lease was made from the world
    the interrupted one left: it supersedes it, and the old one is refused."""
    store, old = world.store, world.plan
    with holding_lease(store) as lease:
        run_plan(old, world.adapters, store, observed=None, lease=lease, stop=lambda: True)
    assert store.plan_status(old.id) == "interrupted"
    newer, report = workflow.apply_specs(world.specs, world.loaded, approve=lambda p, s, **_: True)
    assert report is not None and report.ok and newer.id != old.id
    assert store.plan_status(old.id) == "superseded"
    with pytest.raises(StalePlanError, match=f"plan {newer.id} was applied after it"):
        workflow.apply_saved(old, world.specs, world.loaded)
    assert store.verify().ok


def test_an_action_cut_off_mid_way_is_not_left_started_for_ever(world: World) -> None:
    """A process killed while an action ran left it `started` in the history for good,
    although its plan was marked interrupted (user trial). Once a newer plan supersedes
    the plan, that action says it was cut off, and by whom it was taken over."""
    store, old = world.store, world.plan
    store.set_plan_status(old.id, "applying")
    store.mark(old.id, 0, "started")  # then the process was killed
    store.set_plan_status(old.id, "interrupted")
    newer, report = workflow.apply_specs(world.specs, world.loaded, approve=lambda p, s, **_: True)
    assert report is not None and report.ok
    [row] = [r for r in store.actions(old.id) if r.seq == 0]
    assert row.status == "interrupted"
    assert f"plan {newer.id} took over" in row.message
    assert store.verify().ok


def test_an_approval_that_outlasts_the_lease_checks_the_plan_again(world: World) -> None:
    """An interactive `cp apply`'s prompt left open longer than the lease (user trial:
    300 s) applied its plan on "y" as if it had been made a moment before: another
    reconciler had meanwhile taken the lease, applied, and released it, and the old plan
    was carried out on top. A lease not held all along means the plan is checked against
    the clusters as they are now, as a saved plan is."""
    applied_meanwhile = []

    def approve_late(plan: Plan, snap: object, **_: object) -> bool:
        # while the prompt waits, another reconciler applies these specs (and releases
        # the lease this apply held)
        _, report = workflow.apply_specs(world.specs, world.loaded, approve=lambda p, s, **_: True)
        applied_meanwhile.append(report)
        return True

    with pytest.raises(StalePlanError, match="was applied while it waited for approval"):
        workflow.apply_specs(world.specs, world.loaded, approve=approve_late)
    [other] = applied_meanwhile
    assert other is not None and other.ok and other.outcomes
    now = workflow.survey(world.specs, world.loaded).snapshot
    jobs = [j for c in now.clusters for j in c.jobs]
    per_workload = [j.workload for j in jobs if j.state.active]
    assert len(per_workload) == len(set(per_workload)), "a workload was submitted twice"
    assert world.store.verify().ok


def test_an_approval_that_outlasts_the_lease_is_refused_once_another_plan_applied(
    world: World,
) -> None:
    """The same, where the other reconciler changed nothing on the clusters: the specs
    were reverted meanwhile (the workload this plan starts was removed), so its plan was
    empty, and the clusters looked as before. The old plan still no longer holds: a plan
    applied after it was made refuses it."""
    t0 = datetime(2026, 11, 22, 10, tzinfo=UTC)
    later = t0 + timedelta(hours=1)  # past the quick start's minRuntime
    ok = workflow.apply_specs(world.specs, world.loaded, now=t0, approve=lambda p, s, **_: True)[1]
    assert ok is not None and ok.ok
    extra = world.specs / "workloads" / "extra.yaml"
    extra.write_text(
        "apiVersion: controlplane/v1\nkind: Workload\nmetadata: {name: extra}\n"
        "spec: {project: nlp, gpus: 2, priority: 90, walltime: 1h, command: [sleep, '1']}\n"
    )
    added = workflow.load(world.specs)

    def approve_late(plan: Plan, snap: object, **_: object) -> bool:
        assert "nlp/extra" in [a.workload for a in plan.actions]  # and what it preempts
        extra.unlink()  # reverted while the prompt waits, and applied by another reconciler
        reverted = workflow.load(world.specs)
        other, report = workflow.apply_specs(
            world.specs, reverted, now=later, approve=lambda p, s, **_: True
        )
        assert other.actions == [] and report is None
        return True

    with pytest.raises(StalePlanError, match="was applied while it waited for approval"):
        workflow.apply_specs(world.specs, added, now=later, approve=approve_late)
    now = workflow.survey(world.specs, workflow.load(world.specs), now=later).snapshot
    assert not [j for c in now.clusters for j in c.jobs if j.workload == "nlp/extra"]
    assert world.store.verify().ok
