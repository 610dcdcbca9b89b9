"""Tamper-evident history: `cp history --verify` passes on a real history and names the
first record that was edited, deleted or cut off."""

from __future__ import annotations

import shutil
import sqlite3
import zlib
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[2]
Capsys = pytest.CaptureFixture[str]


@pytest.fixture
def applied(tmp_path: Path, capsys: Capsys) -> Path:
    """The quickstart applied, then one workload removed and applied again (a prune)."""
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    (specs / "workloads" / "vision.yaml").unlink()
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    return specs


def verify(capsys: Capsys, specs: Path) -> tuple[int, dict[str, object]]:
    res = cp(capsys, "history", specs, "--verify", "--json")
    return res.code, res.json()


def sql(specs: Path, statement: str) -> None:
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        db.execute(statement)


def edit_body(specs: Path, old: bytes, new: bytes) -> None:
    """Edit the first plan's body (kept compressed)."""
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        [(packed,)] = db.execute("SELECT packed FROM plans WHERE chain_seq = 1").fetchall()
        edited = zlib.compress(zlib.decompress(packed).replace(old, new))
        db.execute("UPDATE plans SET packed = ? WHERE chain_seq = 1", (edited,))


def test_a_real_history_verifies(applied: Path, capsys: Capsys) -> None:
    code, report = verify(capsys, applied)
    assert code == 0 and report["ok"] is True
    # every plan stored (two applies) and every event of every action is a record
    with sqlite3.connect(applied / ".cp" / "controlplane.db") as db:
        (plans,) = db.execute("SELECT count(*) FROM plans").fetchone()
        (events,) = db.execute("SELECT count(*) FROM events").fetchone()
    assert report["records"] == plans + events and events > 20
    human = cp(capsys, "history", applied, "--verify")
    assert human.code == 0 and "history intact" in human.out


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        (lambda s: edit_body(s, b"within-deserved", b"reclaim"), "record 1, plan "),
        (lambda s: sql(s, "UPDATE events SET status = 'failed' WHERE id = 3"), "event 3 "),
        (
            lambda s: sql(
                s,
                "UPDATE actions SET reason = 'nothing to see' WHERE seq = 0 AND "
                "plan_id = (SELECT id FROM plans WHERE chain_seq = 1)",
            ),
            "action 0 of",
        ),
        (
            lambda s: sql(
                s,
                "UPDATE actions SET status = 'failed' WHERE seq = 1 AND "
                "plan_id = (SELECT id FROM plans WHERE chain_seq = 1)",
            ),
            "action 1 of",
        ),
        (lambda s: sql(s, "UPDATE plans SET status = 'planned' WHERE chain_seq = 1"), "its status"),
        (lambda s: sql(s, "DELETE FROM events WHERE id = 5"), "record "),
        (
            lambda s: sql(
                s,
                "UPDATE events SET actor = 'someone else' WHERE id = (SELECT min(id) FROM events)",
            ),
            "event 1 ",
        ),
        (
            lambda s: sql(s, "DELETE FROM events WHERE id = (SELECT max(id) FROM events)"),
            "chain head",
        ),
        (  # "who preempted my job" gone from history and explain (user trial)
            lambda s: sql(
                s,
                "DELETE FROM actions WHERE seq = 2 AND "
                "plan_id = (SELECT id FROM plans WHERE chain_seq = 1)",
            ),
            "action 2 of",
        ),
    ],
    ids=[
        "plan body",
        "event",
        "action reason",
        "action status",
        "plan status",
        "event deleted",
        "who applied",
        "end cut off",
        "action deleted",
    ],
)
def test_an_edit_is_named(
    applied: Path, capsys: Capsys, tamper: Callable[[Path], None], named: str
) -> None:
    tamper(applied)
    code, report = verify(capsys, applied)
    assert code == 1 and report["ok"] is False
    assert named in str(report["problem"]), report["problem"]
    human = cp(capsys, "history", applied, "--verify")
    assert human.code == 1 and "history broken:" in human.err


def test_an_edited_action_names_the_field_and_both_values(applied: Path, capsys: Capsys) -> None:
    """It showed the edited row as JSON cut at 120 characters, mid-string, and left the
    reader to find what differs (user trial)."""
    first = "(SELECT id FROM plans WHERE chain_seq = 1)"
    with sqlite3.connect(applied / ".cp" / "controlplane.db") as db:
        was = db.execute(f"SELECT workload FROM actions WHERE seq = 0 AND plan_id = {first}")
        [(workload,)] = was.fetchall()
    sql(applied, f"UPDATE actions SET workload = 'nlp/x' WHERE seq = 0 AND plan_id = {first}")
    code, report = verify(capsys, applied)
    problem = str(report["problem"])
    assert code == 1 and "workload 'nlp/x'" in problem and f"'{workload}'" in problem, problem
    assert "{" not in problem and "reason" not in problem, problem  # only what differs


def test_history_says_who_applied(
    tmp_path: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every applied action names who applied it (the user trial found no "who" in the
    history the README promised); a resume by someone else is theirs from there on."""
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    monkeypatch.setenv("CP_ACTOR", "alice (laptop)")
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    monkeypatch.delenv("CP_ACTOR")
    for name, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_ACTOR": "bob",
        "GITHUB_RUN_ID": "42",
        "GITHUB_REPOSITORY": "org/specs",
    }.items():
        monkeypatch.setenv(name, value)
    (specs / "workloads" / "vision.yaml").unlink()
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    rows = cp(capsys, "history", specs, "--json").json()
    assert isinstance(rows, list)
    by = {(r["op"], r["workload"]): r["by"] for r in rows}
    assert by[("submit", "nlp/llm-finetune")] == "alice (laptop)"
    pruned = [who for (op, w), who in by.items() if op == "cancel" and w.startswith("vision/")]
    assert pruned and set(pruned) == {"bob (GitHub Actions run 42 of org/specs)"}
    text = cp(capsys, "history", specs).out
    assert "by alice (laptop)" in text and "by bob (GitHub Actions run 42" in text
    code, report = verify(capsys, specs)
    assert code == 0 and report["ok"] is True


def test_an_event_without_an_actor_hashes_as_before() -> None:
    """Events written before the store kept who applied verify unchanged: their hashed
    content has no ``actor`` key at all."""
    from datetime import UTC, datetime

    from controlplane.store import chain

    at = datetime(2026, 11, 1, tzinfo=UTC)
    old = chain.event_payload("p", 0, "done", "7", "", at)
    assert sorted(old) == ["at", "job", "kind", "message", "plan", "seq", "status"]
    assert chain.event_payload("p", 0, "done", "7", "", at, "alice")["actor"] == "alice"


def test_a_store_of_the_previous_schema_gains_the_actor(tmp_path: Path, capsys: Capsys) -> None:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "store", "init", specs).code == 0
    sql(specs, "ALTER TABLE events DROP COLUMN actor")  # as version 4 made it
    sql(specs, "UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    assert all(r["by"] for r in cp(capsys, "history", specs, "--json").json())


def test_a_store_of_schema_5_gains_the_completions_spec_digest(
    tmp_path: Path, capsys: Capsys
) -> None:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "store", "init", specs).code == 0
    sql(specs, "ALTER TABLE completions DROP COLUMN spec_digest")  # as version 5 made it
    sql(specs, "UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-11-20T00:00:00Z").code == 0
    later = cp(capsys, "plan", specs, "--json", "--now", "2026-11-25T00:00:00Z")
    assert later.code == 0, later.err
    assert cp(capsys, "observe", specs, "--now", "2026-11-25T00:00:00Z").code == 0
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        (told,) = db.execute(
            "SELECT count(*) FROM completions WHERE spec_digest IS NOT NULL"
        ).fetchone()
    assert told > 0, "completions recorded with the spec they ran"


def test_a_store_of_schema_7_gains_how_a_failed_job_ended(tmp_path: Path, capsys: Capsys) -> None:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "store", "init", specs).code == 0
    sql(specs, "INSERT INTO failures (workload, count, job, ended_at) VALUES "
        "('nlp/notebook', 1, '9', '2026-11-19 23:59:30')")  # fmt: skip
    sql(specs, "ALTER TABLE failures DROP COLUMN state")  # as version 7 made it
    sql(specs, "UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    planned = cp(capsys, "plan", specs, "--json", "--now", "2026-11-20T00:00:00Z")
    assert planned.code == 0, planned.err
    waits = {p["workload"]: p["reason"]["message"] for p in planned.json()["pending"]}
    assert waits["nlp/notebook"].startswith("job 9 failed at"), "a row without its state"
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(failures)")]
    assert "state" in columns


def test_who_applied_is_shown_as_printable_text(
    tmp_path: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CP_ACTOR (or a CI's user variables) with a line break forged a history entry, and
    an escape sequence rewrote the terminal line (user trial): the actor is recorded with
    its control characters spelled out, one line."""
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    forged = "alice\n2026-01-01 00:00:00 cancel  nlp/fake  by mallory"
    monkeypatch.setenv("CP_ACTOR", forged + "\x1b[2K\x1b[1G")
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    rows = cp(capsys, "history", specs, "--json").json()
    assert {r["by"] for r in rows} == {
        "alice\\n2026-01-01 00:00:00 cancel  nlp/fake  by mallory\\x1b[2K\\x1b[1G"
    }
    text = cp(capsys, "history", specs).out
    assert "\x1b" not in text
    assert not any(line.startswith("2026-01-01") for line in text.splitlines())


def test_history_happens_at_the_time_the_plan_was_made_for(tmp_path: Path, capsys: Capsys) -> None:
    """An apply with ``--now`` recorded its actions at the wall clock's time, so `cp
    explain` showed a job started at --now above a history entry days before it (user
    trial). What an apply records happens at its --now (plus the time it takes)."""
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    first, second = "2027-03-01T10:00:00+00:00", "2027-03-01T12:00:00+00:00"
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", first).code == 0
    (specs / "workloads" / "vision.yaml").unlink()
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", second).code == 0
    rows = cp(capsys, "history", specs, "--json").json()
    stamps = [datetime.fromisoformat(r["at"]) for r in rows]
    assert stamps == sorted(stamps, reverse=True), "newest first"
    starts = datetime.fromisoformat(first)
    assert all(starts <= t < starts + timedelta(hours=2, minutes=5) for t in stamps), stamps
    assert {
        r["op"] for r in rows if datetime.fromisoformat(r["at"]) >= datetime.fromisoformat(second)
    } == {"cancel"}
    assert cp(capsys, "history", specs, "--verify").code == 0


def test_a_store_of_schema_8_keeps_its_placeholders_one_per_job(
    tmp_path: Path, capsys: Capsys
) -> None:
    """Version 8 kept one placeholder per workload and cluster, so a second fan-out
    candidate submitted on a cluster replaced the first (user trial): the table is made
    again with the job in its key, and what it held is kept."""
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "store", "init", specs).code == 0
    sql(specs, "DROP TABLE placeholders")
    sql(specs, "CREATE TABLE placeholders (workload VARCHAR NOT NULL, cluster VARCHAR NOT NULL, "
        "job VARCHAR NOT NULL, plan_id VARCHAR NOT NULL, submitted_at DATETIME NOT NULL, "
        "PRIMARY KEY (workload, cluster))")  # fmt: skip
    sql(specs, "INSERT INTO placeholders VALUES ('nlp/notebook', 'sim', '77', 'p', "
        "'2026-11-19 23:59:30')")  # fmt: skip
    sql(specs, "UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    assert cp(capsys, "plan", specs, "--now", "2026-11-20T00:00:00Z").code == 0
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        key = [row[1] for row in db.execute("PRAGMA table_info(placeholders)") if row[5]]
        rows = db.execute("SELECT workload, cluster, job FROM placeholders").fetchall()
    assert key == ["workload", "cluster", "job"]
    assert rows == [("nlp/notebook", "sim", "77")]


def test_a_store_of_schema_10_gains_the_plan_of_each_run(tmp_path: Path, capsys: Capsys) -> None:
    """Version 11 keeps the plan that submitted each run's job: the round of a fan-out
    candidate, of which only the winner's run counts as a checkpoint segment."""
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "store", "init", specs).code == 0
    sql(specs, "ALTER TABLE runs DROP COLUMN plan_id")  # as version 10 made it
    sql(specs, "UPDATE meta SET value = '10' WHERE key = 'schema_version'")
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-11-20T00:00:00Z").code == 0
    assert cp(capsys, "observe", specs, "--now", "2026-11-20T01:00:00Z").code == 0
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        (told,) = db.execute("SELECT count(*) FROM runs WHERE plan_id IS NOT NULL").fetchone()
    assert told > 0, "runs recorded with the plan that submitted their job"
