"""``cp show PREFIX`` finds a stored plan by the start of its id, and says so when the
start is not enough: with plans ``10c6…`` and ``16b4…`` stored, ``cp show 1`` said
"plan-not-found: no stored plan matches '1'", telling the user a plan that exists does
not."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.store import Store, default_url
from tests.builders import cluster, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]
IDS = ("10c6aa0000000000", "16b4bb0000000000", "2f00cc0000000000")


@pytest.fixture
def specs(tmp_path: Path, capsys: Capsys) -> Path:
    """A spec repo whose store holds three plans of the ids ``IDS`` (copies of one plan:
    only their ids matter here)."""
    root = write_specs(tmp_path / "s", [cluster(), project("p", gpus=2), workload("w", "p")])
    # at a fixed time: the plan's own id is fixed too, and begins as none of IDS does (at
    # the wall clock, one run in 256 or so made a "10…" id and `cp show 10` ambiguous)
    made = cp(capsys, "plan", root, "--json", "--now", "2026-11-22T10:00:00Z")
    assert made.code == 0, made.err
    assert not made.json()["id"].startswith(("1", "2f")), made.json()["id"]
    with Store(default_url(root)) as store:
        plan = store.get_plan(made.json()["id"])
        assert plan is not None
        for plan_id in IDS:
            store.save_plan(plan.model_copy(update={"id": plan_id}))
    return root


def test_an_ambiguous_prefix_names_the_plans_it_matches(specs: Path, capsys: Capsys) -> None:
    res = cp(capsys, "show", "1", "--dir", specs)
    assert res.code == 1 and "no stored plan matches" not in res.err, res.err
    [line] = res.err.splitlines()
    assert "ambiguous" in line and IDS[0] in line and IDS[1] in line and IDS[2] not in line
    doc = cp(capsys, "show", "1", "--dir", specs, "--json")
    assert doc.code == 1 and doc.json()["error"]["kind"] == "ambiguous-plan", doc.out
    assert cp(capsys, "show", "10", "--dir", specs, "--json").json()["id"] == IDS[0]


def test_a_prefix_is_text_not_a_pattern(specs: Path, capsys: Capsys) -> None:
    """``_`` and ``%`` are SQL LIKE wildcards: ``cp show _`` matched every plan."""
    for ref in ("_", "%", "1_c6"):
        res = cp(capsys, "show", ref, "--dir", specs, "--json")
        assert res.code == 1 and res.json()["error"]["kind"] == "plan-not-found", (ref, res.out)


def test_conflicting_formats_are_usage_errors_as_in_plan(specs: Path, capsys: Capsys) -> None:
    """``cp plan`` refuses ``--json --markdown`` and ``--max-chars`` without
    ``--markdown``; ``cp show`` printed JSON and ignored both (user trial)."""
    for extra in (["--json", "--markdown"], ["--max-chars", "100"]):
        res = cp(capsys, "show", IDS[0], "--dir", specs, *extra)
        assert res.code == 2, (extra, res.out)
    wide = cp(capsys, "show", IDS[0], "--dir", specs, "--markdown", "--max-chars", "0")
    assert wide.code == 0 and wide.out.startswith("**Plan"), wide.out
