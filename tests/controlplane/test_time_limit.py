"""``--time-limit`` bounds the whole plan: the clock is only a budget. A plan that finishes
within its limit is the plan made without any clock; one that does not is the plan reached
so far, and says which steps were cut short (``solver.cutShort``, and a line in the text and
Markdown views)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from controlplane.cli.views.plan import cut_short, summary
from controlplane.plan import Plan, SolverReport
from controlplane.reconcile import plan
from solvers.policy import Policy
from specs.loader import load_specs
from specs.snapshot import ClusterState, Snapshot
from tests.builders import NOW
from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[2]


def _ticking(step: float) -> Callable[[], float]:
    """A clock that moves ``step`` seconds every time it is read."""
    now = [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]

    return clock


def _quickstart() -> tuple[object, Snapshot]:
    from adapters.simulator import nodes_from_spec

    desired = load_specs(ROOT / "examples" / "quickstart").desired
    clusters = [
        ClusterState(name=name, nodes=nodes_from_spec(c)) for name, c in desired.clusters.items()
    ]
    return desired, Snapshot(now=NOW, clusters=clusters)


def test_a_plan_within_its_limit_is_the_plan_without_a_clock() -> None:
    desired, snap = _quickstart()
    free = plan(desired, snap, now=NOW)  # type: ignore[arg-type]
    timed = plan(desired, snap, now=NOW, clock=_ticking(0.001))  # type: ignore[arg-type]
    assert timed == free
    assert timed.solver.cut_short == []


def test_a_plan_out_of_time_is_the_plan_so_far_and_says_so() -> None:
    desired, snap = _quickstart()
    cut = plan(
        desired,  # type: ignore[arg-type]
        snap,
        now=NOW,
        policy=Policy(time_limit=1.0),
        clock=_ticking(10.0),  # every reading is past the limit
    )
    assert any(c.startswith("cp-sat (round 1)") for c in cut.solver.cut_short)
    assert any(c.startswith("consolidation (round 1): not run") for c in cut.solver.cut_short)
    assert cut.actions, "the greedy allocation still stands"
    assert cut.solver.engine == "kai-greedy"


def test_the_command_line_shows_what_was_cut_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    specs = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    res = cp(capsys, "plan", specs, "--time-limit", "0", "--json")
    assert res.code == 0, res.err
    assert res.json()["solver"]["cutShort"]
    text = cp(capsys, "plan", specs, "--time-limit", "0")
    assert "Cut short (the plan is what was reached)" in text.out
    # and in the summary line (a long plan's first lines have scrolled away: trial U)
    said = " ".join(text.out.split())
    assert "waiting; cut short (cp-sat, consolidation, reclaim, preemption, converge): the " in said
    markdown = cp(capsys, "plan", specs, "--time-limit", "0", "--markdown")
    assert "> Cut short" in markdown.out


@pytest.mark.parametrize("auto_approve", [False, True], ids=["plans", "applies"])
def test_each_watch_cycle_plans_within_the_time_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], auto_approve: bool
) -> None:
    """`cp watch` had no --time-limit (soak trial): its cycles planned with the default
    bound whatever the plans it runs take. It takes plan's option, same name, default
    and help, for each cycle's plan, and its line says when one was cut short."""
    specs = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    approve = ["--auto-approve"] if auto_approve else []
    res = cp(capsys, "watch", specs, "--once", "--quiet", "0", "--time-limit", "0", *approve)
    assert res.code == 0, res.out + res.err
    named = re.search(r"plan ([0-9a-f]+): .*, cut short \(cp-sat, ", res.out)
    assert named is not None, res.out
    shown = cp(capsys, "show", named.group(1), specs, "--json")
    assert shown.json()["solver"]["cutShort"], "the stored plan says what was cut short"


def test_watch_takes_plan_s_time_limit_option(capsys: pytest.CaptureFixture[str]) -> None:
    def option(command: str) -> str:
        text = cp(capsys, command, "--help").out
        return " ".join(text[text.index("--time-limit") :].split("--", 2)[1].split())

    assert option("watch") == option("plan")
    assert option("watch").endswith("[default: 60.0]"), option("watch")


def test_apply_of_a_spec_directory_plans_within_the_time_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cp apply DIR` plans before it acts, but had no --time-limit: its plan always had the
    default bound. It takes plan's option, and the applied plan says it was cut short."""
    specs = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    res = cp(capsys, "apply", specs, "--auto-approve", "--time-limit", "0", "--json")
    assert res.code == 0, res.out + res.err
    applied = res.json()
    shown = cp(capsys, "show", applied["plan"], specs, "--json")
    assert shown.json()["solver"]["cutShort"], "the applied plan says what was cut short"
    assert applied["actions"], "what the plan reached so far is applied"


def test_a_plan_whose_only_cut_is_cp_sats_own_limit_does_not_promise_more() -> None:
    """CP-SAT stops at its own limit (5 s) on a busy org well inside the plan's; the plan is
    then the better of its answer so far and the greedy's, and nothing is left for the
    next plan. The summary line said "cut short (cp-sat): the next plan may do more", and
    the next plan did nothing (trial W)."""
    made = Plan(
        id="p",
        created_at=NOW,
        spec_digest="",
        observed_digest="",
        solver=SolverReport(
            engine="cp-sat",
            status="FEASIBLE",
            cut_short=["cp-sat (round 1): its fair stage stopped at CP-SAT's own time limit (5 s)"],
        ),
    )
    said = summary(made)
    assert "next plan may do more" not in said
    assert said == (
        "Plan: no changes; 0 waiting; CP-SAT stopped at its time limit: the plan has the "
        "better of its answer so far and the greedy's."
    )
    # the plan's own limit stopped CP-SAT: the steps after it were cut too, or may be
    plan_limit = ["cp-sat (round 1): its fair stage stopped at the plan's time limit"]
    bounded = made.solver.model_copy(update={"cut_short": plan_limit})
    assert summary(made.model_copy(update={"solver": bounded})).endswith(
        "; cut short (cp-sat): the next plan may do more."
    )
    both = [*made.solver.cut_short, "reclaim (round 1): not run"]
    more = summary(
        made.model_copy(update={"solver": made.solver.model_copy(update={"cut_short": both})})
    )
    assert more.endswith("; cut short (cp-sat, reclaim): the next plan may do more.")


def test_apply_json_says_what_was_cut_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cp apply --json` named the plan but not what was cut short: a CI job had to ask
    `cp show` for it (trial W). It carries the plan's `cutShort`, as `cp plan --json`."""
    specs = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    res = cp(capsys, "apply", specs, "--auto-approve", "--time-limit", "0", "--json")
    assert res.code == 0, res.err
    done = res.json()
    assert done["cutShort"] and done["cutShort"][0].startswith("cp-sat (round 1)")
    shown = cp(capsys, "show", done["plan"], specs, "--json").json()
    assert done["cutShort"] == shown["solver"]["cutShort"]
    idle = cp(capsys, "apply", specs, "--auto-approve", "--json").json()
    assert "cutShort" not in idle  # a plan that finished within its limit


def test_cp_sat_says_which_limit_stopped_it() -> None:
    """Its own limit (no step left undone) or the plan's (the steps after it are cut too)."""
    desired, snap = _quickstart()
    own = plan(desired, snap, now=NOW, policy=Policy(cpsat_time_limit=0.0))  # type: ignore[arg-type]
    assert own.solver.cut_short and all(
        c.startswith("cp-sat (round 1)") and "CP-SAT's own time limit (0 s)" in c
        for c in own.solver.cut_short
    )
    assert not own.solver.work_left
    assert cut_short(own).startswith("CP-SAT stopped at its time limit: the plan has the better")
    readings = iter([0.0])  # then a microsecond before the end, for ever: CP-SAT gets that

    bounded = plan(
        desired,  # type: ignore[arg-type]
        snap,
        now=NOW,
        policy=Policy(time_limit=1.0),
        clock=lambda: next(readings, 0.999999),
    )
    assert any("stopped at the plan's time limit" in c for c in bounded.solver.cut_short)
    assert bounded.solver.work_left


def test_a_cycle_that_names_a_stored_plan_tells_its_own_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An idle cycle names the stored plan that decided as it does, told with its own
    figures; it kept that plan's solver report, so a preview cut by `--time-limit 0` made
    every later cycle say "cut short" (trial X), and a cut cycle naming a whole plan said
    nothing. What was cut short is this cycle's."""
    specs = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    assert cp(capsys, "plan", specs, "--time-limit", "0").code == 0  # a preview, cut, stored
    res = cp(capsys, "watch", specs, "--once")
    assert res.code == 0, res.err
    assert "no changes" in res.out and "cut short" not in res.out, res.out
    cut = cp(capsys, "watch", specs, "--once", "--time-limit", "0")
    assert "cut short" in cut.out, cut.out
    again = cp(capsys, "apply", specs, "--auto-approve")
    assert "cut short" not in again.out, again.out
