"""``cp history`` filters: by project, job, operation and time, not only by one workload.

On a store of hundreds of plans, "who preempted my job 1234, and why" meant paging
through ``cp history --limit 3000`` (user trial U): the history could be narrowed to one
workload only. The filters combine (all must hold), and ``--limit`` counts what they keep.
"""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controlplane.plan import Plan, SolverReport
from controlplane.store import Store
from controlplane.store.actionlog import HistoryFilter
from specs.actions import Action, Op, Reason, ReasonCode
from specs.snapshot import Replica
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
        ("--project", "NLP", "is not a project name"),  # SQLite's LIKE ignores case (review)
        ("--job", "", "is not a job id"),
        ("--since", "1000000d", "too far back"),  # an overflow (review)
        ("--since", "0001-01-01T00:00+01:00", "between the years 1970 and 9000"),
    ],
)
def test_a_filter_that_cannot_match_anything_is_a_usage_error(
    quickstart: Path, capsys: Capsys, option: str, value: str, says: str
) -> None:
    res = cp(capsys, "history", quickstart, option, value)
    assert res.code == 2 and says in " ".join(res.err.split()), res.err


def test_verify_takes_no_filters(quickstart: Path, capsys: Capsys) -> None:
    """It checks the whole history: a filter would read as if it checked only that part."""
    res = cp(capsys, "history", quickstart, "--verify", "--project", "nlp")
    assert res.code == 2 and "takes no filters" in " ".join(res.err.split()), res.err


def test_a_job_asked_about_finds_the_move_that_replaced_it(tmp_path: Path) -> None:
    """On Slurm a move or a resize is a new job, and the action's row names the new one:
    `--job` with the old id missed the move that ended it (review). The row keeps the job
    it acted on too (schema 13)."""
    store = Store(f"sqlite:///{tmp_path / 'cp.db'}", init=True)
    move = Action(
        op=Op.MOVE,
        workload="a/w",
        cluster="slurm",
        job="1234",
        replicas=[Replica(node="n2", gpus=8)],
        reason=Reason(code=ReasonCode.CONSOLIDATE, message="x"),
    )
    plan = Plan(
        id="p1",
        created_at=datetime(2026, 11, 22, tzinfo=UTC),
        spec_digest="s",
        observed_digest="o",
        actions=[move],
        solver=SolverReport(engine="kai-greedy", status="HEURISTIC"),
    )
    store.save_plan(plan)
    store.mark(plan.id, 0, "started")
    store.mark(plan.id, 0, "done", job="5678", message="job 5678 replaces job 1234")
    for asked in ("1234", "5678"):
        [(row, _, _)] = store.history(where=HistoryFilter(job=asked))
        assert (row.op, row.job, row.acted_on) == ("move", "5678", "1234")
    assert store.verify().ok, store.verify().problem


def test_a_store_of_schema_12_verifies_and_filters_by_job(
    two_applies: Path, capsys: Capsys
) -> None:
    """Its rows have no job acted on (null after the migration): the chain still verifies,
    and --job finds them by the job they name."""
    db = two_applies / ".cp" / "controlplane.db"
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE actions DROP COLUMN acted_on")
        conn.execute("UPDATE meta SET value = '12' WHERE key = 'schema_version'")
    job = _rows(capsys, two_applies, "--op", "cancel")[0]["job"]
    assert cp(capsys, "history", two_applies, "--verify").code == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM actions WHERE acted_on IS NULL").fetchone() == (
            13,
        )
    assert {r["op"] for r in _rows(capsys, two_applies, "--job", str(job))} == {"submit", "cancel"}
