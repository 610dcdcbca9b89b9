"""A spec directory swapped for another checkout (git-sync pointing its symlink at the next
one, CI's fresh clone) under a store kept outside it (``--db``): the simulated clusters
are the same after the swap, as real ones are.

The simulator kept its clusters under the spec directory's ``.cp/``, which a new checkout
does not have: after a swap the simulated cluster was empty, while the store still held
placeholders naming its jobs ("job 1001 waits in the cluster's own queue": soak trial),
and the next plan started every workload again. The simulator now keeps them beside the
SQLite store that records their jobs; without ``--db`` that is ``DIR/.cp/``, as before.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, ok, write_specs

Capsys = pytest.CaptureFixture[str]


def checkout(root: Path) -> Path:
    """The specs as a fresh checkout has them: no ``.cp/`` (it is git-ignored)."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]
    docs = [cluster(pools=pools), project("p", gpus=16)]
    return write_specs(root, [*docs, *(workload(f"w{i}", "p", gpus=2) for i in range(4))])


def jobs(capsys: Capsys, specs: Path, *db: str) -> dict[str, Any]:
    """The simulated cluster's jobs of ours, by workload, as `cp get jobs` shows them."""
    listed = ok(cp(capsys, "get", "jobs", specs, "-o", "json", *db)).json()["items"]
    return {j["workload"]: (j["id"], j["state"]) for j in listed if j["workload"]}


def test_a_checkout_swapped_for_another_finds_the_same_simulated_jobs(
    tmp_path: Path, capsys: Capsys
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    db = ["--db", f"sqlite:///{state / 'controlplane.db'}"]
    first, second = checkout(tmp_path / "first"), checkout(tmp_path / "second")
    ok(cp(capsys, "apply", first, "--auto-approve", *db))
    running = jobs(capsys, first, *db)
    assert len(running) == 4

    # the next checkout of the same specs: the same cluster, nothing to do
    assert jobs(capsys, second, *db) == running
    plan = cp(capsys, "plan", second, "--detailed-exitcode", "--json", *db)
    assert plan.code == 0, [a["op"] + " " + a["workload"] for a in plan.json()["actions"]]
    again = ok(cp(capsys, "apply", second, "--auto-approve", *db))
    assert "No changes" in again.out, again.out
    assert jobs(capsys, second, *db) == running

    shutil.rmtree(first)  # the old checkout goes: nothing of the cluster goes with it
    assert jobs(capsys, second, *db) == running
    assert (state / "simulator").is_dir() and not (second / ".cp" / "simulator").exists()


def test_without_a_store_elsewhere_the_simulator_stays_in_the_spec_repo(
    tmp_path: Path, capsys: Capsys
) -> None:
    """The default is as it was: the store and the simulated clusters in ``DIR/.cp/``."""
    specs = checkout(tmp_path / "specs")
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    assert (specs / ".cp" / "controlplane.db").is_file()
    assert (specs / ".cp" / "simulator" / "sim.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["specs"]


def test_a_simulated_cluster_kept_in_the_spec_repo_is_carried_on_beside_the_store(
    tmp_path: Path, capsys: Capsys
) -> None:
    """Upgrading: a simulated cluster an earlier version kept under ``DIR/.cp/`` beside a
    store given by --db is read from there until it has a state of its own beside the
    store (the next change writes it there): its jobs are not lost to the move."""
    state = tmp_path / "state"
    state.mkdir()
    db = ["--db", f"sqlite:///{state / 'controlplane.db'}"]
    specs = checkout(tmp_path / "specs")
    ok(cp(capsys, "apply", specs, "--auto-approve", *db))
    running = jobs(capsys, specs, *db)
    (specs / ".cp").mkdir(exist_ok=True)  # where an earlier version kept it
    shutil.move(state / "simulator", specs / ".cp" / "simulator")

    assert jobs(capsys, specs, *db) == running
    assert cp(capsys, "plan", specs, "--detailed-exitcode", *db).code == 0
    assert not (state / "simulator").exists(), "a plan writes nothing"
    ok(cp(capsys, "observe", specs, *db))
    moved = json.loads((state / "simulator" / "sim.json").read_text())["state"]["jobs"]
    assert {j["workload"]: (j["id"], j["state"]) for j in moved} == running
    assert jobs(capsys, specs, *db) == running
