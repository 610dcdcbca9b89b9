"""The command line end to end on the simulator: plan, apply, replan, history, stale plans,
interrupted applies, bad specs, and `cp` standing in for coreutils' copy."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.base import TemporaryError
from adapters.simulator import SimulatorAdapter
from controlplane.apply import apply_plan
from controlplane.plan import Plan
from controlplane.store import Store, default_url
from specs.loader import load_specs
from tests.builders import cluster, project, workload
from tests.builders.cli import cp, write_specs

ROOT = Path(__file__).resolve().parents[2]
NOW = "2026-11-22T10:00:00+00:00"


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    dst = tmp_path / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", dst, ignore=shutil.ignore_patterns(".cp"))
    return dst


def test_plan_apply_replan_history(quickstart: Path, capsys: pytest.CaptureFixture[str]) -> None:
    planned = cp(capsys, "plan", quickstart, "--out", quickstart / "p.json", "--detailed-exitcode")
    assert planned.code == 2, "changes pending"
    assert "to submit" in planned.out
    applied = cp(capsys, "apply", quickstart / "p.json", "--dir", quickstart, "--json")
    assert applied.code == 0, applied.err
    report = applied.json()
    assert report["ok"] and all(a["status"] == "done" for a in report["actions"])
    again = cp(capsys, "plan", quickstart, "--json", "--detailed-exitcode")
    assert again.code == 0 and again.json()["actions"] == []
    # the simulator's state moved on: the observed jobs are the submitted ones, tagged
    observed = cp(capsys, "observe", quickstart).json()
    ours = {j["workload"] for c in observed["clusters"] for j in c["jobs"]}
    assert ours == {a["workload"] for a in report["actions"]}
    # history answers "who started my job, when, why"
    hist = cp(capsys, "history", quickstart, "--workload", "nlp/llm-finetune", "--json").json()
    assert [(h["op"], h["status"], h["reason"]["code"]) for h in hist] == [
        ("submit", "done", "within-deserved")
    ]
    shown = cp(capsys, "show", report["plan"][:8], "--dir", quickstart, "--json")
    assert shown.code == 0 and shown.json()["id"] == report["plan"]
    # as a comment too, with the apply's status and outcomes (they were left out: trial)
    md = cp(capsys, "show", report["plan"][:8], "--dir", quickstart, "--markdown").out
    assert "Apply status: applied" in md and "| done | submit | `nlp/llm-finetune` |" in md, md


def test_pruned_workload_is_cancelled(quickstart: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cp(capsys, "apply", quickstart, "--auto-approve").code == 0
    text = (quickstart / "workloads" / "nlp.yaml").read_text()
    _, _, rest = text.partition("---\n")  # drop llm-finetune, the first document
    (quickstart / "workloads" / "nlp.yaml").write_text(rest)
    plan = cp(capsys, "plan", quickstart, "--json").json()
    cancels = [a for a in plan["actions"] if a["op"] == "cancel"]
    assert [(a["workload"], a["reason"]["code"]) for a in cancels] == [
        ("nlp/llm-finetune", "prune")
    ]
    # its 16 A100 GPUs go to waiting work in the same plan (evictions run first)
    assert cp(capsys, "apply", quickstart, "--auto-approve").code == 0
    assert cp(capsys, "plan", quickstart, "--json").json()["actions"] == []


def test_stale_plan_is_refused(quickstart: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cp(capsys, "plan", quickstart, "--out", quickstart / "old.json").code == 0
    assert cp(capsys, "apply", quickstart, "--auto-approve").code == 0  # the world moves on
    stale = cp(capsys, "apply", quickstart / "old.json", "--dir", quickstart)
    assert stale.code == 1 and "run `cp plan` again" in stale.err


def test_a_plan_stays_good_through_edits_that_change_no_spec(
    quickstart: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A comment, a blank line, a document moved to another file or a key written in
    another order made a saved plan stale ("the specs changed"), and a reviewed plan
    unknown to ``apply --reviewed``: the specs' digest was over the files' bytes (user
    trial). It is over what the documents say; an edit to a value still counts."""
    assert cp(capsys, "plan", quickstart, "--out", quickstart / "p.json").code == 0
    nlp = quickstart / "workloads" / "nlp.yaml"
    text = nlp.read_text()
    first, _, rest = text.partition("---\n")  # llm-finetune, then the rest
    nlp.write_text("# reviewed by the platform team\n\n" + rest)
    (quickstart / "workloads" / "moved.yaml").write_text(
        first.replace("  type: training\n  replicas: 2", "  replicas: 2\n  type: training")
    )
    assert (
        "  replicas: 2\n  type: training" in (quickstart / "workloads" / "moved.yaml").read_text()
    )
    same = cp(capsys, "apply", quickstart / "p.json", "--dir", quickstart, "--json")
    assert same.code == 0, same.err
    assert cp(capsys, "plan", quickstart, "--out", quickstart / "q.json").code == 0
    nlp.write_text(rest.replace("gpus: 1", "gpus: 2", 1))
    stale = cp(capsys, "apply", quickstart / "q.json", "--dir", quickstart)
    assert stale.code == 1 and "changed since plan" in stale.err


class FlakyAdapter:
    """A real simulator adapter that fails its N-th execute, like a controller outage."""

    def __init__(self, inner: SimulatorAdapter, fail_at: int) -> None:
        self.inner, self.fail_at, self.calls = inner, fail_at, 0
        self.cluster = inner.cluster

    def observe(self):  # type: ignore[no-untyped-def]
        return self.inner.observe()

    def execute(self, action, *, plan_id):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls == self.fail_at:
            raise TemporaryError("controller unreachable")
        return self.inner.execute(action, plan_id=plan_id)


def _apply_failing_at_4(quickstart: Path, capsys: pytest.CaptureFixture[str]) -> Plan:
    """The quick start's plan, saved, and applied until its 4th action fails."""
    assert cp(capsys, "plan", quickstart, "--out", quickstart / "p.json").code == 0
    plan = Plan.from_json((quickstart / "p.json").read_text())
    sim = SimulatorAdapter(
        load_specs(quickstart).desired.clusters["sim"], state_dir=quickstart / ".cp", clock=T0
    )
    store = Store(default_url(quickstart))
    from specs.observation import observation_of
    from specs.snapshot import Snapshot

    seen = observation_of(Snapshot(now=T0(), clusters=[sim.observe()]))
    first = apply_plan(plan, {"sim": FlakyAdapter(sim, fail_at=4)}, store, observed=seen)
    assert not first.ok and len([o for o in first.outcomes if o.status == "done"]) == 3
    assert [r.status for r in store.actions(plan.id)][:4] == ["done", "done", "done", "failed"]
    return plan


def T0() -> datetime:
    return datetime(2026, 11, 22, 10, tzinfo=UTC)


def test_interrupted_apply_resumes_without_duplicates(
    quickstart: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _apply_failing_at_4(quickstart, capsys)
    # the rerun resumes (the clusters moved on, but it is the same plan) and finishes
    rerun = cp(capsys, "apply", quickstart / "p.json", "--dir", quickstart, "--json")
    assert rerun.code == 0, rerun.err
    body = rerun.json()
    assert body["resumed"] and [a["status"] for a in body["actions"]][:3] == ["skipped"] * 3
    # a look at the jobs, at the clock the first apply ran at (the rerun ran at today's)
    looking = SimulatorAdapter(
        load_specs(quickstart).desired.clusters["sim"],
        state_dir=quickstart / ".cp",
        clock=T0,
        read_only=True,
    )
    # every job the cluster ran, in its queue or (ended over a day ago) its accounting
    ran = {r.job: r.workload for r in looking.runs(T0(), datetime.now(UTC))}
    assert sorted(ran.values()) == sorted(a.workload for a in plan.actions), "no duplicate job"


def test_a_rerun_of_a_failed_apply_is_not_called_interrupted(
    quickstart: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing was interrupted: the apply failed, and the rerun said "(resumed an
    interrupted apply)" all the same (user trial)."""
    _apply_failing_at_4(quickstart, capsys)
    rerun = cp(capsys, "apply", quickstart / "p.json", "--dir", quickstart)
    assert rerun.code == 0, rerun.err
    assert "resumed an apply that stopped before its end" in rerun.out, rerun.out
    assert "interrupted" not in rerun.out


BAD_SPECS = {
    "cluster.yaml": """\
apiVersion: controlplane/v1
kind: Cluster
metadata: {name: sim}
spec:
  gpuTypes: {a100_80: {memoryGiB: 80}}
  nodePools:
    - {name: a100, gpuType: a100_80, gpusPerNode: 8, nodes: 2, maxWalltime: 3d}
---
apiVersion: controlplane/v1
kind: Cluster
metadata: {name: other}
spec:
  gpuTypes: {a100_80: {memoryGiB: 80}}
  nodePools:
    - {name: h100, gpuType: h100, gpusPerNode: 8}
""",
    "org.yaml": """\
apiVersion: controlplane/v1
kind: Project
metadata: {name: chem}
spec: {quota: {gpus: 8, limit: 4}, maxWalltime: forever}
---
apiVersion: controlplane/v1
kind: Project
metadata: {name: Bad_Name}
spec: {}
---
apiVersion: controlplane/v1
kind: Project
metadata: {name: bio}
spec: {department: nowhere}
""",
    "workloads.yaml": """\
apiVersion: controlplane/v1
kind: Workload
metadata: {name: a}
spec: {project: bio, gpu: 2}
---
apiVersion: controlplane/v1
kind: Workload
metadata: {name: b}
spec: {project: bio, replicas: 1, minReplicas: 3}
---
apiVersion: controlplane/v1
kind: Workload
metadata: {name: c}
spec: {project: bio, gpus: 16, walltime: 2h}
---
apiVersion: controlplane/v2
kind: Workload
metadata: {name: d}
spec: {project: bio}
---
apiVersion: controlplane/v1
kind: Job
metadata: {name: e}
spec: {}
---
apiVersion: controlplane/v1
kind: Workload
metadata: {name: f}
spec: {project: ghost, walltime: 1h}
""",
    "broken.yaml": "apiVersion: controlplane/v1\nkind: Workload\nmetadata: {name: x\n",
}
EXPECTED_ERRORS = {
    "broken.yaml:4:1": "YAML syntax error",
    "cluster.yaml:15:29": "unknown gpuType 'h100'",
    "org.yaml:4:32": "spec.quota.limit: limit 4 is below the deserved 8",
    "org.yaml:4:49": "spec.maxWalltime: 'forever' is not a duration",
    "org.yaml:8:18": "metadata.name: 'Bad_Name' is not a valid name",
    "org.yaml:14:20": "unknown department 'nowhere'",
    "workloads.yaml:4:22": "unknown key 'gpu'; did you mean 'gpus'?",
    "workloads.yaml:9:48": "minReplicas 3 exceeds replicas 1",
    "workloads.yaml:14:28": "no node pool can ever hold",
    "workloads.yaml:16:13": "unsupported apiVersion 'controlplane/v2'",
    "workloads.yaml:22:7": "unknown kind 'Job'",
    "workloads.yaml:29:17": "unknown project 'ghost'",
}


def test_bad_specs_report_everything_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, text in BAD_SPECS.items():
        (tmp_path / name).write_text(text)
    for command in (
        ["validate", tmp_path],
        ["plan", tmp_path],
        ["apply", tmp_path, "--auto-approve"],
    ):
        res = cp(capsys, *command)
        assert res.code == 1
        errors = {}
        for line in res.err.splitlines():
            if ": error: " in line:
                where, _, what = line.partition(": error: ")
                errors[where.rsplit("/", 1)[-1]] = what
        # a dozen kinds of mistakes, all at once, each at its file:line:col
        for where, words in EXPECTED_ERRORS.items():
            assert where in errors and words in errors[where], (where, res.err)
        assert "nothing was planned or applied" in res.err
    assert not (tmp_path / ".cp" / "controlplane.db").exists(), "nothing written to the store"
    assert not (tmp_path / ".cp" / "simulator").exists()


def test_foreign_documents_are_skipped_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_specs(tmp_path, [cluster(), project("p", gpus=2), workload("w", "p", gpus=1)])
    (tmp_path / "deploy.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
    )
    res = cp(capsys, "validate", tmp_path, "--json")
    assert res.code == 0 and res.json()["workloads"] == 1
    assert any(
        w["path"].endswith("/deploy.yaml")
        and (w["line"], w["column"], w["severity"], w["field"]) == (1, 13, "warning", "apiVersion")
        and "skipped" in w["message"]
        for w in res.json()["warnings"]
    )


def test_schema_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    res = cp(capsys, "schema")
    assert res.code == 0 and "gpusPerNode" in json.dumps(res.json())


def test_cp_passes_other_invocations_to_the_system_copy(tmp_path: Path) -> None:
    src, dst = tmp_path / "a.txt", tmp_path / "b.txt"
    src.write_text("hello")
    exe = Path(sys.executable).parent / "cp"
    assert exe.exists(), "the console script is installed"
    subprocess.run([str(exe), str(src), str(dst)], check=True)
    assert dst.read_text() == "hello"
    subprocess.run([str(exe), "-r", str(tmp_path), str(tmp_path.parent / "copied")], check=True)
    assert (tmp_path.parent / "copied" / "a.txt").read_text() == "hello"
    ours = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    assert "controlplane" in ours.stdout
    env = {**os.environ, "PATH": f"{exe.parent}{os.pathsep}{os.environ['PATH']}"}
    missing = subprocess.run(
        [str(exe), str(tmp_path / "nope"), str(dst)], capture_output=True, text=True, env=env
    )
    assert missing.returncode == 1 and "No such file" in missing.stderr  # coreutils' words


def test_usage_errors_are_worded_not_tracebacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = cp(capsys, "plan", tmp_path, "--bogus")
    assert res.code == 2 and "No such option: --bogus" in res.err and "Traceback" not in res.err
    res = cp(capsys, "plan", tmp_path, "--engine", "nope")
    assert res.code == 2 and "use best or kai" in res.err
    # options that do nothing together were silently ignored (user trial)
    res = cp(capsys, "plan", tmp_path, "--json", "--markdown")
    assert res.code == 2 and "give --json or --markdown, not both" in res.out  # in JSON
    res = cp(capsys, "plan", tmp_path, "--max-chars", "1000")
    assert res.code == 2 and "bounds the --markdown comment" in res.err
    plan_file = tmp_path / "plan.json"
    plan_file.write_text("{}")
    res = cp(capsys, "apply", plan_file, "--reviewed")
    assert res.code == 2 and "takes a spec directory" in res.err


def test_explain_names_the_binding_quota_level(
    quickstart: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = cp(capsys, "explain", "ads/ctr-train", "--dir", quickstart)
    assert res.code == 0
    said = " ".join(res.out.split())  # as wrapped at the terminal's width
    assert "over-limit: needs 8 GPUs; project ads holds 8 of its limit of 12 (16 with it)" in said
    binding = [line for line in res.out.splitlines() if "<- binds" in line]
    assert len(binding) == 1 and "project ads" in binding[0]
    body = cp(capsys, "explain", "ads/ranker-serve", "--dir", quickstart, "--json").json()
    assert [(q["kind"], q["name"]) for q in body["quota"]] == [
        ("project", "ads"),
        ("department", "product"),
    ]
    assert body["pending"][0]["reason"]["code"] == "non-preemptible-over-deserved"


def test_the_passthrough_knows_every_subcommand() -> None:
    """`cp` decides ours-or-coreutils before importing typer, from a static list: it must
    name exactly the app's commands, or a new command would be handed to coreutils."""
    from controlplane.cli import commands  # noqa: F401  (registers the commands)
    from controlplane.cli.app import app
    from controlplane.cli.passthrough import COMMANDS

    registered = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback}
    registered |= {g.name for g in app.registered_groups if g.name}
    assert registered == COMMANDS


def test_cost_says_when_site_policy_holds_a_workload_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cp cost` judges candidates as a plan would, budgets included: a project that spent
    its month's GPU-hours submits none of them, and the table says why."""
    write_specs(
        tmp_path,
        [
            cluster(),
            project("p", gpus=2, budget={"gpuHoursPerMonth": 10}),
            workload("w", "p", gpus=1),
        ],
    )
    snap = tmp_path / "snap.json"
    snap.write_text(
        json.dumps(
            {
                "now": "2026-11-22T10:00:00+00:00",
                "clusters": [
                    {
                        "name": "sim",
                        "nodes": [
                            {"name": "a100-01", "pool": "a100", "gpuType": "a100_80", "gpus": 8}
                        ],
                    }
                ],
                "usage": [{"project": "p", "gpuHours": 12, "endedAt": "2026-11-20T00:00:00+00:00"}],
            }
        )
    )
    res = cp(capsys, "cost", "p/w", "--dir", tmp_path, "--observed", snap, "--json")
    assert res.code == 0, res.err
    assert res.json()["blocked"]["code"] == "over-budget"
    human = cp(capsys, "cost", "p/w", "--dir", tmp_path, "--observed", snap)
    assert "A plan submits none of these now: over-budget" in human.out


def test_cost_of_a_running_workload_says_where_it_runs(
    quickstart: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The candidates of a workload that runs are where another submission would go; the
    table says first where it runs now (it said only "start unknown")."""
    assert cp(capsys, "apply", quickstart, "--auto-approve").code == 0
    res = cp(capsys, "cost", "nlp/llm-finetune", quickstart, "--no-forecast", "--json")
    assert res.code == 0, res.err
    [active] = res.json()["active"]
    assert (active["cluster"], active["state"], active["gpus"]) == ("sim", "RUNNING", 16)
    human = cp(capsys, "cost", "nlp/llm-finetune", quickstart, "--no-forecast")
    assert f"Now: job {active['jobId']} RUNNING on sim/" in human.out
    waiting = cp(capsys, "cost", "ads/ranker-serve", quickstart, "--no-forecast", "--json")
    assert waiting.json()["active"] == [], "never submitted: nothing on the clusters"


def test_cost_says_when_a_plan_would_start_none_of_the_candidates(
    quickstart: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A candidate marked "chosen" for work a plan never starts (completed, or held back by
    its quota) read as if it would run (user trial): the table says why not."""
    start, later = "2026-11-20T00:00:00+00:00", "2026-11-21T12:00:00+00:00"
    assert cp(capsys, "apply", quickstart, "--auto-approve", "--now", start).code == 0

    def blocked(workload: str) -> dict[str, str]:
        res = cp(capsys, "cost", workload, quickstart, "--no-forecast", "--json", "--now", later)
        assert res.code == 0, res.err
        got: dict[str, str] = res.json()["blocked"]
        return got

    assert blocked("nlp/sweep-lr-1")["code"] == "completed"  # 6 h walltime: done by then
    assert blocked("ads/ranker-serve")["code"] == "non-preemptible-over-deserved"
    assert blocked("nlp/llm-finetune") is None, "running: another submission is not blocked"
    human = cp(capsys, "cost", "nlp/sweep-lr-1", quickstart, "--no-forecast", "--now", later)
    assert "A plan submits none of these now: completed" in human.out


def test_a_plan_made_twice_at_one_time_applies_from_its_file(
    quickstart: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two plans of the same specs, snapshot and --now have one id; the store keeps the
    first. Applying the second's file was refused ("differs from the plan of that id the
    store recorded") because its solver took a few milliseconds longer (user trial). Only
    how long the solver took may differ; any other change to a plan of that id is still
    refused."""
    assert cp(capsys, "plan", quickstart, "--now", NOW).code == 0  # stored
    out = quickstart / "p.json"
    assert cp(capsys, "plan", quickstart, "--now", NOW, "--out", out).code == 0
    made = Plan.from_json(out.read_text())
    slower = made.model_copy(
        update={"solver": made.solver.model_copy(update={"wall_seconds": 123.0})}
    ).sealed()
    out.write_text(slower.to_json())
    applied = cp(capsys, "apply", out, "--dir", quickstart, "--now", NOW, "--json")
    assert applied.code == 0, applied.err
    assert applied.json()["ok"]
    reasons_changed = made.model_copy(
        update={
            "actions": [made.actions[0].model_copy(update={"job": "forged"}), *made.actions[1:]]
        }
    ).sealed()
    out.write_text(reasons_changed.to_json())
    refused = cp(capsys, "apply", out, "--dir", quickstart, "--now", NOW, "--json")
    assert refused.code != 0 and "differs from the plan of that id" in refused.err


def test_the_saved_plan_s_hint_applies_it_from_anywhere(
    quickstart: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plan file holds no specs: the hint names the spec directory too."""
    planned = cp(capsys, "plan", quickstart, "--out", quickstart / "p.json")
    assert planned.code == 0
    hint = " ".join(planned.out.split()).split("; run ")[1].removesuffix(" to carry it out.")
    assert hint.startswith("cp apply ") and "--dir" in hint
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    applied = cp(capsys, *shlex.split(hint)[1:], "--auto-approve")
    assert applied.code == 0, applied.err
    assert cp(capsys, "plan", quickstart, "--json").json()["actions"] == []


def test_a_plan_applied_twice_says_it_was_applied_already(
    quickstart: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not "resumed an interrupted apply": nothing was interrupted, nothing runs again."""
    assert cp(capsys, "plan", quickstart, "--out", quickstart / "p.json").code == 0
    first = cp(capsys, "apply", quickstart / "p.json", "--dir", quickstart, "--auto-approve")
    assert first.code == 0 and "Apply complete" in first.out
    again = cp(capsys, "apply", quickstart / "p.json", "--dir", quickstart, "--auto-approve")
    assert again.code == 0 and "applied already" in again.out and "resumed" not in again.out
    assert f"--dir {quickstart}" in " ".join(again.out.split())  # the store is there
    doc = cp(capsys, "apply", quickstart / "p.json", "--dir", quickstart, "--json").json()
    assert doc["alreadyApplied"] and not doc["resumed"] and doc["actions"] == [] and doc["ok"]
    # a filter that matches nothing says so; a limit below one is a usage error
    none = cp(capsys, "history", quickstart, "--workload", "nlp/nope")
    assert none.code == 0 and "No applied actions for nlp/nope." in none.out
    assert cp(capsys, "history", quickstart, "--limit", "0").code == 2


def test_a_plan_file_applied_from_the_wrong_folder_is_refused_before_anything(
    quickstart: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "the specs changed" and "another state of the clusters", and left a store
    in the folder it was run from (user trial)."""
    assert cp(capsys, "plan", quickstart, "--out", quickstart / "p.json").code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = cp(capsys, "apply", quickstart / "p.json", "--dir", elsewhere)
    assert res.code == 1
    assert "made from another spec directory" in res.err and "--dir" in res.err
    assert list(elsewhere.iterdir()) == []  # nothing left behind


def test_a_plan_file_of_other_specs_is_refused(
    quickstart: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A saved plan applied after its specs changed (or to a folder of other specs on the
    same clusters) only warned, then carried out actions the specs no longer ask for: the
    next plan cancelled what it had started (user trial). It is refused now, untouched."""
    assert cp(capsys, "plan", quickstart, "--out", tmp_path / "p.json").code == 0
    (quickstart / "workloads" / "vision.yaml").unlink()
    res = cp(capsys, "apply", tmp_path / "p.json", "--dir", quickstart, "--json")
    assert res.code == 1
    error = res.json()["error"]
    assert error["kind"] == "stale-plan" and "the specs in" in error["message"]
    assert cp(capsys, "history", quickstart, "--json").json() == []  # nothing was applied


@pytest.mark.parametrize("command", [["plan", "--detailed-exitcode"], ["apply", "--auto-approve"]])
def test_a_folder_without_clusters_is_not_no_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """`cp plan` in a wrong or empty folder said "No changes. The clusters match the
    specs." and exited 0, which CI reads as nothing to do (user trial); `cp watch` already
    called it an error."""
    res = cp(capsys, command[0], tmp_path, *command[1:])
    assert res.code == 1
    assert "no clusters in the specs" in res.err and "No changes" not in res.out
    doc = cp(capsys, command[0], tmp_path, *command[1:], "--json").json()
    assert doc["ok"] is False and "no clusters in the specs" in doc["error"]["message"]


def test_apply_refuses_a_made_up_clock_on_a_real_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cp apply --now <5 h ahead>` on Kubernetes preempted a job inside its minRuntime at
    once, and the hash-chained history recorded it 5 hours in the future (user trial).
    --now sets simulated clusters' clocks; a real one acts, and is recorded, at the real
    time. Nothing is opened: the refusal comes before any cluster is reached."""
    kube = cluster(
        "k8s",
        adapter="kubernetes",
        pools=[{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}],
        kubernetes={"kubeconfig": str(tmp_path / "nowhere.kubeconfig")},
    )
    specs = write_specs(tmp_path / "s", [cluster(), kube, project("p", gpus=8)])
    res = cp(capsys, "apply", specs, "--auto-approve", "--now", "2030-01-01T00:00:00Z")
    assert res.code == 1, res.out + res.err
    assert "--now sets the clock of simulated clusters only" in res.err
    assert "k8s (kubernetes)" in res.err and "nowhere.kubeconfig" not in res.err
    assert not (specs / ".cp").exists() or not list((specs / ".cp").glob("*.db*"))


def test_a_snapshot_cp_observe_wrote_is_read_back_with_a_queued_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job waiting in the cluster's queue has replicas with no node, which `cp observe`
    leaves out; `cp plan --observed` then refused the snapshot ("node: Field required")
    (user trial)."""
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 1}]
    docs = [cluster(pools=pools), project("p", gpus=8), workload("blocker", "p", gpus=8)]
    specs = write_specs(tmp_path / "s", docs)
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-03-01T00:00:00Z").code == 0
    fan = workload("f", "p", gpus=8, walltime="3h", strategy={"fanOut": True})
    write_specs(specs, [*docs, fan])
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-03-01T00:10:00Z").code == 0
    snapshot = cp(capsys, "observe", specs, "--now", "2026-03-01T00:20:00Z")
    (tmp_path / "snap.json").write_text(snapshot.out)
    assert '"node"' not in snapshot.out.split('"p/f"', 1)[1].split("}", 1)[0]  # left out
    planned = cp(capsys, "plan", specs, "--observed", tmp_path / "snap.json", "--json")
    assert planned.code == 0, planned.err
    assert [p["reason"]["code"] for p in planned.json()["pending"]] == ["submitted"]


def test_applies_at_the_same_now_are_recorded_at_it_in_order(
    quickstart: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What an apply at --now records happened at --now plus the real time the apply took
    (up to a second and more later), and a second apply at the same --now was recorded
    before the first one's last actions: `cp history` listed it as older (user trials).
    Each record is now a microsecond after the one before: at --now, in order."""
    at = "2026-12-01T00:00:00+00:00"
    assert cp(capsys, "apply", quickstart, "--auto-approve", "--now", at).code == 0
    text = (quickstart / "workloads" / "nlp.yaml").read_text()
    (quickstart / "workloads" / "nlp.yaml").write_text(text.partition("---\n")[2])
    assert cp(capsys, "apply", quickstart, "--auto-approve", "--now", at).code == 0
    hist = cp(capsys, "history", quickstart, "--json").json()
    assert hist[0]["op"] == "cancel" and hist[0]["workload"] == "nlp/llm-finetune", hist[0]
    times = [datetime.fromisoformat(h["at"]) for h in hist]
    assert times == sorted(times, reverse=True), times  # newest first, truly
    assert all(t.replace(microsecond=0) == datetime.fromisoformat(at) for t in times), times


def test_a_plan_file_applied_without_dir_from_another_folder_names_dir(
    quickstart: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``cp apply plan.json`` run from a folder of other specs (the one above the spec
    repo, say) printed those specs' errors, or said they "changed" and to plan again, and
    never that ``--dir`` was missing (user trial)."""
    assert cp(capsys, "plan", quickstart, "--out", quickstart / "p.json").code == 0
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    (here / "other.yaml").write_text(
        "apiVersion: controlplane/v1\nkind: Workload\nmetadata: {name: x}\n"
        "spec: {project: nope, gpus: 1}\n"
    )
    res = cp(capsys, "apply", quickstart / "p.json")
    assert res.code == 1 and "unknown project 'nope'" in res.err
    assert "--dir" in res.err.splitlines()[-1], res.err
    doc = cp(capsys, "apply", quickstart / "p.json", "--json").json()
    assert doc["error"]["kind"] == "spec" and "--dir" in doc["error"]["message"]
    # the example's specs, edited: the same clusters, other specs
    (here / "other.yaml").unlink()
    shutil.copytree(quickstart, here / "qs", ignore=shutil.ignore_patterns(".cp"))
    org = here / "qs" / "org.yaml"
    org.write_text(org.read_text().replace("limit: 12", "limit: 16"))
    stale = cp(capsys, "apply", quickstart / "p.json")
    assert stale.code == 1 and "--dir" in stale.err, stale.err
    # with --dir given, the specs are the ones meant: no hint
    given = cp(capsys, "apply", quickstart / "p.json", "--dir", here)
    assert given.code == 1 and "--dir" not in given.err, given.err


def test_a_plan_file_of_other_specs_says_where_to_see_what_changed(
    quickstart: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal named no file, document or field (user trial). In a git checkout the
    plan knows the commit its specs were read at: the refusal names it, and the command
    that shows what changed since."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(quickstart)]
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "specs"]):
        subprocess.run([*git, *argv], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    assert cp(capsys, "plan", quickstart, "--out", tmp_path / "p.json").code == 0
    org = quickstart / "org.yaml"
    org.write_text(org.read_text().replace("gpuHoursPerMonth: 5000", "gpuHoursPerMonth: 6000"))
    res = cp(capsys, "apply", tmp_path / "p.json", "--dir", quickstart)
    assert res.code == 1
    short = head.stdout.strip()[:12]
    said = " ".join(res.err.split())
    assert f"made at commit {short}" in said and f"git diff {short} --" in said, said
