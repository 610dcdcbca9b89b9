"""What a loop leaves in the store: a busy org's plans as stored, and a prune of them.

Every apply stores its plan, and a busy org's plan is mostly its list of waiting work with
reasons. This plans a busy org (``benchmarks/busy.py``), then stores that plan ``--plans``
times over in a SQLite store, each a loop's steady cycle: the same waiting work, its first
``--actions`` actions (a loop's cycle starts a few jobs). It prints the JSON's size, the
store file's size per plan, the time to store one, and what ``cp store prune`` then takes
to remove all but the last (and ``--vacuum`` to give the space back).

Run: .venv/bin/python -m benchmarks.storage [--nodes 300] [--plans 200] [--actions 5]

Ratios: the stored size against the plan's JSON, in the same run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from benchmarks.busy import busy_org, write_org
from controlplane import statefiles
from controlplane.plan import Plan
from controlplane.reconcile import plan
from controlplane.store import Store
from solvers.policy import Policy
from specs.loader import load_specs


def busy_plan(nodes: int, root: Path) -> Plan:
    """The plan of a busy org of ``nodes`` nodes (five waiting workloads a node)."""
    specs, observed = write_org(busy_org(nodes, 5 * nodes), root)
    snapshot = statefiles.read_snapshot(observed)
    return plan(
        load_specs(specs).desired, snapshot, now=snapshot.now, policy=Policy(time_limit=300)
    )


def cycles(made: Plan, count: int, actions: int) -> list[Plan]:
    """``count`` steady cycles of a loop after ``made``: each its waiting work, a few
    actions, a minute after the one before (ids differ)."""
    out = []
    for i in range(count):
        at = made.created_at + timedelta(minutes=i)
        cycle = made.model_copy(update={"actions": made.actions[:actions], "created_at": at})
        out.append(cycle.model_copy(update={"id": f"{i:016x}"}))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--plans", type=int, default=200)
    parser.add_argument("--actions", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        made = busy_plan(args.nodes, Path(tmp) / "org")
        steady = cycles(made, args.plans, args.actions)
        text = steady[0].to_json(indent=None)
        file = Path(tmp) / "store.db"
        store = Store(f"sqlite:///{file}", init=True, create_dir=True)
        start = time.perf_counter()
        for cycle in steady:
            store.save_plan(cycle)
        saving = (time.perf_counter() - start) / len(steady)
        size = file.stat().st_size
        # all but the last: its moment is the cutoff
        before = steady[-1].created_at
        start = time.perf_counter()
        pruned = store.prune(before)
        pruning = time.perf_counter() - start
        start = time.perf_counter()
        store.vacuum()
        vacuuming = time.perf_counter() - start
        after = file.stat().st_size
        ok = store.verify().ok
        store.close()
    print(
        f"busy org: {args.nodes} nodes; its plan: {len(made.actions):,} actions, "
        f"{len(made.pending):,} waiting"
    )
    print(
        "| plan JSON KB | stored KB a plan | x JSON | store s a plan | plans pruned | prune s "
        "| vacuum s | file MB before -> after | verified |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|---|")
    print(
        f"| {len(text) / 1024:,.0f} | {size / len(steady) / 1024:,.1f} "
        f"| {size / len(steady) / len(text):.3f} | {saving:.3f} | {pruned.plans:,} "
        f"| {pruning:.2f} | {vacuuming:.2f} | {size / 2**20:,.1f} -> {after / 2**20:,.1f} | {ok} |"
    )


if __name__ == "__main__":
    main()
