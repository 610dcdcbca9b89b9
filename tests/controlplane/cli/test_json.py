"""``--json`` always prints one JSON document on stdout: on success, when there is nothing
to do, and on failure (the error, and for spec problems every diagnostic with file, line
and column), so scripts never have to scrape human output or guess from silence."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from controlplane.apply import ActionOutcome, ApplyReport
from controlplane.cli.views.apply import apply_json, verdict
from specs.actions import Action, Op, Reason, ReasonCode
from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[3]
Capsys = pytest.CaptureFixture[str]


def document(capsys: Capsys, *args: str | Path, code: int = 0) -> Any:
    """Run ``cp ARGS``; its exit code must be ``code`` and stdout exactly one JSON document."""
    res = cp(capsys, *args)
    assert res.code == code, (args, res.out, res.err)
    return json.loads(res.out)


def test_every_command_prints_a_document_on_success(quickstart: Path, capsys: Capsys) -> None:
    q = quickstart
    valid = document(capsys, "validate", q, "--json")
    assert valid["valid"] and valid["workloads"] == 12
    warning = valid["warnings"][0]  # the quickstart's ads/ranker-serve never fits its quota
    assert warning["severity"] == "warning" and warning["path"].endswith("product.yaml")
    assert (warning["line"], warning["column"]) == (24, 58) and "non-preemptible" in warning[
        "message"
    ]

    plan = document(capsys, "plan", q, "--json", "--out", q / "p.json")
    assert plan["actions"]
    assert document(capsys, "status", q, "--json")["projects"]["nlp"]["deserved"] == 20
    assert len(document(capsys, "get", "workloads", q, "--json")["items"]) == 12
    assert document(capsys, "get", "nodes", q, "-o", "json")["kind"] == "nodes"
    assert document(capsys, "usage", q, "--json")["projects"]["nlp"]["budget"] is None
    assert document(capsys, "explain", "nlp/notebook", "--dir", q, "--json")["workload"]
    assert document(capsys, "cost", "nlp/notebook", "--dir", q, "--json")["workload"]
    snapshot = q / "snap.json"
    snapshot.write_text(cp(capsys, "observe", q).out)
    assert document(capsys, "observe", q, "--json")["clusters"][0]["name"] == "sim"
    assert document(capsys, "plan", q, "--observed", snapshot, "--json")["id"]
    assert document(capsys, "store", "init", q, "--json")["store"].endswith("controlplane.db")

    applied = document(capsys, "apply", q / "p.json", "--dir", q, "--json")
    assert applied["ok"] and {a["status"] for a in applied["actions"]} == {"done"}
    nothing = document(capsys, "apply", q, "--auto-approve", "--json")
    assert nothing["ok"] and nothing["actions"] == [] and "no changes" in nothing["message"]

    shown = document(capsys, "show", plan["id"][:8], "--dir", q, "--json")
    assert shown["id"] == plan["id"] and shown["applyStatus"] == "applied"
    assert [(o["op"], o["workload"], o["status"]) for o in shown["outcomes"]] == [
        (a["op"], a["workload"], "done") for a in applied["actions"]
    ]
    assert all(o["job"] for o in shown["outcomes"] if o["op"] == "submit")
    unapplied = document(capsys, "show", nothing["plan"], "--dir", q, "--json")
    assert unapplied["applyStatus"] is not None and unapplied["outcomes"] == []
    from_file = document(capsys, "show", q / "p.json", "--dir", q, "--json")
    assert from_file["applyStatus"] == "applied", "a plan file is looked up in the store too"

    assert document(capsys, "history", q, "--json")[0]["status"] == "done"
    assert document(capsys, "history", q, "--verify", "--json")["ok"]


def test_what_if_apply_prints_a_document(quickstart: Path, capsys: Capsys) -> None:
    snapshot = quickstart / "snap.json"
    snapshot.write_text(cp(capsys, "observe", quickstart).out)
    plan_file = quickstart / "p.json"
    document(capsys, "plan", quickstart, "--observed", snapshot, "--out", plan_file, "--json")
    what_if = document(capsys, "apply", plan_file, "--observed", snapshot, "--json")
    assert what_if["actions"]
    # the text suggests what can be done with a plan of a snapshot: the what-if apply (it
    # suggested applying it to the clusters, which refused it as stale: user trial)
    said = " ".join(
        cp(capsys, "plan", quickstart, "--observed", snapshot, "--out", plan_file).out.split()
    )
    assert f"cp apply {plan_file} --observed {snapshot}" in said


def _error(doc: Any, kind: str) -> str:
    assert doc["ok"] is False and doc["error"]["kind"] == kind, doc
    message: str = doc["error"]["message"]
    assert message
    return message


def test_spec_errors_are_a_document_of_diagnostics(tmp_path: Path, capsys: Capsys) -> None:
    (tmp_path / "specs.yaml").write_text(
        "apiVersion: controlplane/v1\nkind: Project\nmetadata: {name: p}\n"
        "spec: {quota: {gpus: 8, limit: 4}, maxWalltime: forever}\n"
    )
    for command in (
        ["validate"],
        ["plan"],
        ["status"],
        ["get", "jobs"],
        ["apply", "--auto-approve"],
    ):
        doc = document(capsys, *command, tmp_path, "--json", code=1)
        assert "2 errors" in _error(doc, "spec") and doc["valid"] is False
        assert [
            (d["line"], d["column"], d["severity"], d["field"]) for d in doc["diagnostics"]
        ] == [
            (4, 32, "error", "spec.quota.limit"),
            (4, 49, "error", "spec.maxWalltime"),
        ]
        assert all(d["path"].endswith("specs.yaml") and d["message"] for d in doc["diagnostics"])


def test_other_errors_are_a_document(quickstart: Path, tmp_path: Path, capsys: Capsys) -> None:
    q = quickstart
    assert "not a directory" in _error(
        document(capsys, "plan", tmp_path / "nowhere", "--json", code=1), "control-plane"
    )
    _error(document(capsys, "show", "nosuchplan", "--dir", q, "--json", code=1), "plan-not-found")
    _error(
        document(capsys, "explain", "nlp/ghost", "--dir", q, "--json", code=1), "workload-not-found"
    )
    _error(
        document(capsys, "cost", "nlp/ghost", "--dir", q, "--json", code=1), "workload-not-found"
    )
    _error(document(capsys, "status", q, "--db", "not a url", "--json", code=1), "store")
    _error(document(capsys, "observe", tmp_path / "nowhere", "--json", code=1), "control-plane")
    _error(document(capsys, "store", "init", q, "--db", "nope", "--json", code=1), "store")
    # a stale plan: made, then the world moved on
    document(capsys, "plan", q, "--out", q / "old.json", "--json")
    document(capsys, "apply", q, "--auto-approve", "--json")
    _error(document(capsys, "apply", q / "old.json", "--dir", q, "--json", code=1), "stale-plan")
    (q / "old.json").write_text("{}")
    _error(document(capsys, "apply", q / "old.json", "--dir", q, "--json", code=1), "state-file")
    # usage errors too: exit 2, still a document
    assert "use best or kai" in _error(
        document(capsys, "plan", q, "--json", "--engine", "nope", code=2), "usage"
    )
    assert "--bogus" in _error(document(capsys, "history", q, "--json", "--bogus", code=2), "usage")
    assert "'jobs'" in _error(document(capsys, "get", "jbos", q, "-o", "json", code=2), "usage")
    # a mistyped command too (it printed only the line; user trial)
    assert "'history'" in _error(document(capsys, "histroy", q, "--json", code=2), "usage")


def test_declining_an_apply_prints_a_document(
    quickstart: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    res = cp(capsys, "apply", quickstart, "--json")
    assert res.code == 1
    assert res.out.startswith("{"), "nothing before the document (a stray space was)"
    doc = json.loads(res.out)  # the question went to stderr, not into the document
    assert doc["ok"] is False and doc["actions"] == [] and "cancelled" in doc["message"]
    assert "Apply this plan?" in res.err
    assert "to submit" in res.err, "what is asked about is shown, beside the document"
    # no answer at all (stdin closed: a script): the error says what to do (it was "")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    res = cp(capsys, "apply", quickstart, "--json")
    assert res.code == 1
    error = json.loads(res.out)["error"]
    assert error["kind"] == "aborted" and "--auto-approve" in error["message"]
    assert "--auto-approve" in cp(capsys, "apply", quickstart).err


def test_an_output_file_that_cannot_be_written_is_refused_before_planning(
    quickstart: Path, tmp_path: Path, capsys: Capsys
) -> None:
    """--out into a missing folder or onto a folder crashed with a traceback after the
    whole plan was made, and stdout stayed empty with --json; --out onto a spec file
    replaced it (user trial). Each is a usage error now, before anything is planned."""
    q = quickstart
    cluster_yaml = next(q.glob("*.yaml"))
    spec_text = cluster_yaml.read_text()
    cases = [
        (["plan", q, "--out", tmp_path / "nodir" / "p.json"], "does not exist"),
        (["plan", q, "--out", tmp_path], "is a directory"),
        (["plan", q, "--markdown", "--full-plan", tmp_path / "nodir" / "f.md"], "does not exist"),
        (["plan", q, "--out", cluster_yaml], "not a plan file"),
        (["schema", "--out", tmp_path / "nodir" / "s.json"], "does not exist"),
    ]
    for args, words in cases:
        doc = document(capsys, *args, "--json", code=2) if args[0] == "plan" else None
        if doc is not None:
            assert words in _error(doc, "usage"), doc
        res = cp(capsys, *args)
        assert res.code == 2 and words in res.err and "Traceback" not in res.err, res.err
    assert cluster_yaml.read_text() == spec_text
    assert not (q / ".cp").exists() or not list((q / ".cp").glob("*.db")), "nothing planned"
    again = tmp_path / "p.json"  # a plan file is replaced by a newer plan, as before
    assert cp(capsys, "plan", q, "--out", again).code == 0
    assert cp(capsys, "plan", q, "--out", again).code == 0


def test_an_apply_document_has_the_same_keys_whatever_happened() -> None:
    """With no cluster answering, `cp apply --json` had no `stopped` (README lists it);
    and after a refused action the text said "Apply stopped" while the JSON said
    `stopped: false` (user trial). `stopped` is a stop on request; a failure is a failure."""
    nothing = apply_json("p", None, unreachable={"k8s": "down"}, silent="no cluster answered")
    done = apply_json("p", ApplyReport("p"))
    assert set(nothing) - {"message"} == set(done) and nothing["stopped"] is False
    failed = ApplyReport("p")
    failed.outcomes.append(_refused())
    out = io.StringIO()
    verdict(Console(file=out, width=120), failed)
    assert "Apply failed: 0 done, 1 failed" in out.getvalue() and "stopped" not in out.getvalue()


def _refused() -> ActionOutcome:
    why = Reason(code=ReasonCode.WITHIN_DESERVED, message="x")
    action = Action(op=Op.SUBMIT, workload="p/w", cluster="k8s", reason=why)
    return ActionOutcome(0, action, "failed", message="PermanentError: 403 Forbidden")


def test_json_output_is_utf8_and_keeps_the_order(capsys: pytest.CaptureFixture[str]) -> None:
    """`--json` documents are written by pydantic's serializer (the json module encodes in
    Python once there is an indent: 0.3 s of a 4,000-node plan): valid JSON in UTF-8, keys
    in the order given, indented as before."""
    from controlplane.cli.app import write_json

    print("before", flush=False)
    write_json({"z": "café — ✓", "a": [1, 2.5, None, True], "m": {"b": 1e-5}})
    out = capsys.readouterr().out
    assert out.startswith('before\n{\n  "z": "café — ✓",\n')
    doc = json.loads(out.split("\n", 1)[1])
    assert list(doc) == ["z", "a", "m"] and doc["a"] == [1, 2.5, None, True]
    assert doc["m"]["b"] == 1e-5


def test_what_if_apply_keeps_a_yaml_snapshot_yaml(quickstart: Path, capsys: Capsys) -> None:
    """``cp observe --yaml > snap.yaml``, plan and what-if apply it: the snapshot file was
    rewritten as JSON, and ``git diff`` of a snapshot kept in a repo showed every line
    changed (user trial)."""
    snapshot = quickstart / "snap.yaml"
    snapshot.write_text(cp(capsys, "observe", quickstart, "--yaml").out)
    plan_file = quickstart / "p.json"
    document(capsys, "plan", quickstart, "--observed", snapshot, "--out", plan_file, "--json")
    assert document(capsys, "apply", plan_file, "--observed", snapshot, "--json")["actions"]
    text = snapshot.read_text()
    assert not text.lstrip().startswith("{"), text[:80]
    assert yaml.safe_load(text)["clusters"][0]["jobs"]
    # and it is the snapshot the next plan reads: nothing left to start
    after = document(capsys, "plan", quickstart, "--observed", snapshot, "--json")
    assert [a for a in after["actions"] if a["op"] == "submit"] == []
