"""KAI-Scheduler conformance, driven through the public CLI contract.

For each scenario: specs + snapshot -> ``cp plan --observed --json`` -> ``cp apply PLAN
--observed`` (the simulator engine applies it to the snapshot) -> repeat until the plan is
empty, then five more rounds must change nothing (KAI's fixed point). The final state is
compared with KAI's expected outcome: where every job runs, what stays pending, what was
evicted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.builders.cli import cp, write_specs
from tests.conformance.scenarios import final_placement, load_scenarios, snapshot, spec_documents

SCENARIOS = {sc["id"]: sc for sc in load_scenarios()}
MAX_ROUNDS = 6
STABLE_ROUNDS = 5


def reconcile_until_stable(
    capsys: pytest.CaptureFixture[str], tmp: Path, sc: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    specs = write_specs(tmp / "specs", spec_documents(sc))
    snap_file = tmp / "observed.json"
    snap_file.write_text(json.dumps(snapshot(sc)))
    plan_file = tmp / "plan.json"
    plans = []
    for _ in range(MAX_ROUNDS):
        res = cp(capsys, "plan", specs, "--observed", snap_file, "--out", plan_file, "--json")
        assert res.code == 0, res.err
        plan = res.json()
        plans.append(plan)
        if not plan["actions"]:
            break
        res = cp(capsys, "apply", plan_file, "--dir", specs, "--observed", snap_file)
        assert res.code == 0, res.err
    else:
        pytest.fail(f"no fixed point after {MAX_ROUNDS} rounds: {plans[-1]['actions']}")
    settled = json.loads(snap_file.read_text())
    for _ in range(STABLE_ROUNDS):
        res = cp(capsys, "plan", specs, "--observed", snap_file, "--json")
        assert res.json()["actions"] == [], "a later cycle changed a settled state"
    return settled, plans


@pytest.mark.conformance
@pytest.mark.parametrize("scenario_id", sorted(SCENARIOS))
def test_kai_scenario(scenario_id: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    sc = SCENARIOS[scenario_id]
    expected = sc["expected"]
    settled, plans = reconcile_until_stable(capsys, tmp_path, sc)
    running = final_placement(settled)

    want = {
        job: sorted(n for n in nodes if n is not None) for job, nodes in expected["running"].items()
    }
    got = {job: [n for n in running.get(job, []) if n is not None] for job in want}
    for job, nodes in expected["running"].items():
        assert job in running, f"{job} should run; plans: {[p['actions'] for p in plans]}"
        if None not in nodes:
            assert got[job] == want[job], f"{job} on {running[job]}, KAI puts it on {nodes}"
        else:
            assert len(running[job]) == len(nodes)
    for job in expected["pending"] + expected["evicted"]:
        assert job not in running, f"{job} should not run"
    # nothing else runs either: the GPU totals match KAI's
    assert set(running) == set(expected["running"])
    # every workload that waits says why
    waiting = {p["workload"].split("/", 1)[1] for p in plans[-1]["pending"]}
    assert set(expected["pending"]) | set(expected["evicted"]) <= waiting
    assert all(p["reason"]["message"] for p in plans[-1]["pending"])
    if "nothing-happens" in sc["tags"]:
        evictions = [
            a for p in plans for a in p["actions"] if a["op"] in ("preempt", "cancel", "move")
        ]
        assert evictions == [], "a nothing-happens scenario must not evict or move anything"
