"""`cp plan` is a what-if: at any --now, on any branch, it leaves the store's scheduling
state and the simulator's state exactly as it found them (only its own plan record is
added). Observe, apply and watch are the ones that record."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.cli import run
from controlplane.store import Store
from tests.builders import workload
from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[2]
SCHEDULING = (
    "queue",
    "runs",
    "placeholders",
    "completions",
    "failures",
    "leases",
    "meta",
    "versions",
)
Capsys = pytest.CaptureFixture[str]


def state_of(specs: Path) -> tuple[dict[str, list[tuple[object, ...]]], dict[str, bytes]]:
    """The scheduling tables' rows and the simulator files' bytes."""
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        tables = {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall()) for t in SCHEDULING}
        tables["meta"] = [row for row in tables["meta"] if row[0] != "chain_head"]  # plans
    files = {p.name: p.read_bytes() for p in sorted((specs / ".cp" / "simulator").iterdir())}
    return tables, files


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart applied at a fixed time, plus one workload only a branch has."""
    specs = tmp_path_factory.mktemp("ro") / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert (
        run(["apply", str(specs), "--auto-approve", "--now", "2026-11-22T10:00:00"], "controlplane")
        == 0
    )
    assert run(["observe", str(specs), "--now", "2026-11-22T11:00:00"], "controlplane") == 0
    branch = [workload("unmerged", "nlp", gpus=1)]
    (specs / "workloads" / "branch.yaml").write_text(yaml.safe_dump_all(branch, sort_keys=False))
    return specs


# each example is a whole `cp plan` (~0.3 s): a fifth of the profile's examples
@settings(max_examples=max(10, settings.default.max_examples // 5))
@given(when=st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(8999, 12, 31)))
def test_plan_at_any_now_changes_nothing(applied: Path, when: datetime) -> None:
    before = state_of(applied)
    now = when.replace(microsecond=0).isoformat()
    assert run(["plan", str(applied), "--json", "--now", now], "controlplane") == 0
    assert state_of(applied) == before


def test_observe_records_and_plan_does_not(applied: Path, capsys: Capsys) -> None:
    """The unmerged workload gets no queue position from a plan; an observation of the
    same specs records one (what a merge followed by a reconcile does)."""

    def queued() -> set[str]:
        with sqlite3.connect(applied / ".cp" / "controlplane.db") as db:
            return {w for (w,) in db.execute("SELECT workload FROM queue")}

    assert cp(capsys, "plan", applied, "--now", "2026-11-22T12:00:00").code == 0
    assert "nlp/unmerged" not in queued()
    assert cp(capsys, "observe", applied, "--now", "2026-11-22T12:00:00").code == 0
    assert "nlp/unmerged" in queued()


@pytest.mark.parametrize(
    "command",
    [
        ["plan", "{specs}"],
        ["status", "{specs}"],
        ["explain", "nlp/llm-finetune", "--dir", "{specs}"],
        ["cost", "nlp/llm-finetune", "--dir", "{specs}"],
        ["cost", "nlp/llm-finetune", "--dir", "{specs}", "--no-forecast"],
    ],
    ids=" ".join,
)
def test_the_read_only_commands_change_nothing_days_ahead(
    applied: Path, command: list[str]
) -> None:
    """Two days on, the running jobs would have finished: a command that only reads must
    not let the simulator get there (cost did: its adapters were not read-only)."""
    before = state_of(applied)
    args = [a.format(specs=applied) for a in command]
    assert run([*args, "--json", "--now", "2026-11-24T12:00:00"], "controlplane") == 0
    assert state_of(applied) == before


def test_observe_while_another_reconciler_applies_records_nothing(
    applied: Path, capsys: Capsys
) -> None:
    """What an observation records is written under the apply lease, as apply and watch
    write it: a `cp observe` that finds the lease held (another reconciler is applying)
    still prints the snapshot, says it recorded nothing, and leaves the store alone
    (two recorders at once raced on the same rows: a duplicate key on PostgreSQL)."""
    store = Store(f"sqlite:///{applied / '.cp' / 'controlplane.db'}")
    assert store.acquire_lease("elsewhere.example:1") is None
    try:
        before = state_of(applied)
        seen = cp(capsys, "observe", applied, "--now", "2026-11-22T13:00:00")
        assert seen.code == 0 and seen.json()["clusters"]
        assert "recorded nothing" in seen.err and "elsewhere.example:1" in seen.err
        assert state_of(applied) == before
    finally:
        store.release_lease("elsewhere.example:1")
    assert cp(capsys, "observe", applied, "--now", "2026-11-22T13:00:00").code == 0
    assert state_of(applied) != before, "with the lease free, the observation is recorded"
