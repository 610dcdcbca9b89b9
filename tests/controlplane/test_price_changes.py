"""A GPU-hour costs the price in force when it was used.

Slurm charges usage as it accrues, at the billing weights of the day: a change of
``costPerGpuHour`` counts from then on. It re-priced every GPU-hour of the month instead,
so raising the A100 price mid-month put a project over its cost budget at once for use
it made at the old price, and lowering it refunded past use (user trial). Like an edit to
the specs, a new price takes effect at the first observation that sees it (``cp apply``,
``cp watch``, ``cp observe``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controlplane.store import pricebook
from tests.builders import cluster, pool, project, workload
from tests.builders.cli import cp, ok, write_specs

Capsys = pytest.CaptureFixture[str]


def at(hour: int) -> str:
    return f"2027-03-01T{hour:02d}:00:00+00:00"


def specs(root: Path, price: float, budget: float = 400.0) -> Path:
    types = {"a100_80": {"memoryGiB": 80, "costPerGpuHour": price}}
    return write_specs(
        root,
        [
            cluster(pools=[pool("a100", nodes=2)], gpu_types=types),
            project("p", gpus=8, budget={"costPerMonth": budget}, fairshare={"byCost": True}),
            workload("w", "p", gpus=4, walltime="2d", command=["train"]),
        ],
    )


def month_cost(capsys: Capsys, root: Path, now: str) -> float:
    usage: dict[str, Any] = ok(cp(capsys, "usage", root, "--json", "--now", now)).json()
    cost: float = usage["projects"]["p"]["monthCost"]
    return cost


def test_a_price_raised_mid_month_counts_from_when_it_was_seen(
    tmp_path: Path, capsys: Capsys
) -> None:
    root = specs(tmp_path / "s", 3.0)
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", at(0)))
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", at(20)))
    assert month_cost(capsys, root, at(20)) == pytest.approx(4 * 20 * 3.0)
    specs(root, 6.0)
    # not observed yet: the old price still counts
    assert month_cost(capsys, root, at(21)) == pytest.approx(4 * 21 * 3.0)
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", at(21)))
    # 21 h at 3.0, then 1 h at 6.0; it was 22 h at 6.0 (528): over its budget of 400
    assert month_cost(capsys, root, at(22)) == pytest.approx(4 * 21 * 3.0 + 4 * 1 * 6.0)
    # and lowered again: the hours at 6.0 stay at 6.0
    specs(root, 1.0)
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", at(23)))
    assert month_cost(capsys, root, at(23)) == pytest.approx(4 * 21 * 3 + 4 * 2 * 6.0)


def test_the_budget_is_judged_at_the_prices_of_the_day(tmp_path: Path, capsys: Capsys) -> None:
    root = specs(tmp_path / "s", 3.0, budget=300.0)
    ok(cp(capsys, "apply", root, "--auto-approve", "--now", at(0)))
    specs(root, 6.0, budget=300.0)
    write_specs(
        root,
        [workload("x", "p", gpus=4, walltime="1h", command=["train"])],
        name="more.yaml",
    )
    ok(cp(capsys, "observe", root, "--now", at(20)))  # w ran 20 h at 3.0: 240 of 300
    data: dict[str, Any] = ok(cp(capsys, "plan", root, "--json", "--now", at(20))).json()
    assert [(a["op"], a["workload"]) for a in data["actions"]] == [("submit", "p/x")]


def test_the_book_cuts_a_run_where_the_price_changed() -> None:
    t = [datetime(2027, 3, 1, h, tzinfo=UTC) for h in range(24)]
    book = pricebook.noted({}, {("sim", "a100_80"): 3.0}, t[2])
    assert pricebook.noted(book, {("sim", "a100_80"): 3.0}, t[4]) is book  # nothing new
    book = pricebook.noted(book, {("sim", "a100_80"): 6.0}, t[5])
    book = pricebook.loads(pricebook.dumps(book))  # as the store keeps it
    # before the first entry, that entry's price; a type the book never saw, the fallback
    assert pricebook.stretches(book, "sim", "a100_80", t[0], t[8], None) == [
        (t[0], t[5], 3.0),
        (t[5], t[8], 6.0),
    ]
    assert pricebook.stretches(book, "sim", "a100_80", t[6], t[8], None) == [(t[6], t[8], 6.0)]
    assert pricebook.stretches(book, "sim", "v100", t[0], t[1], 1.5) == [(t[0], t[1], 1.5)]
