"""Counts read as English: "1 cluster", "2 clusters" ("1 clusters" was printed)."""

from __future__ import annotations

from controlplane.cli.views.sections import Section
from controlplane.cli.views.words import counted


def test_one_is_singular_and_the_rest_plural() -> None:
    assert [counted(n, "cluster") for n in (0, 1, 2, 1000)] == [
        "0 clusters",
        "1 cluster",
        "2 clusters",
        "1,000 clusters",
    ]
    assert counted(1.0, "GPU") == "1 GPU" and counted(2.5, "GPU") == "2.50 GPUs"


def test_one_row_left_out_is_one_more_row() -> None:
    assert "… and 1 more warning\n" in Section.tail(1, "warnings")
    assert "… and 2 more warnings\n" in Section.tail(2, "warnings")
    assert "… and 1 more to submit\n" in Section.tail(1, "to submit")
