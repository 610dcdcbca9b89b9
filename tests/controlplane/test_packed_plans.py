"""A stored plan's body is kept compressed. A busy org's plan is mostly its list of waiting
work with reasons: 3.5 MB of JSON at 1,000 nodes, stored whole by every apply, so a loop
applying every minute wrote gigabytes a day. Compressed, it is ~30 times smaller; the
history chain still hashes the JSON, so records stored before verify as they did."""

from __future__ import annotations

import json
import shutil
import sqlite3
import zlib
from pathlib import Path

import pytest

from tests.builders.cli import cp, ok

ROOT = Path(__file__).resolve().parents[2]
Capsys = pytest.CaptureFixture[str]


def quickstart(tmp_path: Path) -> Path:
    specs = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    return specs


def rows(specs: Path) -> list[tuple[str, str, bytes | None]]:
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        return db.execute("SELECT id, body, packed FROM plans ORDER BY chain_seq").fetchall()


def test_a_plan_is_stored_compressed_and_read_back_whole(tmp_path: Path, capsys: Capsys) -> None:
    specs = quickstart(tmp_path)
    applied = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()
    [(plan_id, body, packed)] = rows(specs)
    assert plan_id == applied["plan"] and body == "" and packed is not None
    stored = json.loads(zlib.decompress(packed))
    assert stored["id"] == plan_id and len(stored["actions"]) == 10
    assert len(packed) * 3 < len(json.dumps(stored, separators=(",", ":")))
    shown = ok(cp(capsys, "show", plan_id, specs, "--json")).json()
    assert shown["id"] == plan_id and len(shown["actions"]) == 10
    assert ok(cp(capsys, "history", specs, "--verify", "--json")).json()["ok"] is True


def test_an_edited_compressed_body_breaks_the_chain(tmp_path: Path, capsys: Capsys) -> None:
    specs = quickstart(tmp_path)
    ok(cp(capsys, "apply", specs, "--auto-approve"))
    [(plan_id, _, packed)] = rows(specs)
    assert packed is not None
    edited = zlib.decompress(packed).replace(b"within-deserved", b"reclaim")
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        db.execute("UPDATE plans SET packed = ? WHERE id = ?", (zlib.compress(edited), plan_id))
    verdict = cp(capsys, "history", specs, "--verify", "--json")
    assert verdict.code == 1 and f"record 1, plan {plan_id}" in verdict.json()["problem"]


def test_a_store_of_schema_13_keeps_its_plans_as_text_and_packs_new_ones(
    tmp_path: Path, capsys: Capsys
) -> None:
    specs = quickstart(tmp_path)
    first = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()["plan"]
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        [(packed,)] = db.execute("SELECT packed FROM plans").fetchall()
        # as version 13 stored it: the JSON itself, and no column for it packed
        db.execute("UPDATE plans SET body = ?", (zlib.decompress(packed).decode(),))
        db.execute("ALTER TABLE plans DROP COLUMN packed")
        db.execute("UPDATE meta SET value = '13' WHERE key = 'schema_version'")
    (specs / "workloads" / "vision.yaml").unlink()
    second = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()["plan"]
    old, new = rows(specs)
    assert old[0] == first and old[1].startswith("{") and old[2] is None
    assert new[0] == second and new[1] == "" and new[2] is not None
    assert ok(cp(capsys, "show", first, specs, "--json")).json()["id"] == first
    assert ok(cp(capsys, "history", specs, "--verify", "--json")).json()["ok"] is True
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:  # an old body, edited
        db.execute("UPDATE plans SET body = replace(body, 'within-deserved', 'reclaim')")
    verdict = cp(capsys, "history", specs, "--verify", "--json")
    assert verdict.code == 1 and f"plan {first}" in verdict.json()["problem"]
