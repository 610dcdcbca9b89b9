"""A failed action holds back only what may depend on it: the rest of its cluster, and the
workloads with an action there. The first failure stopped the whole apply, so a job stuck
on one cluster held up a submit on another for as long as it stayed stuck (user trial on
a real cluster). Two simulated clusters, the real store; ``near`` stops answering between
the plan and its apply."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from adapters.base import Adapter
from adapters.simulator import SimulatorAdapter
from controlplane.apply import ApplyReport, apply_plan
from controlplane.cli.views.apply import verdict
from controlplane.observe import observe
from controlplane.plan import Plan
from controlplane.reconcile import plan
from controlplane.store import Store
from specs.desired import DesiredState
from specs.observation import observation_of
from tests.builders import NOW, cluster, desired, pool, project, workload
from tests.builders.incidents import Flaky


def specs(w_on: str) -> DesiredState:
    return desired(
        [
            cluster("near", pools=[pool(nodes=1)]),
            cluster("far", pools=[pool(nodes=1)]),
            project("p", gpus=16),
            workload("w", "p", gpus=4, clusters=[w_on]),
            workload("x", "p", gpus=2, clusters=["near"]),
            workload("y", "p", gpus=2, clusters=["far"]),
        ]
    )


class World:
    def __init__(self, tmp_path: Path) -> None:
        sims = {
            name: SimulatorAdapter(c, state_dir=tmp_path, clock=lambda: NOW)
            for name, c in specs("near").clusters.items()
        }
        self.near = Flaky(sims["near"])
        self.adapters: dict[str, Adapter] = {"near": self.near, "far": sims["far"]}
        self.store = Store(f"sqlite:///{tmp_path}/db")

    def planned(self, d: DesiredState) -> tuple[Plan, object]:
        snap = observe(d, dict(self.adapters), NOW, self.store)
        return plan(d, snap, now=NOW), observation_of(snap)

    def apply(self, made: Plan, seen: object) -> ApplyReport:
        return apply_plan(made, self.adapters, self.store, observed=seen)  # type: ignore[arg-type]

    def jobs(self, name: str) -> list[str]:
        return sorted(j.workload for j in self.adapters[name].observe().jobs if j.state.active)


def outcomes(report: ApplyReport) -> dict[tuple[str, str, str], str]:
    return {
        (o.action.op.value, o.action.workload, o.action.cluster): o.status for o in report.outcomes
    }


def test_a_failure_on_one_cluster_does_not_hold_up_the_other(tmp_path: Path) -> None:
    world = World(tmp_path)
    made, seen = world.planned(specs("near"))
    world.near.down = True
    report = world.apply(made, seen)
    assert not report.ok
    first, then = [a.workload for a in made.execution_order() if a.cluster == "near"]
    assert outcomes(report) == {
        ("submit", first, "near"): "failed",
        ("submit", then, "near"): "held",
        ("submit", "p/y", "far"): "done",
    }
    held = next(o for o in report.outcomes if o.status == "held")
    assert f"it may depend on the submit of {first} on near, which failed" in held.message
    assert world.jobs("far") == ["p/y"]
    said = io.StringIO()
    verdict(Console(file=said, width=200), report)
    assert "Apply failed: 1 done, 1 failed, 1 held back by the failure" in said.getvalue()
    # the cluster answers again: the same plan resumes and does what it held back
    world.near.down = False
    again = world.apply(made, seen)
    assert again.ok and again.resumed
    assert world.jobs("near") == ["p/w", "p/x"] and world.jobs("far") == ["p/y"]


def test_a_workload_moving_away_from_a_failed_cluster_does_not_start_twice(
    tmp_path: Path,
) -> None:
    """``w`` moves from near to far (cancel there, submit here): while its cancel cannot
    run, its new job must not start, or it would run twice."""
    world = World(tmp_path)
    made, seen = world.planned(specs("near"))
    assert world.apply(made, seen).ok
    moved, seen = world.planned(specs("far"))
    assert {(a.op.value, a.workload, a.cluster) for a in moved.actions} == {
        ("cancel", "p/w", "near"),
        ("submit", "p/w", "far"),
    }
    world.near.down = True
    report = world.apply(moved, seen)
    assert outcomes(report) == {
        ("cancel", "p/w", "near"): "failed",
        ("submit", "p/w", "far"): "held",
    }
    assert world.jobs("far") == ["p/y"], "not started beside the job it replaces"
