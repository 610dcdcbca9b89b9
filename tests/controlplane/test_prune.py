"""`cp store prune`: the oldest history removed on purpose, what is left still verifiable.

A store kept every plan, action and event for ever, so a loop left running grew it without
bound. A prune removes a prefix of the history chain (records older than a cutoff, up to
the first that must stay) and records where the chain now starts."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controlplane.pruning import told
from controlplane.store.retention import Entry, Pruned, cut
from tests.builders.cli import cp, ok

ROOT = Path(__file__).resolve().parents[2]
Capsys = pytest.CaptureFixture[str]
T0 = datetime(2026, 10, 1, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_the_cut_is_a_prefix_of_whole_plans_older_than_the_cutoff() -> None:
    records = [Entry(1, "a", at(0)), Entry(2, "a", at(1)), Entry(3, "b", at(2))]
    records += [Entry(4, "a", at(3)), Entry(5, "b", at(4)), Entry(6, "c", at(50))]
    assert cut(records, at(10), {}) == (5, None)
    # b's last record is newer than the cutoff, and a's last comes after b's first
    assert cut(records, at(4), {}) == (
        0,
        "record 1: plan a shares the chain with records that stay",
    )
    late = [*records[:4], Entry(5, "a", at(20))]
    assert cut(late, at(10), {}) == (0, "record 1: plan a has records newer than the cutoff")
    assert cut(records, at(2), {}) == (0, "record 1: plan a has records newer than the cutoff")
    # a plan that must stay ends the prefix, whatever follows it, and holds back a plan
    # whose records it lies among
    whole = [*records[:3], Entry(4, "b", at(3))]
    kept = {"b": "has jobs still running"}
    assert cut(whole, at(60), kept) == (2, "record 3: plan b has jobs still running")
    assert cut(records, at(60), kept) == (0, "record 3: plan b has jobs still running")
    assert cut(records, at(60), {"c": "is the plan applied last"}) == (
        5,
        "record 6: plan c is the plan applied last",
    )
    assert cut(records, at(0), {}) == (0, None)
    # a what-if dated ahead (`cp plan --now` in a later year) held back all that followed
    # it until then: it is as old as the records stored after it (trials Y and Z)
    ahead = [*records[:5], Entry(6, "w", at(500)), Entry(7, "d", at(6))]
    assert cut(ahead, at(10), {}) == (7, None)
    assert cut(ahead[:6], at(10), {}) == (5, None)  # the newest record: it stays


def test_a_second_prune_tells_its_own_range() -> None:
    second = Pruned(
        since=24, through=32, plans=2, events=7, actions=3, observations=0, stopped=None
    )
    assert told(second).startswith("removed records 24-32: 2 plans, 3 actions, 7 events")
    assert told(second, dry_run=True).startswith("would remove records 24-32")


def sql(specs: Path, statement: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        return db.execute(statement).fetchall()


@pytest.fixture
def aged(tmp_path: Path, capsys: Capsys) -> Path:
    """Three applies: one in October (10 jobs), one a day later that stops them all (every
    workload removed), and one now that starts the nlp workloads again."""
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", T0.isoformat()))
    aside = tmp_path / "aside"
    shutil.move(specs / "workloads", aside)
    (specs / "workloads").mkdir()
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", (T0 + timedelta(days=1)).isoformat()))
    shutil.copy(aside / "nlp.yaml", specs / "workloads" / "nlp.yaml")
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    return specs


def test_prune_removes_the_old_plans_and_the_rest_verifies(aged: Path, capsys: Capsys) -> None:
    plans = [pid for (pid,) in sql(aged, "SELECT id FROM plans ORDER BY chain_seq")]
    assert len(plans) == 3
    before = ok(cp(capsys, "history", aged, "--verify", "--json")).json()
    total = before["records"]
    dry = ok(cp(capsys, "store", "prune", aged, "--older-than", "1d", "--dry-run", "--json"))
    report = dry.json()
    old = f"plan_id != '{plans[2]}'"
    [(actions,)] = sql(aged, f"SELECT count(*) FROM actions WHERE {old}")
    [(events,)] = sql(aged, f"SELECT count(*) FROM events WHERE {old}")
    assert report["dryRun"] is True and report["plans"] == 2
    assert report["actions"] == actions >= 10 and report["events"] == events > actions
    assert len(sql(aged, "SELECT id FROM plans")) == 3, "a dry run removes nothing"
    done = ok(cp(capsys, "store", "prune", aged, "--older-than", "1d", "--json")).json()
    assert {k: v for k, v in done.items() if k not in ("dryRun", "before")} == {
        k: v for k, v in report.items() if k not in ("dryRun", "before")
    }
    assert [pid for (pid,) in sql(aged, "SELECT id FROM plans")] == [plans[2]]
    assert not sql(aged, f"SELECT id FROM actions WHERE plan_id != '{plans[2]}'")
    assert not sql(aged, f"SELECT id FROM events WHERE plan_id != '{plans[2]}'")
    after = ok(cp(capsys, "history", aged, "--verify", "--json")).json()
    assert after["ok"] is True and after["head"] == before["head"]
    assert after["prunedThrough"] == done["through"] and after["records"] == total - done["through"]
    human = ok(cp(capsys, "history", aged, "--verify"))
    assert f"records 1-{done['through']} pruned" in human.out
    # pruned again: nothing more is old enough, and the checkpoint stays
    again = ok(cp(capsys, "store", "prune", aged, "--older-than", "1d", "--json")).json()
    assert again["plans"] == 0 and again["through"] == done["through"]
    # what is left still shows an edit, and a record deleted, after the checkpoint
    first_left = done["through"] + 1
    sql(aged, f"DELETE FROM events WHERE chain_seq = {first_left + 1}")
    broken = cp(capsys, "history", aged, "--verify", "--json")
    assert broken.code == 1 and f"record {first_left + 1} is missing" in broken.json()["problem"]


def test_a_checkpoint_removed_shows(aged: Path, capsys: Capsys) -> None:
    ok(cp(capsys, "store", "prune", aged, "--older-than", "1d"))
    sql(aged, "DELETE FROM meta WHERE key = 'chain_base'")
    broken = cp(capsys, "history", aged, "--verify", "--json")
    problem = broken.json()["problem"]
    assert broken.code == 1 and "record 1 is missing" in problem and "checkpoint" in problem


def test_pruned_history_is_told_where_it_is_asked_for(aged: Path, capsys: Capsys) -> None:
    [(first,)] = sql(aged, "SELECT id FROM plans WHERE chain_seq = 1")
    done = ok(cp(capsys, "store", "prune", aged, "--older-than", "1d", "--json")).json()
    shown = cp(capsys, "show", first[:8], aged)
    assert shown.code == 1 and f"plan {first} was pruned from the history" in shown.err
    assert "applied" in shown.err
    told = ok(cp(capsys, "history", aged, "--workload", "vision/vit-train"))
    assert f"the history before record {done['through'] + 1} was pruned" in told.out
    explained = " ".join(ok(cp(capsys, "explain", "nlp/llm-finetune", aged)).out.split())
    assert f"(the history before record {done['through'] + 1} was pruned)" in explained
    doc = ok(cp(capsys, "explain", "nlp/llm-finetune", aged, "--json")).json()
    assert doc["historyPrunedThrough"] == done["through"]
    gone = cp(capsys, "explain", "vision/vit-train", aged)  # its whole past was pruned
    assert gone.code == 1 and f"before record {done['through'] + 1} was pruned" in gone.err


def test_vacuum_shrinks_the_file(tmp_path: Path, capsys: Capsys) -> None:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    vision = (specs / "workloads" / "vision.yaml").read_text()
    for day in range(8):  # a week of history: vision's work removed and added back
        if day % 2:
            (specs / "workloads" / "vision.yaml").unlink()
        else:
            (specs / "workloads" / "vision.yaml").write_text(vision)
        at = (T0 + timedelta(days=day)).isoformat()
        ok(cp(capsys, "apply", specs, "--auto-approve", "--now", at))
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    file = specs / ".cp" / "controlplane.db"
    before = file.stat().st_size
    done = ok(cp(capsys, "store", "prune", specs, "--older-than", "1d", "--vacuum", "--json"))
    assert done.json()["plans"] >= 7 and done.json()["vacuumed"] is True
    assert file.stat().st_size < before
    assert ok(cp(capsys, "history", specs, "--verify", "--json")).json()["ok"] is True


def test_a_plan_whose_jobs_run_goes_and_they_stay_ours(tmp_path: Path, capsys: Capsys) -> None:
    """A plan whose jobs still run used to stop every prune (a months-long job: for good).
    It goes now, and its id is kept: its jobs, tagged with it, are still ours, so a
    workload then removed from the specs has them cancelled (a job tagged with a plan the
    store never made is another control plane's, and left alone)."""
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", T0.isoformat()))
    (specs / "workloads" / "product.yaml").unlink()
    ok(cp(capsys, "apply", specs, "--auto-approve", "--now", (T0 + timedelta(days=1)).isoformat()))
    [(first,)] = sql(specs, "SELECT id FROM plans WHERE chain_seq = 1")
    running = sql(
        specs,
        f"SELECT workload FROM runs WHERE plan_id = '{first}' AND ended_at IS NULL "
        "AND workload LIKE 'vision/%'",
    )
    assert running
    pruned = ok(cp(capsys, "store", "prune", specs, "--older-than", "1d", "--json")).json()
    assert pruned["plans"] == 1 and not sql(specs, f"SELECT id FROM plans WHERE id = '{first}'")
    (specs / "workloads" / "vision.yaml").unlink()
    later = (T0 + timedelta(days=1, hours=1)).isoformat()
    plan = ok(cp(capsys, "plan", specs, "--json", "--now", later)).json()
    cancelled = {a["workload"] for a in plan["actions"] if a["op"] == "cancel"}
    assert cancelled == {w for (w,) in running}


def test_a_prune_waits_for_no_apply(aged: Path, capsys: Capsys) -> None:
    """The apply lease held by another reconciler: the prune is refused, nothing removed;
    a dry run, which changes nothing, does not wait for it."""
    sql(
        aged,
        "INSERT INTO leases (name, holder, expires_at) VALUES "
        "('apply', 'elsewhere:1 by someone', '2999-01-01 00:00:00')",
    )
    refused = cp(capsys, "store", "prune", aged, "--older-than", "1d", "--wait", "0")
    assert refused.code != 0 and "another reconciler is applying" in refused.err
    assert len(sql(aged, "SELECT id FROM plans")) == 3
    dry = ok(cp(capsys, "store", "prune", aged, "--older-than", "1d", "--dry-run", "--json"))
    assert dry.json()["plans"] == 2 and len(sql(aged, "SELECT id FROM plans")) == 3


def test_a_prune_waits_for_an_apply_to_finish(aged: Path, capsys: Capsys) -> None:
    """A cron prune beside a watch loop met its short cycles' lease now and then (trial Y)."""
    soon = datetime.now(UTC) + timedelta(seconds=2)
    sql(
        aged,
        "INSERT INTO leases (name, holder, expires_at) VALUES "
        f"('apply', 'elsewhere:1 by someone', '{soon:%Y-%m-%d %H:%M:%S.%f}')",
    )
    done = ok(cp(capsys, "store", "prune", aged, "--older-than", "1d", "--wait", "30", "--json"))
    assert done.json()["plans"] == 2


def test_a_pruned_plan_is_still_known_applied(aged: Path, capsys: Capsys, tmp_path: Path) -> None:
    """Its plan file is not applied again, and its specs still count as applied (a
    checkout behind them is refused: controlplane/lineage.py)."""
    from controlplane.workflow import open_store

    [(first, digest)] = sql(aged, "SELECT id, spec_digest FROM plans WHERE chain_seq = 1")
    saved = tmp_path / "first.json"
    ok(cp(capsys, "show", first, aged, "--json"))
    with open_store(aged, None) as store:
        plan = store.get_plan(first)
        assert plan is not None
        saved.write_text(plan.to_json())
    ok(cp(capsys, "store", "prune", aged, "--older-than", "1d"))
    shutil.rmtree(aged / "workloads")  # the specs it was made of, again
    shutil.copytree(aged.parent / "aside", aged / "workloads")
    again = cp(capsys, "apply", saved, "--dir", aged, "--auto-approve", "--json")
    assert again.code == 0 and again.json()["alreadyApplied"] is True, again.out + again.err
    told = " ".join(ok(cp(capsys, "apply", saved, "--dir", aged, "--auto-approve")).out.split())
    assert "was applied already (its history has been pruned since)" in told
    with open_store(aged, None) as store:
        assert store.applied_specs(digest) and store.known_plans([first, "nope"]) == {first}
        assert store.plan_status(first) == "applied"


def test_observations_a_remaining_plan_needs_stay(aged: Path, capsys: Capsys) -> None:
    """A plan made against clusters unchanged since an old observation points to it."""
    digest = ok(cp(capsys, "plan", aged, "--json")).json()["observedDigest"]
    sql(aged, "UPDATE observations SET kept_at = '2026-01-01 00:00:00'")  # kept long ago
    sql(aged, "INSERT INTO observations VALUES ('unused', X'00', '2026-01-01 00:00:00')")
    assert {d for (d,) in sql(aged, "SELECT digest FROM observations")} == {digest, "unused"}
    done = ok(cp(capsys, "store", "prune", aged, "--older-than", "1d", "--json")).json()
    assert [d for (d,) in sql(aged, "SELECT digest FROM observations")] == [digest]
    assert done["observations"] == 1


def test_a_damaged_plan_body_is_named_not_a_crash(aged: Path, capsys: Capsys) -> None:
    [(first,)] = sql(aged, "SELECT id FROM plans WHERE chain_seq = 1")
    with sqlite3.connect(aged / ".cp" / "controlplane.db") as db:
        db.execute("UPDATE plans SET packed = X'0102' WHERE chain_seq = 1")
    verdict = cp(capsys, "history", aged, "--verify", "--json")
    assert verdict.code == 1 and f"record 1, plan {first}" in verdict.json()["problem"]
    shown = cp(capsys, "show", first, aged)
    assert shown.code == 1 and "stored body is damaged" in shown.err


def test_a_bad_age_is_refused(aged: Path, capsys: Capsys) -> None:
    refused = cp(capsys, "store", "prune", aged, "--older-than", "soon")
    assert refused.code != 0 and "--older-than" in refused.err
    bare = cp(capsys, "store", "prune", aged, "--older-than", "90")  # 90 minutes? days?
    assert bare.code == 2 and "has no unit" in bare.err
    assert len(sql(aged, "SELECT id FROM plans")) == 3


def test_watch_keeps_the_history_it_is_told_to(aged: Path, capsys: Capsys) -> None:
    """A loop left running prunes its own history: after its first cycle, then daily."""
    kept = [pid for (pid,) in sql(aged, "SELECT id FROM plans ORDER BY chain_seq")][2:]
    watched = ok(cp(capsys, "watch", aged, "--once", "--auto-approve", "--keep-history", "1d"))
    assert "history pruned: removed records 1-" in watched.out, watched.out
    left = [pid for (pid,) in sql(aged, "SELECT id FROM plans ORDER BY chain_seq")]
    assert left[: len(kept)] == kept
    assert ok(cp(capsys, "history", aged, "--verify", "--json")).json()["ok"] is True
    refused = cp(capsys, "watch", aged, "--once", "--keep-history", "now")
    assert refused.code == 2 and "--keep-history" in refused.err


def test_watch_prunes_once_a_day(
    aged: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controlplane import pruning
    from controlplane.watch import PRUNE_EVERY, Watcher, WatchOptions

    calls: list[int] = []
    real = pruning.prune
    monkeypatch.setattr(
        pruning, "prune", lambda *a, **k: (calls.append(1), real(*a, **k))[1]
    )  # a spy: the real prune runs
    clock = [1000.0]
    monkeypatch.setattr("controlplane.watch.time.monotonic", lambda: clock[0])
    lines: list[str] = []
    watcher = Watcher(aged, WatchOptions(keep_history=86_400), lines.append)
    watcher.prune()
    clock[0] += PRUNE_EVERY - 1
    watcher.prune()
    assert len(calls) == 1 and any("history pruned" in line for line in lines)
    clock[0] += 1
    watcher.prune()
    assert len(calls) == 2


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        ("DELETE FROM pruned_plans", "pruned_plans"),
        ("UPDATE pruned_plans SET status = 'planned'", "pruned_plans"),
        (
            "INSERT INTO actions (plan_id, seq, op, workload, cluster, reason_code, reason, "
            "status, message) SELECT id, 99, 'cancel', 'nlp/x', 'sim', 'pruned', 'r', 'done', "
            "'' FROM pruned_plans LIMIT 1",
            "no such plan",
        ),
        (
            "UPDATE meta SET value = replace(value, ':', ':0') WHERE key = 'chain_base'",
            "checkpoint",
        ),
    ],
    ids=["pruned plans deleted", "pruned plan edited", "action of a pruned plan", "checkpoint"],
)
def test_what_a_prune_keeps_is_sealed(aged: Path, capsys: Capsys, tamper: str, named: str) -> None:
    """What is kept of the pruned plans says which running jobs are ours: deleting it made
    a job another control plane's, and verify said intact (trial Z)."""
    ok(cp(capsys, "store", "prune", aged, "--older-than", "1d"))
    assert ok(cp(capsys, "history", aged, "--verify", "--json")).json()["ok"] is True
    sql(aged, tamper)
    broken = cp(capsys, "history", aged, "--verify", "--json")
    assert broken.code == 1 and named in broken.json()["problem"], broken.out


def test_a_prefix_of_pruned_plans_is_ambiguous(aged: Path, capsys: Capsys) -> None:
    """A prefix a kept and a pruned plan's ids begin with showed the kept one (trial Z)."""
    ok(cp(capsys, "store", "prune", aged, "--older-than", "1d"))
    [(kept,)] = sql(aged, "SELECT id FROM plans")
    pruned = sorted(pid for (pid,) in sql(aged, "SELECT id FROM pruned_plans"))
    twin = kept[:4] + pruned[0][4:]  # a pruned plan whose id begins as the kept one's
    sql(aged, f"UPDATE pruned_plans SET id = '{twin}' WHERE id = '{pruned[0]}'")
    shown = cp(capsys, "show", kept[:4], aged)
    assert shown.code == 1 and kept in shown.err and twin in shown.err, shown.err
    assert f"plan {pruned[1]} was pruned" in cp(capsys, "show", pruned[1][:12], aged).err
