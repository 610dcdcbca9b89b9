"""A stop request (SIGTERM to `cp watch`) ends an apply between two actions: what ran is
recorded, the plan is left interrupted, and applying it again finishes it."""

from __future__ import annotations

import shutil
from pathlib import Path

from controlplane import workflow
from controlplane.apply import holding_lease, run_plan
from controlplane.observe import adapters_for

ROOT = Path(__file__).resolve().parents[2]


def test_a_stop_request_leaves_a_resumable_plan(tmp_path: Path) -> None:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    loaded = workflow.load(specs)
    plan = workflow.build_plan(specs, loaded)
    store = workflow.open_store(specs, None)
    adapters = adapters_for(loaded.desired, specs / ".cp", workflow.clock(None))
    asked = []

    def stop() -> bool:  # the signal arrives while the third action runs
        asked.append(1)
        return len(asked) > 3

    with holding_lease(store) as lease:
        first = run_plan(plan, adapters, store, observed_digest=None, lease=lease, stop=stop)
    assert first.stopped and [o.status for o in first.outcomes] == ["done"] * 3
    assert store.plan_status(plan.id) == "interrupted"
    with holding_lease(store) as lease:
        second = run_plan(plan, adapters, store, observed_digest=None, lease=lease)
    assert second.ok and second.resumed and not second.stopped
    assert [o.status for o in second.outcomes][:3] == ["skipped"] * 3
    assert store.plan_status(plan.id) == "applied"
    assert store.verify().ok
