"""``cp explain`` of a running workload: its jobs, nodes and start, its checkpoint segment,
what could evict it (reclaim by which projects, preemption by which workloads, never for
non-preemptible work) and when its minRuntime protection ends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, department, project, workload
from tests.builders.cli import cp, write_specs
from tests.builders.snapshots import job, write_snapshot

Capsys = pytest.CaptureFixture[str]


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    specs = write_specs(
        tmp_path / "specs",
        [
            cluster(),
            department("science", gpus=8),
            department("arts", gpus=24),
            project("chem", gpus=8, department="science", minRuntime="30m"),
            project("bio", gpus=0, department="science"),
            project("lit", gpus=24, department="arts"),
            workload("train", "chem", gpus=8, replicas=2, walltime="1d"),
            workload("urgent", "chem", gpus=8, priority=80, walltime="1d"),
            workload("notebook", "chem", type="interactive", gpus=1, walltime="1h"),
            workload(
                "long",
                "chem",
                gpus=1,
                walltime="8h",
                checkpoint={"signal": "USR1", "grace": "10m", "total": "24h"},
            ),
            # completed, and of a higher priority than chem/train: it preempts nobody (it
            # was listed as work that could preempt: user trial)
            workload("done", "chem", gpus=1, walltime="1h", priority=90),
        ],
    )
    snapshot = write_snapshot(
        tmp_path / "snap.json",
        [
            job(
                "21",
                "chem/train",
                ("a100-01", 8),
                ("a100-02", 8),
                started="2026-11-22T09:50:00+00:00",
            ),
            job("22", "chem/notebook", ("v100-01", 1)),
            job("23", "chem/long", ("v100-02", 1), started="2026-11-22T08:00:00+00:00"),
            job(
                "24",
                "chem/done",
                ("v100-03", 1),
                state="COMPLETED",
                endedAt="2026-11-22T09:30:00+00:00",
            ),
        ],
        progress=[
            {
                "workload": "chem/long",
                "elapsedSeconds": 28800,
                "segments": 1,
                "lastSeconds": 28800,
                "lastLimitSeconds": 29400,
            }
        ],
    )
    return specs, snapshot


def explain(capsys: Capsys, world: tuple[Path, Path], name: str, *more: str) -> Any:
    specs, snapshot = world
    res = cp(capsys, "explain", name, "--dir", specs, "--observed", snapshot, *more)
    assert res.code == 0, res.err
    return res.json() if "--json" in more else res.out


def test_a_running_workload_names_its_jobs_and_threats(
    world: tuple[Path, Path], capsys: Capsys
) -> None:
    doc = explain(capsys, world, "chem/train", "--json")
    assert doc["state"] == "running"
    running = doc["running"]
    assert running["jobs"] == [
        {
            "cluster": "sim",
            "id": "21",
            "state": "RUNNING",
            "nodes": ["a100-01", "a100-02"],
            "gpus": 16,
            "startedAt": "2026-11-22T09:50:00+00:00",
        }
    ]
    assert running["preemptible"] and running["segment"] is None
    assert running["minRuntimeEnds"] == "2026-11-22T10:20:00+00:00" and running["protected"]
    threats = {(t["kind"], tuple(t["by"])) for t in running["couldEvict"]}
    # chem is over its deserved: bio (beside it in science) may reclaim; science is over
    # its deserved too: lit (in arts, beside science) may reclaim
    assert ("reclaim", ("bio",)) in threats and ("reclaim", ("lit",)) in threats
    # work of chem that outranks it: urgent (80) and the interactive notebook (100)
    assert ("priority", ("chem/notebook", "chem/urgent")) in threats
    assert ("consolidate", ()) in threats


def test_the_human_form_says_the_same(
    world: tuple[Path, Path], capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    text = explain(capsys, world, "chem/train")
    assert "chem/train: running" in text
    assert "job 21 on sim: 16 GPUs on a100-01, a100-02, started 2026-11-22T09:50:00+00:00" in text
    assert "protected by minRuntime until 2026-11-22T10:20:00+00:00 (20m from now)" in text
    assert "What could evict it:" in text and "may take GPUs back: lit" in text
    assert "with priority above 50: chem/notebook, chem/urgent" in text
    assert "running or finished as specified" not in text


def test_protection_ends(world: tuple[Path, Path], capsys: Capsys) -> None:
    doc = explain(capsys, world, "chem/train", "--json", "--now", "2026-11-22T11:00:00Z")
    assert not doc["running"]["protected"]
    text = explain(capsys, world, "chem/train", "--now", "2026-11-22T11:00:00Z")
    assert "minRuntime ended at 2026-11-22T10:20:00+00:00" in text


def test_non_preemptible_is_never_evicted(world: tuple[Path, Path], capsys: Capsys) -> None:
    running = explain(capsys, world, "chem/notebook", "--json")["running"]
    assert not running["preemptible"] and running["minRuntimeEnds"] is None
    assert [t["kind"] for t in running["couldEvict"]] == ["none"]
    assert "never reclaimed or preempted" in running["couldEvict"][0]["message"]


def test_a_checkpointed_workload_shows_its_segment(
    world: tuple[Path, Path], capsys: Capsys
) -> None:
    running = explain(capsys, world, "chem/long", "--json")["running"]
    assert running["segment"] == "segment 2: 8h of 24h done"
    assert running["jobs"][0]["id"] == "23"


def test_finished_and_waiting_workloads(world: tuple[Path, Path], capsys: Capsys) -> None:
    done = explain(capsys, world, "chem/done", "--json")
    assert done["state"] == "completed" and done["running"] is None
    assert "ran to completion" in explain(capsys, world, "chem/done")
    urgent = explain(capsys, world, "chem/urgent", "--json")
    assert urgent["state"] == "pending" and urgent["running"] is None


def test_an_unknown_workload_gets_a_hint(world: tuple[Path, Path], capsys: Capsys) -> None:
    specs, snapshot = world
    res = cp(capsys, "explain", "chem/trian", "--dir", specs, "--observed", snapshot)
    assert res.code == 1 and "did you mean 'chem/train'?" in res.err
    # cp cost takes the same names: it gave no hint, for a typo or a name without project
    for name in ("chem/trian", "train"):
        res = cp(capsys, "cost", name, "--dir", specs, "--observed", snapshot)
        assert res.code == 1 and "did you mean 'chem/train'?" in res.err, (name, res.err)


def test_a_workload_that_left_the_specs_shows_its_history(tmp_path: Path, capsys: Capsys) -> None:
    """ "Who cancelled my job" is asked most after the workload left the specs: explain
    said only "no workload" although the history knew (user trial)."""
    import shutil

    root = Path(__file__).resolve().parents[3]
    specs = tmp_path / "q"
    shutil.copytree(root / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    (specs / "workloads" / "product.yaml").write_text(
        (specs / "workloads" / "product.yaml").read_text().replace("ctr-retrain", "ctr-retrain2")
    )
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0  # the old one is pruned
    gone = cp(capsys, "explain", "ads/ctr-retrain", "--dir", specs)
    assert gone.code == 0, gone.err
    assert "not in the specs" in gone.out and "cancel" in gone.out
    doc = cp(capsys, "explain", "ads/ctr-retrain", "--dir", specs, "--json").json()
    assert doc["inSpecs"] is False
    assert [h["op"] for h in doc["history"]] == ["cancel", "submit"]
    typo = cp(capsys, "explain", "ads/ctr-retrainn", "--dir", specs)
    assert typo.code == 1 and "no workload" in typo.err
    # the hint knows the names the history knows, not only the specs' (ctr-retrain2)
    assert "did you mean 'ads/ctr-retrain'?" in typo.err


def test_the_spec_directory_comes_after_the_name_or_as_dir(
    world: tuple[Path, Path], capsys: Capsys, tmp_path: Path
) -> None:
    """explain, cost and show took the spec directory only as --dir while every other
    command takes DIR (user trial): both forms work, and two different ones are refused."""
    specs, snapshot = world
    by_option = cp(
        capsys, "explain", "chem/train", "--dir", specs, "--observed", snapshot, "--json"
    )
    by_place = cp(capsys, "explain", "chem/train", specs, "--observed", snapshot, "--json")
    assert by_place.code == 0 and by_place.json() == by_option.json()
    both = cp(capsys, "explain", "chem/train", specs, "--dir", specs, "--observed", snapshot)
    assert both.code == 0
    two = cp(capsys, "explain", "chem/train", specs, "--dir", tmp_path, "--observed", snapshot)
    assert two.code == 2 and "two spec directories" in two.err
    cost = cp(capsys, "cost", "chem/train", specs, "--observed", snapshot, "--json")
    assert cost.code == 0 and cost.json() == (
        cp(capsys, "cost", "chem/train", "--dir", specs, "--observed", snapshot, "--json").json()
    )
    plan_file = tmp_path / "plan.json"
    assert cp(capsys, "plan", specs, "--observed", snapshot, "--out", plan_file).code == 0
    shown = cp(capsys, "show", plan_file, specs, "--json")
    assert shown.code == 0 and shown.json()["id"] == json.loads(plan_file.read_text())["id"]


def test_what_could_evict_it_counts_what_runs_and_who_could_take_now(
    tmp_path: Path, capsys: Capsys
) -> None:
    """Two claims a new user found wrong (user trial): an elastic workload at its
    minReplicas "gives back replicas down to its minReplicas" (it has none to give), and
    a project "waiting now" to reclaim whose work waits for its limit and a deserved quota,
    not for room."""
    import shutil

    quickstart = tmp_path / "q"
    root = Path(__file__).resolve().parents[3]
    shutil.copytree(
        root / "examples" / "quickstart", quickstart, ignore=shutil.ignore_patterns(".cp")
    )
    at = ["--now", "2026-12-01T00:10:00+00:00"]
    assert cp(capsys, "apply", quickstart, "--auto-approve", *at).code == 0
    elastic = cp(capsys, "explain", "vision/augment-workers", quickstart, "--json", *at).json()
    [shrink] = [t for t in elastic["running"]["couldEvict"] if t["kind"] == "shrink"]
    assert "runs 2 replicas, not above its minReplicas 2: nothing to give back" in shrink["message"]
    trained = cp(capsys, "explain", "vision/vit-train", quickstart, "--json", *at).json()
    beside = [t for t in trained["running"]["couldEvict"] if "ads" in t["by"]]
    assert beside, "ads may take GPUs back one day"
    pending = {
        p["workload"]: p["reason"]["code"]
        for p in cp(capsys, "plan", quickstart, "--json", *at).json()["pending"]
    }
    assert pending["ads/ctr-train"] == "over-limit"  # its waits are not for room
    assert all("ads" not in t["waiting"] for t in beside), "ads would not reclaim now"
    # the list of those who may reclaim named projects above their fair share as if they
    # could now (user trial): they may only once below it
    [department] = [t for t in beside if "department research" in t["message"]]
    assert (
        "ads now (below its fair share); search only once below its fair share"
        in (department["message"])
    )


def test_a_workload_the_plan_evicts_is_not_called_safe(tmp_path: Path, capsys: Capsys) -> None:
    """`cp explain` said "safe from reclaim while project vision and department research
    stay within their deserved quota" in the same answer that showed the plan reclaiming
    it: the threats were read off the quotas as the plan leaves them, where the victim's
    project is back within deserved (user trial). What the plan does to it comes first."""
    import shutil

    quickstart = tmp_path / "q"
    root = Path(__file__).resolve().parents[3]
    shutil.copytree(
        root / "examples" / "quickstart", quickstart, ignore=shutil.ignore_patterns(".cp")
    )
    assert cp(capsys, "apply", quickstart, "--auto-approve", "--now", "2027-01-01").code == 0
    with (quickstart / "workloads" / "product.yaml").open("a") as f:
        f.write(
            "---\napiVersion: controlplane/v1\nkind: Workload\nmetadata: {name: urgent}\n"
            "spec: {project: search, gpus: 4, gpuTypes: [a100_80], walltime: 6h}\n"
        )
    at = ["--now", "2027-01-01T01:00:00Z"]
    doc = cp(capsys, "explain", "vision/vit-train", quickstart, "--json", *at).json()
    assert [(a["op"], a["reason"]["code"]) for a in doc["actions"]] == [("preempt", "reclaim")]
    threats = doc["running"]["couldEvict"]
    assert not [t for t in threats if t["message"].startswith("safe from")], threats
    assert threats[0]["kind"] == "reclaim" and "this plan" in threats[0]["message"], threats
    text = cp(capsys, "explain", "vision/vit-train", quickstart, *at).out
    assert "safe from reclaim" not in text, text


def test_the_text_says_how_and_when_its_last_job_ended(
    world: tuple[Path, Path], capsys: Capsys, tmp_path: Path
) -> None:
    """ "Why did my job stop?": the text said only "pending / no-capacity", and of a
    completed workload "it ran to completion" with no time; how and when the job ended
    (NODE_FAIL, at 09:40) was in --json only (user trial)."""
    specs, _ = world
    snapshot = write_snapshot(
        tmp_path / "failed.json",
        [
            job("31", "chem/train", ("a100-01", 8), ("a100-02", 8), state="NODE_FAIL",
                endedAt="2026-11-22T09:40:00+00:00"),
            job("24", "chem/done", ("v100-03", 1), state="COMPLETED",
                endedAt="2026-11-22T09:30:00+00:00"),
        ],
    )  # fmt: skip
    text = cp(capsys, "explain", "chem/train", "--dir", specs, "--observed", snapshot).out
    assert "sim: job 31 ended NODE_FAIL at 2026-11-22T09:40:00Z" in text, text
    done = cp(capsys, "explain", "chem/done", "--dir", specs, "--observed", snapshot).out
    assert "ended COMPLETED at 2026-11-22T09:30:00Z" in done, done


def test_the_json_has_one_shape_and_a_workload_leaving_shows_its_job_and_prune(
    tmp_path: Path, capsys: Capsys
) -> None:
    """`inSpecs` appeared only when false, and a workload removed from the specs was
    `{workload, inSpecs, history}` with no state or jobs even while its job still ran and
    the plan was about to cancel it; never applied, it was "no workload" at all (user
    trial). Every document has the same keys; one leaving shows its job and the prune."""
    import shutil

    root = Path(__file__).resolve().parents[3]
    specs = tmp_path / "q"
    shutil.copytree(root / "examples" / "quickstart", specs, ignore=shutil.ignore_patterns(".cp"))
    at = ["--now", "2027-01-01T00:10:00Z"]
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2027-01-01").code == 0
    kept = cp(capsys, "explain", "ads/ctr-train", "--dir", specs, "--json", *at).json()
    assert kept["inSpecs"] is True
    product = specs / "workloads" / "product.yaml"
    product.write_text(product.read_text().replace("ctr-retrain", "ctr-retrain2"))
    doc = cp(capsys, "explain", "ads/ctr-retrain", "--dir", specs, "--json", *at).json()
    assert set(doc) == set(kept), set(doc) ^ set(kept)
    assert doc["inSpecs"] is False and doc["state"] == "running"
    assert [(j["id"], j["state"]) for j in doc["jobs"]] == [("1000", "RUNNING")]
    assert [(a["op"], a["reason"]["code"]) for a in doc["actions"]] == [("cancel", "prune")]
    text = cp(capsys, "explain", "ads/ctr-retrain", "--dir", specs, *at).out
    assert "not in the specs" in text and "cancel planned on sim" in text, text


def test_preemption_names_only_work_that_may_use_its_pool(tmp_path: Path, capsys: Capsys) -> None:
    """vision/vit-train runs on A100s; vision/debug-shell (priority 100) may use V100s only,
    so it can never preempt it, yet explain named it as the work that could (user trial)."""
    import shutil

    quickstart = tmp_path / "q"
    root = Path(__file__).resolve().parents[3]
    shutil.copytree(
        root / "examples" / "quickstart", quickstart, ignore=shutil.ignore_patterns(".cp")
    )
    assert cp(capsys, "apply", quickstart, "--auto-approve", "--now", "2027-01-01").code == 0
    at = ["--now", "2027-01-01T00:10:00Z"]
    doc = cp(capsys, "explain", "vision/vit-train", quickstart, "--json", *at).json()
    assert doc["running"]["jobs"][0]["nodes"][0].startswith("a100")
    [threat] = [t for t in doc["running"]["couldEvict"] if t["kind"] == "priority"]
    assert "vision/debug-shell" not in threat["by"], threat
    assert threat["message"].startswith("no workload of project vision"), threat


def test_spec_text_in_a_reason_is_printed_as_it_is(tmp_path: Path, capsys: Capsys) -> None:
    """A command edited to `[python3, job.py, "v3[/]"]` read "(command:  -> [python3,
    job.py, v3])" in `cp explain`: the reason went through rich markup, which took "[/]"
    and the old list for tags (trialP). `cp plan` printed it right."""
    now = "2026-11-22T10:00:00+00:00"

    def specs(version: str) -> Path:
        return write_specs(
            tmp_path,
            [
                cluster(),
                project("p", gpus=8, minRuntime="2h"),
                workload("w", "p", gpus=1, command=["python3", "job.py", version]),
            ],
        )

    specs("v1")
    assert cp(capsys, "apply", tmp_path, "--auto-approve", "--now", now).code == 0
    specs("v3[/]")
    later = "2026-11-22T10:30:00+00:00"
    text = cp(capsys, "explain", "p/w", "--dir", tmp_path, "--now", later).out
    said = " ".join(text.split())
    assert "waits — spec-changed" in said
    assert "command: [python3, job.py, v1] -> [python3, job.py, v3[/]]" in said, said
