"""A reconcile loop with nothing to do, over hours: it stores no plan per cycle, even while
the figures in a waiting workload's reason move (usage grows, decays, a backoff counts
down)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controlplane.watch import Watcher, WatchOptions
from tests.builders import cluster, pool, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]
T0 = datetime(2026, 1, 5, 8, tzinfo=UTC)


def _plans(specs: Path) -> int:
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        (count,) = db.execute("SELECT count(*) FROM plans").fetchone()
    return int(count)


def _apply(capsys: Capsys, specs: Path, at: datetime) -> dict[str, object]:
    done = cp(capsys, "apply", specs, "--auto-approve", "--json", "--now", at.isoformat())
    assert done.code == 0, done.out + done.err
    result: dict[str, object] = done.json()
    return result


def _waiting_over_budget(capsys: Capsys, root: Path) -> Path:
    """A project whose budget its running job spent, and a second workload of it waiting
    over budget since T0 + 4 h."""
    budget = {"gpuHoursPerMonth": 10}
    docs = [
        cluster(),
        project("p", gpus=16, budget=budget),
        workload("long", "p", gpus=8, walltime="3d"),
    ]
    specs = write_specs(root, docs)
    _apply(capsys, specs, T0)
    write_specs(specs, [*docs, workload("later", "p", gpus=8, walltime="3d")])
    assert not _apply(capsys, specs, T0 + timedelta(hours=4))["actions"]
    shown = cp(capsys, "plan", specs, "--json", "--now", (T0 + timedelta(hours=4)).isoformat())
    assert [p["reason"]["code"] for p in shown.json()["pending"]] == ["over-budget"]
    return specs


def test_a_wait_whose_figures_move_does_not_store_a_plan_per_idle_cycle(
    tmp_path: Path, capsys: Capsys
) -> None:
    """A workload waiting over budget: its reason names the GPU-hours used this month, which
    grow while the project's other job runs. Every idle cycle's plan then differed from the
    last applied one in that figure alone, and was stored: a record per cycle, for as long
    as the wait lasted (user trial: 12 records in 12 idle cycles). The loop's outcome did
    not change: nothing to do, the same workloads waiting for the same reasons."""
    specs = _waiting_over_budget(capsys, tmp_path / "s")
    before = _plans(specs)
    for cycle in range(1, 7):
        idle = _apply(capsys, specs, T0 + timedelta(hours=4, minutes=30 * cycle))
        assert not idle["actions"]
    assert _plans(specs) - before <= 1, "a plan stored for every idle cycle"


def test_an_idle_cycle_tells_the_wait_as_it_stands_now(tmp_path: Path, capsys: Capsys) -> None:
    """The cycle that stores nothing still tells the wait with the figures of now, not those
    of the stored plan it names, hours old; and that plan is the one `cp show` finds."""
    specs = _waiting_over_budget(capsys, tmp_path / "s")

    def cycle(hours: int) -> tuple[str, str]:
        at = (T0 + timedelta(hours=hours)).isoformat()
        done = cp(capsys, "apply", specs, "--auto-approve", "--now", at)
        assert done.code == 0, done.out + done.err
        named = done.out.split()[1]  # "Plan <id>  made ..."
        wait = " ".join(done.out.split("over-budget:", 1)[1].split()[:6])
        return named, wait

    first, then = cycle(5), cycle(9)
    assert first[0] == then[0], "the second idle cycle stored a plan of its own"
    assert first[1] != then[1], f"hours later, the same figures: {then[1]}"
    assert cp(capsys, "show", then[0], specs).code == 0


def test_a_plan_with_work_waiting_does_not_say_the_clusters_match_the_specs(
    tmp_path: Path, capsys: Capsys
) -> None:
    """With a workload of the specs waiting (here over budget), an empty plan read "No
    changes. The clusters match the specs." (and `apply --json`: "no changes: the clusters
    match the specs"): they do not, the workload runs nowhere."""
    specs = _waiting_over_budget(capsys, tmp_path / "s")
    at = (T0 + timedelta(hours=5)).isoformat()
    shown = cp(capsys, "plan", specs, "--now", at)
    assert shown.code == 0, shown.out + shown.err
    assert "The clusters match the specs" not in shown.out
    assert "1 workload waits" in shown.out
    done = _apply(capsys, specs, T0 + timedelta(hours=5))
    assert done["message"] == "no changes now: 1 workload waits"


def test_a_plan_held_back_is_not_stored_again_every_cycle(tmp_path: Path, capsys: Capsys) -> None:
    """The prune guard holds back a plan that would cancel most running work: it needs a
    person. Every cycle then stored another copy of the same plan (a new id: the id hashes
    the time), ~8,600 records over a weekend at a 30 s interval (user trial). Later cycles
    name the plan held back, the one `cp show` finds."""
    docs = [cluster(), project("p", gpus=16)]
    names = [f"w{i}" for i in range(4)]
    specs = write_specs(tmp_path / "s", [*docs, *(workload(n, "p", gpus=4) for n in names)])
    watcher = Watcher(specs, WatchOptions(quiet=0, auto_approve=True), print)
    assert not watcher.cycle().failed
    write_specs(specs, [*docs, workload(names[0], "p", gpus=4)])  # 3 of 4 leave the specs
    before = _plans(specs)
    lines = [watcher.cycle() for _ in range(4)]
    assert all(c.held_back for c in lines), [c.line for c in lines]
    assert _plans(specs) - before == 1, "the held-back plan stored once per cycle"
    named = {c.line.split(" plan ", 1)[1].split(":", 1)[0] for c in lines}
    assert len(named) == 1, named
    assert cp(capsys, "show", named.pop(), specs).code == 0


def test_an_idle_loop_does_not_pass_a_leftover_gpu_round_and_round(
    tmp_path: Path, capsys: Capsys
) -> None:
    """Three projects deserving 8 GPUs each, all wanting more, on 32 GPUs: the 8 over quota
    split 2.67 each, and the 2 whole GPUs left go to the largest fractions. Past usage
    bends the fractions, and the project holding a leftover GPU uses it, so every cycle the
    fractions swapped by a hair and the loop reclaimed one job and started another, for
    ever, nothing having changed (user trial: 11 preemptions in 11 cycles). Fractions a
    hair apart are a tie, and a tie leaves the GPU where it is."""
    docs = [cluster(pools=[pool(maxWalltime="7d")])]  # 4 nodes of 8
    for name in ("a", "b", "c"):
        docs += [project(name, gpus=8)]
        docs += [workload(f"j{i}", name, gpus=1, walltime="7d") for i in range(14)]
    specs = write_specs(tmp_path / "s", docs)
    _apply(capsys, specs, T0)
    evicted = []
    for cycle in range(1, 7):
        done = _apply(capsys, specs, T0 + timedelta(minutes=10 * cycle))
        evicted += [a for a in done["actions"] if a["op"] == "preempt"]  # type: ignore[attr-defined]
    assert len(evicted) <= 1, evicted
