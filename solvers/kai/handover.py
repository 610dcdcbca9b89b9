"""Whom an eviction's GPUs finally went to, within one cycle.

A victim is told whom its GPUs are taken for: the job its step placed. A later step of
the same cycle may take that place again (preempt, after reclaim, gives it to a job that
outranks the first beneficiary), and the plan would then say a job was evicted for work
that waits. Once the cycle's steps are done, each victim whose beneficiary ends without
GPUs is told who took its place, following the chain of places taken.
"""

from __future__ import annotations

from collections.abc import Callable

from solvers import reasons
from solvers.kai.disruption import Ledger
from specs.actions import Reason


def settle(ledger: Ledger, placed: Callable[[str], bool]) -> dict[str, str]:
    """Rewrite the reasons (``disrupted`` and ``waiting``) of victims whose beneficiary
    ``placed`` says holds nothing at the cycle's end. Returns the others, victim to
    beneficiary: whom a later round may yet take the place from."""
    for victim in ledger.first_for:
        for table in (ledger.disrupted, ledger.waiting):
            if victim in table:
                table[victim] = handed_on(table[victim], victim, ledger.first_for, placed)
    return {v: b for v, b in ledger.first_for.items() if placed(b)}


def handed_on(
    reason: Reason, victim: str, gave_to: dict[str, str], placed: Callable[[str], bool]
) -> Reason:
    """``reason``, told to ``victim`` when its GPUs were taken for ``gave_to[victim]``,
    saying who holds its place at the end if that beneficiary ends without GPUs
    (``gave_to``: each victim's first beneficiary)."""
    beneficiary = gave_to.get(victim)
    if beneficiary is None or placed(beneficiary):
        return reason
    seen = {beneficiary}
    taker = gave_to.get(beneficiary)
    while taker is not None and not placed(taker) and taker not in seen:
        seen.add(taker)
        taker = gave_to.get(taker)
    return reasons.place_taken(
        reason, beneficiary, taker if taker is not None and placed(taker) else None
    )
