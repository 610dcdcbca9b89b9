"""At 80 columns every table fits and no identifier is cut: "arts-scie…" cannot be pasted
into the next command. Other columns wrap, or are left out (and the output says so)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from controlplane.cli.views.tables import Column, fitted
from tests.builders import cluster, department, pool, project, workload
from tests.builders.cli import Result, cp, write_specs

Capsys = pytest.CaptureFixture[str]
DEPT = "arts-sciences-graduate-school"
PROJECT = "computational-linguistics-lab"
LONG = "multilingual-embedding-pretraining-run"
NOW = "2026-11-22T10:00:00+00:00"


@pytest.fixture
def org(tmp_path: Path) -> Path:
    return write_specs(
        tmp_path,
        [
            cluster(),
            department(DEPT, gpus=16),
            project(PROJECT, gpus=8, department=DEPT, limit=24),
            project("p", gpus=8),
            workload(LONG, PROJECT, gpus=8, replicas=2, walltime="1d"),
            workload("short-one", PROJECT, gpus=8, replicas=3, walltime="1d"),
            workload("w", "p", gpus=1, walltime="1h"),
        ],
    )


@pytest.fixture
def at80(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    from controlplane.cli.app import out

    assert out.width == 80, "the console follows COLUMNS"


def _fits(res: Result, *names: str, width: int = 80) -> None:
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert all(len(line) <= width for line in lines), [x for x in lines if len(x) > width]
    for name in names:
        assert any(name in line for line in lines), f"{name} cut or missing:\n{res.out}"
    assert "…" not in res.out


@pytest.mark.usefixtures("at80")
def test_plan_and_status_keep_names_whole(org: Path, capsys: Capsys) -> None:
    plan = cp(capsys, "plan", org, "--now", NOW)
    _fits(plan, DEPT, PROJECT, f"{PROJECT}/{LONG}", f"{PROJECT}/short-one", "p/w")
    _fits(cp(capsys, "status", org, "--now", NOW), DEPT, PROJECT)


@pytest.mark.usefixtures("at80")
def test_explain_keeps_names_whole(org: Path, capsys: Capsys) -> None:
    res = cp(capsys, "explain", f"{PROJECT}/{LONG}", "--dir", org, "--now", NOW)
    _fits(res, f"project {PROJECT}", f"department {DEPT}", "<- binds")


@pytest.mark.usefixtures("at80")
def test_cost_respects_the_width(org: Path, capsys: Capsys) -> None:
    res = cp(capsys, "cost", f"{PROJECT}/{LONG}", "--dir", org, "--now", NOW, "--no-forecast")
    every = cp(capsys, "cost", f"{PROJECT}/{LONG}", "--dir", org, "--now", NOW, "--json").json()
    names = [c["name"] for c in every["candidates"]]
    _fits(res, *names)
    assert "left out at 80 columns" in res.out


@pytest.mark.usefixtures("at80")
def test_cost_without_forecasts_keeps_long_candidate_names_whole(
    tmp_path: Path, capsys: Capsys
) -> None:
    """Every row said "no start estimate (ranked by cost)", which the title says once; the
    column took the room the candidates' names needed, and they were folded (trialO)."""
    pools = [pool("h100-short-queue", maxWalltime="4h"), pool("h100-long-queue")]
    fan = {"fanOut": True, "maxParallel": 3}
    specs = write_specs(
        tmp_path,
        [
            cluster("alpha-cluster", pools=pools),
            project("p", gpus=8),
            workload("w", "p", gpus=4, walltime="1h", strategy=fan),
        ],
    )
    res = cp(capsys, "cost", "p/w", "--dir", specs, "--now", NOW, "--no-forecast")
    every = cp(capsys, "cost", "p/w", "--dir", specs, "--now", NOW, "--json").json()
    names = [c["name"] for c in every["candidates"]]
    assert max(map(len, names)) >= 35
    _fits(res, *names)
    assert "no estimates: by cost" in res.out and "no start estimate" not in res.out


def test_narrow_terminals_leave_columns_out_and_say_which() -> None:
    columns = [
        Column("name"),
        Column("a", "number", drop=2),
        Column("b", "number", drop=1),
        Column("note", "text"),
    ]
    rows: list[list[str | object]] = [["x" * 30, "1" * 10, "2" * 10, "some words " * 5]]
    table, dropped = fitted(Console(width=70), columns, rows)  # type: ignore[arg-type]
    assert dropped == ["b"]
    table, dropped = fitted(Console(width=20), columns, rows)  # type: ignore[arg-type]
    assert dropped == ["b", "a"], "names stay, even when wider than the terminal"
    console = Console(width=20, record=True)
    console.print(table)
    assert console.export_text().count("x") == 30, "folded over lines, not cropped"


def test_json_is_never_narrowed(org: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    res = cp(capsys, "explain", f"{PROJECT}/{LONG}", "--dir", org, "--now", NOW, "--json")
    assert json.loads(res.out)["workload"] == f"{PROJECT}/{LONG}"


@pytest.mark.usefixtures("at80")
def test_history_keeps_names_whole(org: Path, capsys: Capsys) -> None:
    assert cp(capsys, "apply", org, "--auto-approve", "--now", NOW).code == 0
    _fits(cp(capsys, "history", org), f"{PROJECT}/short-one", "p/w")


@pytest.mark.usefixtures("at80")
def test_the_policy_diff_keeps_names_whole(
    org: Path, tmp_path_factory: pytest.TempPathFactory, capsys: Capsys
) -> None:
    base = write_specs(
        tmp_path_factory.mktemp("base"),
        [
            cluster(),
            department(DEPT, gpus=24),
            project(PROJECT, gpus=16, department=DEPT, limit=32),
            project("p", gpus=8),
            workload(LONG, PROJECT, gpus=8, replicas=2, walltime="1d"),
            workload("short-one", PROJECT, gpus=8, replicas=3, walltime="1d"),
            workload("w", "p", gpus=1, walltime="1h"),
        ],
    )
    res = cp(capsys, "plan", org, "--base-dir", base, "--now", NOW)
    _fits(res, f"department {DEPT}", f"project {PROJECT}", f"{PROJECT}/{LONG}")
    assert "quota.limit" in res.out and "32" in res.out and "24" in res.out


def test_cost_says_when_the_clusters_had_no_estimate_to_give() -> None:
    """On Kubernetes (no start forecasts) the title said "estimates from the clusters" above
    a column of "start unknown" (trialQ)."""
    from datetime import UTC, datetime

    from controlplane.cli.views.cost import print_candidates
    from controlplane.costs import CandidateTable
    from solvers.fanout import Candidate, Mode, choose

    c = Candidate(
        workload="p/w", cluster="k8s", pool="a100", partition=None, gpu_type="a100_80",
        nodes=1, gpus_per_node=4, tasks_per_node=1, mode=Mode.DIRECT, walltime=3600,
        time_min=None, hours=1.0, cost_per_gpu_hour=3.0,
    )  # fmt: skip
    now = datetime(2026, 11, 22, 10, tzinfo=UTC)
    for forecasts, title in [
        ({c.key: None}, "the clusters gave no estimates: by cost"),
        ({c.key: now}, "estimates from the clusters"),
    ]:
        rows = choose([c], forecasts, 2)
        table = CandidateTable("p/w", True, 2, now, True, rows)
        console = Console(width=100, record=True)
        print_candidates(console, table)
        text = console.export_text()
        assert title in text.splitlines()[0]
        assert ("estimated" in text) is (title == "estimates from the clusters")


def test_the_text_plan_counts_what_waits_by_reason(quickstart: Path, capsys: Capsys) -> None:
    """The pull-request comment's Waiting section said how many wait and why; the plan in
    a terminal listed them without a count, thousands of them on a busy org (user trial)."""
    text = cp(capsys, "plan", quickstart).out
    assert "Waiting (2: 1 non-preemptible-over-deserved, 1 over-limit)" in text, text
