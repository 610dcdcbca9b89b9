"""``cp history`` filters: by project, job, operation and time, not only by one workload.

On a store of hundreds of plans, "who preempted my job 1234, and why" meant paging
through ``cp history --limit 3000`` (user trial U): the history could be narrowed to one
workload only. The filters combine (all must hold), and ``--limit`` counts what they keep.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.builders.cli import cp

Capsys = pytest.CaptureFixture[str]
ROOT = Path(__file__).resolve().parents[3]
FIRST, SECOND = "2027-03-01T10:00:00+00:00", "2027-03-01T12:00:00+00:00"


@pytest.fixture
def two_applies(tmp_path: Path, capsys: Capsys) -> Path:
    """The quick start applied (ten submits), then its vision project removed (cancels)."""
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", FIRST).code == 0
    (specs / "workloads" / "vision.yaml").unlink()
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", SECOND).code == 0
    return specs


def _rows(capsys: Capsys, specs: Path, *args: str) -> list[dict[str, object]]:
    res = cp(capsys, "history", specs, "--json", *args)
    assert res.code == 0, res.err
    rows: list[dict[str, object]] = res.json()
    return rows


def test_each_filter_keeps_only_what_it_names(two_applies: Path, capsys: Capsys) -> None:
    everything = _rows(capsys, two_applies)
    cancels = [r for r in everything if r["op"] == "cancel"]
    assert len(cancels) == 3 and len(everything) == 13
    assert _rows(capsys, two_applies, "--op", "cancel") == cancels
    assert _rows(capsys, two_applies, "--op", "cancel", "--op", "submit") == everything
    vision = [r for r in everything if str(r["workload"]).startswith("vision/")]
    assert _rows(capsys, two_applies, "--project", "vision") == vision and len(vision) == 6
    job = cancels[0]["job"]
    assert {r["op"] for r in _rows(capsys, two_applies, "--job", str(job))} == {"submit", "cancel"}
    assert _rows(capsys, two_applies, "--since", SECOND) == cancels
    assert _rows(capsys, two_applies, "--since", "1h", "--now", "2027-03-01T12:30:00Z") == cancels
    assert _rows(capsys, two_applies, "--since", "3h", "--now", "2027-03-01T12:30:00Z") == (
        everything
    )
    assert _rows(capsys, two_applies, "--project", "nlp", "--op", "cancel") == []
    assert len(_rows(capsys, two_applies, "--project", "vision", "--limit", "2")) == 2


def test_nothing_matching_says_which_filters(two_applies: Path, capsys: Capsys) -> None:
    res = cp(capsys, "history", two_applies, "--project", "nlp", "--op", "cancel")
    assert res.code == 0
    assert "No applied actions match --project nlp --op cancel." in " ".join(res.out.split())


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--since", "yesterday", "not an ISO 8601 time or a duration"),
        ("--since", "-2h", "not an ISO 8601 time or a duration"),
        ("--op", "evict", "'evict' is not one of"),
        ("--project", "nlp/x", "is not a project name"),
    ],
)
def test_a_filter_that_cannot_match_anything_is_a_usage_error(
    quickstart: Path, capsys: Capsys, option: str, value: str, says: str
) -> None:
    res = cp(capsys, "history", quickstart, option, value)
    assert res.code == 2 and says in " ".join(res.err.split()), res.err
