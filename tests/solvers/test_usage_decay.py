"""Usage over time: fairshare's decay, each moment of use by its own age as Slurm's does,
and the month's GPU-hours up to the plan's moment.

A run's GPU-hours decayed as one block from the moment it ended: a 4-hour job counted as
fresh as a job that ran its last minute, two projects with the same use (one long job
against four short ones back to back) stood far apart, and a running job's hours did not
decay at all (user trial).
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from solvers.sitepolicy.budgets import usage_this_month
from solvers.sitepolicy.prices import Prices
from solvers.sitepolicy.usage import decayed_gpu_hours
from specs.snapshot import UsageRecord
from tests.builders import NOW

HOUR = 3600


def run(start_h: float, end_h: float, gpus: int = 8) -> UsageRecord:
    """A run from ``start_h`` to ``end_h`` hours before NOW."""
    return UsageRecord(
        project="p",
        gpu_hours=gpus * (start_h - end_h),
        started_at=NOW - timedelta(hours=start_h),
        ended_at=NOW - timedelta(hours=end_h),
    )


def test_one_long_run_and_its_pieces_back_to_back_decay_alike() -> None:
    long = decayed_gpu_hours([run(4, 0)], NOW, HOUR)
    pieces = decayed_gpu_hours([run(4, 3), run(3, 2), run(2, 1), run(1, 0)], NOW, HOUR)
    assert long == pytest.approx(pieces)
    # 8 GPUs for 4 half-lives: 8 x (1 - 2^-4) half-lives' worth / ln 2
    assert long == pytest.approx(8 * (1 - 0.5**4) / math.log(2))


def test_use_decays_by_its_own_age() -> None:
    # a run that ended 5 half-lives ago weighs what its hours weighed then, halved 5 times
    assert decayed_gpu_hours([run(6, 5)], NOW, HOUR) == pytest.approx(
        decayed_gpu_hours([run(1, 0)], NOW, HOUR) * 0.5**5
    )
    # with a very long half-life nothing decays
    assert decayed_gpu_hours([run(4, 0)], NOW, 10**9) == pytest.approx(32, rel=1e-4)


def test_use_after_now_is_not_counted() -> None:
    """A plan made for a moment in the past sees only what was used before it."""
    straddles = run(2, -2)  # from two hours ago to two hours from now
    assert decayed_gpu_hours([straddles], NOW, HOUR) == pytest.approx(
        decayed_gpu_hours([run(2, 0)], NOW, HOUR)
    )
    assert decayed_gpu_hours([run(-1, -2)], NOW, HOUR) == 0


def test_a_record_without_its_start_decays_from_its_end() -> None:
    """Records written before runs carried their start (snapshots of older versions)."""
    old = UsageRecord(project="p", gpu_hours=10, ended_at=NOW - timedelta(hours=2))
    assert decayed_gpu_hours([old], NOW, HOUR) == pytest.approx(10 * 0.25)


def test_the_month_counts_what_was_used_up_to_now() -> None:
    """``cp usage --now`` in the middle of a run counted the whole run in the month
    column, while the decayed column counted only what came before (user trial)."""
    half = usage_this_month([run(2, -2)], NOW, Prices({}))  # 2 of its 4 hours are past
    assert half["p"].gpu_hours == pytest.approx(16)
    assert usage_this_month([run(-1, -2)], NOW, Prices({})) == {}
    assert usage_this_month([run(3, 1)], NOW, Prices({}))["p"].gpu_hours == pytest.approx(16)
