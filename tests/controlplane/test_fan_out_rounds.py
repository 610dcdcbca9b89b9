"""A fan-out round stays won after the cluster forgets its winner.

Two simulated clusters, ``near`` and ``far``, each busy for a while, and a fan-out
workload with a candidate queued on each. ``far`` stops answering; ``near``'s candidate
starts and runs to completion, and the store records the completion. ``near`` then
forgets the ended job, as Slurm does after ``MinJobAge`` (the ``Forgetful`` wrapper below
hides ended jobs five minutes after their end: the simulator never forgets, and this is
the one behaviour of a real controller the test needs; everything else is the real
simulator and SQLite store). When ``far`` answers again, its candidate lost the round: it
is cancelled and the workload is complete, instead of the candidate being left to run
the finished work again (user trial).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from adapters.base import ActionResult
from adapters.simulator import SimulatorAdapter
from controlplane.apply import apply_plan
from controlplane.observe import observe
from controlplane.plan import Plan
from controlplane.reconcile import plan
from controlplane.store import Store
from specs.actions import Action, Op, ReasonCode
from specs.desired import DesiredState
from specs.observation import observation_of
from specs.snapshot import ClusterState
from tests.builders import NOW, cluster, desired, pool, project, workload
from tests.builders.incidents import Flaky


class Forgetful(Flaky):
    """A simulated cluster that can stop answering, and that drops an ended job from what
    it reports five minutes after its end (Slurm's default ``MinJobAge``)."""

    def __init__(self, inner: SimulatorAdapter) -> None:
        super().__init__(inner)
        self.clock = inner.clock

    def observe(self) -> ClusterState:
        state = super().observe()
        now = self.clock()
        kept = [
            j for j in state.jobs if j.ended_at is None or now - j.ended_at < timedelta(minutes=5)
        ]
        return state.model_copy(update={"jobs": kept})


def specs(*, fan_out: bool = True) -> DesiredState:
    docs = [
        cluster("near", pools=[pool(nodes=1)]),
        cluster("far", pools=[pool(nodes=1)]),
        project("p", gpus=16),
        workload("busy-near", "p", gpus=8, walltime="1h", clusters=["near"]),
        workload("busy-far", "p", gpus=8, walltime="3h", clusters=["far"]),
    ]
    if fan_out:
        strategy = {"fanOut": True, "maxParallel": 2}
        docs.append(workload("w", "p", gpus=4, walltime="1h", strategy=strategy))
    return desired(docs)


class World:
    def __init__(self, tmp_path: Path) -> None:
        self.now = NOW
        self.adapters = {
            name: Forgetful(SimulatorAdapter(c, state_dir=tmp_path, clock=lambda: self.now))
            for name, c in specs().clusters.items()
        }
        self.store = Store(f"sqlite:///{tmp_path}/db")

    def cycle(self, d: DesiredState, at: datetime, *, act: bool = True) -> Plan:
        self.now = at
        snap = observe(d, dict(self.adapters), at, self.store)
        made = plan(d, snap, now=at)
        if act:
            report = apply_plan(
                made, dict(self.adapters), self.store, observed=observation_of(snap)
            )
            assert report.ok, report.failed
        return made


def test_a_candidate_that_lost_to_a_forgotten_winner_is_cancelled(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.cycle(specs(fan_out=False), NOW)  # both clusters busy
    made = world.cycle(specs(), NOW + timedelta(minutes=5))
    assert sorted((a.op, a.cluster) for a in made.actions) == [
        (Op.SUBMIT, "far"),
        (Op.SUBMIT, "near"),
    ]
    world.adapters["far"].down = True
    world.cycle(specs(), NOW + timedelta(minutes=61))  # near's candidate started at 60
    world.cycle(specs(), NOW + timedelta(minutes=123))  # and is seen completed (at 120)
    world.adapters["far"].down = False  # near has forgotten it by now

    made = world.cycle(specs(), NOW + timedelta(minutes=140), act=False)
    [cancel] = made.actions
    assert (cancel.op, cancel.cluster, cancel.reason.code) == (
        Op.CANCEL,
        "far",
        ReasonCode.FAN_OUT_LOSER,
    )
    assert "ran to completion" in cancel.reason.message
    assert [p.workload for p in made.pending] == []


def test_a_later_round_is_not_cancelled_for_an_earlier_completion(tmp_path: Path) -> None:
    """The completion a store remembers decides only its own round: the candidates of the
    next checkpoint segment, submitted by a later plan, race on once it is forgotten."""
    docs = [
        cluster("near", pools=[pool(nodes=1)]),
        cluster("far", pools=[pool(nodes=1)]),
        project("p", gpus=24),
        workload("busy-near", "p", gpus=8, walltime="1h", clusters=["near"]),
        workload("busy-far", "p", gpus=8, walltime="3h", clusters=["far"]),
        workload(
            "w",
            "p",
            gpus=4,
            walltime="1h",
            checkpoint={"signal": "USR1", "grace": "5m", "total": "2h"},
            strategy={"fanOut": True, "maxParallel": 2},
        ),
    ]
    later = desired([*docs, workload("next", "p", gpus=8, walltime="1h", clusters=["near"])])
    world = World(tmp_path)
    world.cycle(specs(fan_out=False), NOW)
    world.cycle(desired(docs), NOW + timedelta(minutes=5))  # segment 1: near and far
    world.cycle(desired(docs), NOW + timedelta(minutes=61))  # near's runs; far's cancelled
    made = world.cycle(later, NOW + timedelta(minutes=125))  # segment 1 done; near busy again
    assert sorted((a.op, a.workload, a.cluster) for a in made.actions if a.workload == "p/w") == [
        (Op.SUBMIT, "p/w", "far"),
        (Op.SUBMIT, "p/w", "near"),
    ]
    made = world.cycle(later, NOW + timedelta(minutes=140), act=False)
    assert [a for a in made.actions if a.workload == "p/w"] == []
    assert [(p.workload, p.reason.code) for p in made.pending] == [("p/w", ReasonCode.SUBMITTED)]


class Crash(Exception):
    """The apply process dies (killed, the host lost) in the middle of an action."""


def test_an_interrupted_candidate_submit_is_not_linked_to_a_rival_elsewhere(
    tmp_path: Path,
) -> None:
    """The apply dies while it submits a fan-out workload's second candidate, before that
    cluster got it. The next observation links actions left ``started`` to the jobs of
    their plan in view; it linked this one to the first candidate's job on the other
    cluster (same plan, same workload), so the history said the job ran where it never
    was, and a resumed apply skipped the candidate (user trial)."""
    world = World(tmp_path)
    world.cycle(specs(fan_out=False), NOW)
    near = world.adapters["near"]
    real = near.execute

    def dies(action: Action, *, plan_id: str) -> ActionResult:
        if action.workload == "p/w":
            raise Crash("killed before sbatch ran")
        return real(action, plan_id=plan_id)

    near.execute = dies  # type: ignore[method-assign]
    made = world.cycle(specs(), NOW + timedelta(minutes=5), act=False)
    assert [a.cluster for a in made.execution_order()] == ["far", "near"]
    world.now = NOW + timedelta(minutes=5)
    with pytest.raises(Crash):
        apply_plan(made, dict(world.adapters), world.store, observed=None)
    near.execute = real  # type: ignore[method-assign]
    world.cycle(specs(), NOW + timedelta(minutes=6), act=False)  # an observation that records
    rows = {r.cluster: (r.status, r.job) for r in world.store.actions(made.id)}
    assert rows["far"][0] == "done"
    assert rows["near"] == ("started", None)
