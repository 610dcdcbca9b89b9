"""An eviction the cluster refuses is not planned again at once: the job is no victim while
a backoff after its failures lasts, and the room is taken elsewhere.

A refused ``scancel`` (a job another user now owns) failed the same way in every cycle:
the plan chose the same victim, the failure held back the submit it made room for, and
the waiting work never started (user trial on a real Slurm). The simulator, the real
store and apply; the cluster refuses to act on one job (tests/builders/incidents.py): a
stand-in for the refusal, as the tests run as root, whom the local Slurm never refuses.
"""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from adapters.base import Adapter
from adapters.simulator import SimulatorAdapter
from controlplane.apply import ApplyReport, apply_plan
from controlplane.cli.views.plan import print_plan
from controlplane.observe import observe
from controlplane.plan import Plan
from controlplane.reconcile import plan
from controlplane.store import Store
from specs.desired import DesiredState
from specs.observation import observation_of
from tests.builders import NOW, cluster, desired, pool, project, workload
from tests.builders.incidents import Refusing

MINUTE = timedelta(minutes=1)


def specs(*, with_b: bool, more: bool = False) -> DesiredState:
    """One 8-GPU node; project a deserves nothing and runs two 4-GPU jobs on it; b
    deserves 8 and, ``with_b``, asks for 4: reclaim evicts one of a's jobs (``more``: and
    4 more)."""
    work = [workload("one", "a", gpus=4), workload("two", "a", gpus=4)]
    work += [workload("w", "b", gpus=4)] if with_b else []
    return one_node(0, 8, *work, *([workload("w2", "b", gpus=4)] if more else []))


def one_node(a: int, b: int, *work: dict[str, Any]) -> DesiredState:
    """One node of 8 GPUs, projects a and b deserving ``a`` and ``b``, and ``work``."""
    return desired(
        [cluster(pools=[pool(nodes=1)]), project("a", gpus=a), project("b", gpus=b), *work]
    )


class World:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = NOW
        (name, c), *_ = specs(with_b=False).clusters.items()
        sim = SimulatorAdapter(c, state_dir=tmp_path, clock=lambda: self.clock)
        self.sim = Refusing(sim)
        self.adapters: dict[str, Adapter] = {name: self.sim}
        self.store = Store(f"sqlite:///{tmp_path}/db")

    def cycle(self, d: DesiredState) -> tuple[Plan, ApplyReport]:
        self.store.at(self.clock)  # what the apply records happens at the world's clock
        snap = observe(d, dict(self.adapters), self.clock, self.store)
        made = plan(d, snap, now=self.clock)
        done = apply_plan(made, self.adapters, self.store, observed=observation_of(snap))
        return made, done

    def job_of(self, workload: str) -> str:
        return next(j.id for j in self.sim.observe().jobs if j.workload == workload)

    def refusing(self, workload: str) -> str:
        """From here on the cluster refuses to act on ``workload``'s job; its id."""
        self.sim.refuse = {job := self.job_of(workload)}
        return job


def started(tmp_path: Path) -> World:
    """a's two jobs run."""
    world = World(tmp_path)
    assert world.cycle(specs(with_b=False))[1].ok
    return world


def evicted(made: Plan) -> list[str]:
    return [a.workload for a in made.actions if a.op.evicts]


def test_a_refused_eviction_is_not_planned_again_until_its_backoff_has_passed(
    tmp_path: Path,
) -> None:
    world = started(tmp_path)
    [victim] = evicted(plan_on(world, specs(with_b=True)))  # b's work takes one's place
    refused = world.refusing(victim)
    made, done = world.cycle(specs(with_b=True))
    assert not done.ok and world.sim.refused == [refused]

    world.clock += MINUTE / 2  # within the first failure's backoff (a minute)
    made, done = world.cycle(specs(with_b=True))
    [other] = evicted(made)
    assert other != victim and done.ok, "the room is taken from the other job"
    [kept] = made.refused
    assert (kept.job, kept.workload, kept.op, kept.count) == (refused, victim, "preempt", 1)
    assert kept.retry_at.replace(microsecond=0) == NOW + MINUTE
    assert "Access/permission denied" in kept.message
    assert world.sim.refused == [refused], "not tried again"
    shown = io.StringIO()
    print_plan(Console(file=shown, width=300), made)
    assert (
        f"job {refused} of {victim} on sim is no victim until 2026-11-22T10:01:00Z: its preempt failed "
        f"once, last at 2026-11-22T10:00:00Z (job {refused}: Access/permission denied)"
    ) in shown.getvalue(), shown.getvalue()
    assert sorted(j.workload for j in world.sim.observe().jobs if j.state.active) == sorted(
        [victim, "b/w"]
    )

    # once the backoff has passed, it is a victim again (b asks for more); refused again,
    # the next backoff is twice as long, and nothing else can make room meanwhile
    world.clock = NOW + 2 * MINUTE
    more = specs(with_b=True, more=True)
    made, done = world.cycle(more)
    assert evicted(made) == [victim] and not done.ok
    world.clock += MINUTE
    made, done = world.cycle(more)
    assert evicted(made) == [] and world.sim.refused == [refused, refused]
    [kept] = made.refused
    assert kept.count == 2 and kept.retry_at.replace(microsecond=0) == NOW + 4 * MINUTE
    assert [p.workload for p in made.pending if p.workload.startswith("b/")] == ["b/w2"]
    world.sim.refuse = set()  # the cluster lets it go: evicted once the backoff is over
    world.clock = NOW + 4 * MINUTE + timedelta(seconds=1)
    made, done = world.cycle(more)
    assert evicted(made) == [victim] and done.ok and made.refused == []


def plan_on(world: World, d: DesiredState) -> Plan:
    return plan(d, observe(d, dict(world.adapters), world.clock, world.store), now=world.clock)


def test_a_removed_workload_whose_cancel_was_refused_is_not_pruned_again_meanwhile(
    tmp_path: Path,
) -> None:
    """The prune of a job the cluster will not cancel failed in every cycle, and held back
    the submit that was to take its GPUs: now its GPUs stay taken, and the prune waits for
    the backoff too."""
    world = started(tmp_path)
    gone = world.refusing("a/two")
    without_two = one_node(0, 8, workload("one", "a", gpus=4), workload("w", "b", gpus=4))
    made, done = world.cycle(without_two)
    assert sorted((a.op.value, a.workload) for a in made.actions) == [
        ("cancel", "a/two"),
        ("submit", "b/w"),
    ]
    assert not done.ok
    world.clock += MINUTE / 2
    made, done = world.cycle(without_two)
    assert [a.op.value for a in made.actions if a.job == gone] == []
    assert [k.job for k in made.refused] == [gone] and world.sim.refused == [gone]
    # b's work takes the room of a's other job (a deserves nothing), not the refused one's
    assert sorted((a.op.value, a.workload) for a in made.actions) == [
        ("preempt", "a/one"),
        ("submit", "b/w"),
    ]
    world.clock = NOW + MINUTE + timedelta(seconds=1)
    world.sim.refuse = set()
    made, done = world.cycle(without_two)
    # pruned now, and a's other job takes its room back
    assert sorted((a.op.value, a.workload) for a in made.actions) == [
        ("cancel", "a/two"),
        ("submit", "a/one"),
    ]
    assert done.ok


def test_an_edit_whose_old_job_will_not_be_cancelled_leaves_it_running_and_waits(
    tmp_path: Path,
) -> None:
    world = started(tmp_path)
    old = world.refusing("a/one")
    # one's new shape needs a new job
    edited = one_node(8, 0, workload("one", "a", gpus=2), workload("two", "a", gpus=4))
    made, done = world.cycle(edited)
    assert [(a.op.value, a.workload, a.job) for a in made.actions if a.op.evicts] == [
        ("cancel", "a/one", old)
    ]
    assert not done.ok
    world.clock += MINUTE / 2
    made, done = world.cycle(edited)
    assert made.actions == [] and world.sim.refused == [old]
    [waits] = [p for p in made.pending if p.workload == "a/one"]
    assert waits.reason.message == (
        f"the edit needs a new job, but the cancel of job {old} failed once (job {old}: "
        "Access/permission denied): it runs on as it is, and the new version waits; tried "
        f"again after {made.refused[0].retry_at.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    ), waits.reason.message
