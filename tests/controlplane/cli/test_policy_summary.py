"""The policy section's headline counts what moved: a queue shown for its policy change
whose fair share and allocation stayed as they were is no "allocation changed" (trial T:
a budget lowered read "1 policy change, 1 allocation changed" over a row 12 -> 12, 8 -> 8)."""

from __future__ import annotations

from controlplane.cli.views.policy import summary
from controlplane.plan import PolicyChange, PolicyDiff, ShareChange


def _row(name: str, fair: tuple[float, float], held: tuple[float, float]) -> ShareChange:
    return ShareChange(
        kind="project",
        name=name,
        fair_share_before=fair[0],
        fair_share_after=fair[1],
        allocated_before=held[0],
        allocated_after=held[1],
    )


def test_a_row_where_nothing_moved_is_not_counted() -> None:
    diff = PolicyDiff(
        against="the plan last applied (abc)",
        changes=[
            PolicyChange(
                kind="project",
                name="ads",
                field="budget.gpuHoursPerMonth",
                before=5000.0,
                after=4000.0,
            )
        ],
        shares=[_row("ads", (12, 12), (8, 8))],
    )
    assert summary(diff) == "Against the plan last applied (abc): 1 policy change."
    rows = [*diff.shares, _row("cv", (8, 6), (8, 6)), _row("nlp", (20, 20), (16, 18))]
    assert summary(diff.model_copy(update={"shares": rows})) == (
        "Against the plan last applied (abc): 1 policy change, 1 fair share moved, "
        "1 allocation changed."
    )
