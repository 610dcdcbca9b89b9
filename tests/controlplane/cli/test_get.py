"""``cp get``: kubectl-like listings, every workload state (running, ending, submitted, pending,
blocked, failed, completed) read off a snapshot, filters, and the output formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

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
            department("science", gpus=16),
            project("chem", gpus=8, department="science"),
            project("bio", gpus=4, limit=4, department="science"),
            workload("runner", "chem", gpus=4),
            workload("queued", "chem", gpus=4),
            workload("done", "chem", gpus=1),
            workload("broken", "chem", gpus=1),
            workload("too-big", "bio", gpus=4, replicas=2),
            workload("small", "bio", gpus=1),
        ],
    )
    snapshot = write_snapshot(
        tmp_path / "snap.json",
        [
            job("11", "chem/runner", ("a100-01", 4)),
            job("12", "chem/queued", state="PENDING", started=None, reason="Resources"),
            job(
                "13",
                "chem/done",
                ("a100-01", 1),
                state="COMPLETED",
                endedAt="2026-11-22T09:30:00+00:00",
            ),
            job("14", None, ("a100-02", 8)),  # someone else's
        ],
        down=("v100-08",),
        failures=[
            {
                "workload": "chem/broken",
                "count": 1,
                "job": "10",
                "endedAt": "2026-11-22T09:59:30+00:00",
                "exitCode": "1:0",
            }
        ],
        queue=[{"workload": "bio/small", "since": "2026-11-22T09:50:00+00:00"}],
    )
    return specs, snapshot


def get(capsys: Capsys, world: tuple[Path, Path], *args: str, code: int = 0) -> Any:
    specs, snapshot = world
    res = cp(capsys, "get", *args[:1], specs, "--observed", snapshot, *args[1:])
    assert res.code == code, (res.out, res.err)
    return res


def items(capsys: Capsys, world: tuple[Path, Path], *args: str) -> list[dict[str, Any]]:
    doc = get(capsys, world, *args, "-o", "json").json()
    return doc["items"]  # type: ignore[no-any-return]


def test_every_workload_state(world: tuple[Path, Path], capsys: Capsys) -> None:
    rows = {w["name"]: w for w in items(capsys, world, "workloads")}
    assert {k: w["state"] for k, w in rows.items()} == {
        "bio/small": "pending",
        "bio/too-big": "blocked",
        "chem/broken": "failed",
        "chem/done": "completed",
        "chem/queued": "submitted",
        "chem/runner": "running",
    }
    runner = rows["chem/runner"]
    assert (runner["job"], runner["nodes"], runner["gpus"], runner["cluster"]) == (
        "11",
        ["a100-01"],
        4,
        "sim",
    )
    assert runner["since"] == "2026-11-22T09:00:00+00:00"
    assert rows["bio/too-big"]["reason"]["code"] == "over-limit"
    assert rows["chem/broken"]["reason"]["code"] == "failed"
    small = rows["bio/small"]
    assert small["next"]["op"] == "submit" and small["since"] == "2026-11-22T09:50:00+00:00"
    assert rows["chem/queued"]["reason"]["code"] == "submitted"
    # a completed workload: the job that completed and when (its `since` was the store's
    # queue entry, or the observation that saw it, and its job null: user trial)
    done = rows["chem/done"]
    assert (done["job"], done["cluster"], done["since"]) == (
        "13",
        "sim",
        "2026-11-22T09:30:00+00:00",
    )


def test_filters(world: tuple[Path, Path], capsys: Capsys) -> None:
    assert [w["name"] for w in items(capsys, world, "workloads", "--project", "bio")] == [
        "bio/small",
        "bio/too-big",
    ]
    assert [w["name"] for w in items(capsys, world, "wl", "--state", "running")] == ["chem/runner"]
    assert [j["id"] for j in items(capsys, world, "jobs", "--state", "pending")] == ["12"]
    assert [j["id"] for j in items(capsys, world, "jobs", "--project", "chem")] == [
        "11",
        "12",
        "13",
    ]
    assert [n["name"] for n in items(capsys, world, "nodes", "--state", "down")] == ["v100-08"]
    # states are matched whatever their case, as for jobs (PENDING, pending)
    assert [n["name"] for n in items(capsys, world, "nodes", "--state", "DOWN")] == ["v100-08"]
    assert [w["name"] for w in items(capsys, world, "wl", "--state", "Running")] == ["chem/runner"]
    assert [n["name"] for n in items(capsys, world, "nodes", "--project", "chem")] == ["a100-01"]
    assert [d["name"] for d in items(capsys, world, "departments", "--project", "bio")] == [
        "science"
    ]
    assert [p["name"] for p in items(capsys, world, "project", "--project", "bio")] == ["bio"]


def test_jobs_nodes_and_queues(world: tuple[Path, Path], capsys: Capsys) -> None:
    jobs = {j["id"]: j for j in items(capsys, world, "jobs")}
    assert jobs["14"]["workload"] is None and jobs["14"]["gpus"] == 8
    # when an ended job ended (user trial: only its start was there)
    assert jobs["13"]["endedAt"] == "2026-11-22T09:30:00+00:00" and jobs["11"]["endedAt"] is None
    nodes = {n["name"]: n for n in items(capsys, world, "nodes")}
    assert (nodes["a100-01"]["used"], nodes["a100-01"]["jobs"]) == (4, ["11"])
    assert (nodes["a100-02"]["used"], nodes["a100-02"]["jobs"]) == (8, ["14"])
    assert nodes["v100-08"]["state"] == "down" and len(nodes) == 12
    specs, snapshot = world
    status = cp(capsys, "status", specs, "--observed", snapshot, "--json").json()
    for p in items(capsys, world, "projects"):
        assert p["status"] == status["projects"][p["name"]]
        assert p["workloads"] == {"chem": 4, "bio": 2}[p["name"]]
    [science] = items(capsys, world, "departments")
    assert science["status"] == status["departments"]["science"] and science["workloads"] == 6


def test_yaml_is_the_json_document(world: tuple[Path, Path], capsys: Capsys) -> None:
    as_json = get(capsys, world, "workloads", "-o", "json").json()
    as_yaml = yaml.safe_load(get(capsys, world, "workloads", "-o", "yaml").out)
    assert as_yaml == as_json and as_json["kind"] == "workloads"


def test_tables(world: tuple[Path, Path], capsys: Capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    plain = get(capsys, world, "workloads").out
    wide = get(capsys, world, "workloads", "-o", "wide").out
    header, wide_header = plain.splitlines()[0].split(), wide.splitlines()[0].split()
    assert header == ["name", "state", "gpus", "where", "age", "next", "reason"]
    assert wide_header[: len(header)] == header and "nodes" in wide_header
    line = next(x for x in plain.splitlines() if x.startswith("chem/runner"))
    assert line.split()[:5] == ["chem/runner", "running", "4", "sim/a100", "1h"]
    assert "(not ours)" in get(capsys, world, "jobs").out


def test_wide_output_to_a_file_keeps_every_column(
    world: tuple[Path, Path], capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-o wide` in a CI log (not a terminal, 80 columns) dropped every wide column and
    printed the same table as without it (user trial). Where nobody reads at a terminal's
    width, wide means every column."""
    monkeypatch.delenv("COLUMNS", raising=False)
    wide = get(capsys, world, "workloads", "-o", "wide").out
    header = wide.splitlines()[0].split()
    assert header == [
        "name", "state", "gpus", "where", "age", "next", "reason",
        "type", "priority", "job", "nodes", "message",
    ]  # fmt: skip
    assert "left out at" not in wide


def test_mistakes_are_usage_errors(world: tuple[Path, Path], capsys: Capsys) -> None:
    assert "did you mean 'jobs'?" in get(capsys, world, "jbos", code=2).err
    assert "did you mean 'running'?" in get(capsys, world, "wl", "--state", "runing", code=2).err
    assert "applies to workloads" in get(capsys, world, "projects", "--state", "x", code=2).err
    assert "no project 'chemm'" in get(capsys, world, "wl", "--project", "chemm", code=2).err
    assert "use wide, json, yaml" in get(capsys, world, "wl", "-o", "xml", code=2).err
    # --json is -o json: beside another format it printed JSON and dropped that one
    assert get(capsys, world, "wl", "-o", "yaml", "--json", code=2).json()["ok"] is False
    assert "not both" in get(capsys, world, "wl", "-o", "wide", "--json", code=2).out
    assert get(capsys, world, "wl", "-o", "json", "--json").json()["kind"] == "workloads"


def test_a_workload_whose_job_winds_down_is_ending(tmp_path: Path, capsys: Capsys) -> None:
    """A gang with a failed replica read `running` in `get workloads` and `explain` while
    `get jobs` showed its job COMPLETING (user trial on Kubernetes). Its job holds GPUs
    until it ends, but it no longer runs: the state says so."""
    specs = write_specs(
        tmp_path / "specs",
        [cluster(), project("chem", gpus=8), workload("gang", "chem", gpus=2, replicas=2)],
    )
    snapshot = write_snapshot(
        tmp_path / "snap.json",
        [job("21", "chem/gang", ("a100-01", 2), ("a100-02", 2), state="COMPLETING")],
    )
    world = (specs, snapshot)
    [row] = items(capsys, world, "workloads")
    assert (row["state"], row["job"], row["gpus"]) == ("ending", "21", 4)
    assert [w["name"] for w in items(capsys, world, "wl", "--state", "ending")] == ["chem/gang"]
    res = cp(capsys, "explain", "chem/gang", "--dir", specs, "--observed", snapshot)
    assert res.code == 0, res.err
    assert "chem/gang: ending" in res.out
    assert "waits — ending: job 21 winds down" in res.out and "running as it is" not in res.out


@pytest.mark.parametrize(
    ("started", "age"),
    [
        ("2026-10-27T22:36:43+00:00", "25d11h"),  # 25d11h23m17s
        ("2026-11-22T06:54:30+00:00", "3h5m"),
        ("2026-11-22T09:54:43+00:00", "5m17s"),
        ("2026-11-22T09:59:18+00:00", "42s"),
    ],
)
def test_an_age_is_shown_to_its_two_largest_units(
    tmp_path: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch, started: str, age: str
) -> None:
    """A job of 25 days showed as 25d11h23m17s, to the second (user trial); kubectl's
    ages keep the two largest units."""
    monkeypatch.setenv("COLUMNS", "120")
    specs = write_specs(tmp_path / "specs", [cluster(), project("p", gpus=8), workload("w", "p")])
    snapshot = write_snapshot(
        tmp_path / "snap.json", [job("7", "p/w", ("a100-01", 1), started=started)]
    )
    shown = cp(capsys, "get", "jobs", specs, "--observed", snapshot).out
    line = next(x for x in shown.splitlines() if x.startswith("7 "))
    assert age in line.split(), line


def test_a_completed_elastic_workload_shows_what_its_job_ran_with(
    tmp_path: Path, capsys: Capsys
) -> None:
    """It showed its minimum (2 x 2 GPUs) though its job completed on 3 replicas (trial T);
    a workload that waits still shows what it asks for at least."""
    specs = write_specs(
        tmp_path / "specs",
        [
            cluster(),
            project("chem", gpus=8),
            workload("grown", "chem", gpus=2, replicas=4, minReplicas=2),
            workload("waits", "chem", gpus=2, replicas=4, minReplicas=2),
        ],
    )
    snapshot = write_snapshot(
        tmp_path / "snap.json",
        [
            job(
                "13",
                "chem/grown",
                ("a100-01", 2),
                ("a100-01", 2),
                ("a100-02", 2),
                state="COMPLETED",
                endedAt="2026-11-22T09:30:00+00:00",
            )
        ],
    )
    res = cp(capsys, "get", "workloads", specs, "--observed", snapshot, "-o", "json")
    rows = {w["name"]: w for w in res.json()["items"]}
    assert (rows["chem/grown"]["state"], rows["chem/grown"]["gpus"]) == ("completed", 6)
    # one that waits shows what the plan starts it with (4 x 2 GPUs here), else its minimum
    assert (rows["chem/waits"]["state"], rows["chem/waits"]["gpus"]) == ("pending", 8)
    assert rows["chem/waits"]["next"]["op"] == "submit"


def test_a_completed_job_the_cluster_forgot_shows_what_it_ran_with(
    tmp_path: Path, capsys: Capsys
) -> None:
    """A job the cluster forgot a day after it ended (as Slurm does after MinJobAge) is
    listed as the store remembers it: it read 0 GPUs, no age and no start (trial V). The
    store's runs hold its GPUs and when it ran."""
    specs = write_specs(
        tmp_path / "specs",
        [cluster(), project("chem", gpus=8), workload("done", "chem", gpus=2, walltime="1h")],
    )
    start = "2026-11-22T10:00:00+00:00"
    running = cp(capsys, "apply", specs, "--auto-approve", "--now", start, "--json")
    assert running.code == 0
    assert cp(capsys, "observe", specs, "--now", "2026-11-22T12:00:00+00:00").code == 0
    later = "2026-11-25T10:00:00+00:00"  # two days after its end: the simulator forgot it
    res = cp(capsys, "get", "jobs", specs, "--now", later, "-o", "json")
    [row] = res.json()["items"]
    assert (row["state"], row["reason"]) == ("COMPLETED", "completed; remembered by the store")
    assert row["gpus"] == 2
    assert row["plan"] and running.json()["plan"].startswith(row["plan"])  # trial X
    assert row["startedAt"].startswith("2026-11-22T10:00:00")
    table = cp(capsys, "get", "jobs", specs, "--now", later).out
    assert "3d" in table  # its age, from its start


def test_jobs_are_listed_in_job_id_order(tmp_path: Path, capsys: Capsys) -> None:
    """Jobs the store remembers came after those the cluster shows (1349…1792, then
    1000…1348: trial W); a cluster's jobs are listed by id, numbers in numeric order."""
    specs = write_specs(
        tmp_path / "specs",
        [cluster(), project("chem", gpus=8), workload("a", "chem", gpus=1)],
    )
    ended = {"state": "COMPLETED", "endedAt": "2026-11-22T09:30:00+00:00"}
    snapshot = write_snapshot(
        tmp_path / "snap.json",
        [
            job("1349", None, ("a100-01", 1)),
            job("20", None, ("a100-01", 1), **ended),
            job("x-1", None, ("a100-02", 1)),
            job("1000", "chem/a", ("a100-02", 1), **ended),
            job("3", None, ("a100-03", 1)),
        ],
    )
    res = cp(capsys, "get", "jobs", specs, "--observed", snapshot, "-o", "json")
    assert [j["id"] for j in res.json()["items"]] == ["3", "20", "1000", "1349", "x-1"]


def test_a_completed_workload_whose_job_was_forgotten_shows_what_it_ran_with(
    tmp_path: Path, capsys: Capsys
) -> None:
    """An elastic workload that grew to 4 replicas and completed showed its minimum, 1 GPU,
    once the cluster forgot its job; the store's runs say what it ran with."""
    specs = write_specs(
        tmp_path / "specs",
        [
            cluster(),
            project("chem", gpus=8),
            workload("grown", "chem", gpus=1, replicas=4, minReplicas=1, walltime="1h"),
        ],
    )
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-11-22T10:00:00Z").code == 0
    assert cp(capsys, "observe", specs, "--now", "2026-11-22T12:00:00Z").code == 0
    res = cp(capsys, "get", "workloads", specs, "--now", "2026-11-25T10:00:00Z", "-o", "json")
    [row] = res.json()["items"]
    assert (row["state"], row["gpus"]) == ("completed", 4)


def test_a_forgotten_job_shows_its_own_run_when_its_id_was_given_again(
    tmp_path: Path, capsys: Capsys
) -> None:
    """A simulated cluster started afresh numbers its jobs from 1000 again: the store
    remembers the completed job 1000, and the live job 1000 is another workload's. The
    remembered one is listed as "1000 (earlier)" with what its own run held, not nothing
    (review), and the live one keeps its own GPUs."""
    docs = [cluster(), project("chem", gpus=8), workload("done", "chem", gpus=2, walltime="1h")]
    specs = write_specs(tmp_path / "specs", docs)
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", "2026-11-22T10:00:00Z").code == 0
    assert cp(capsys, "observe", specs, "--now", "2026-11-22T12:00:00Z").code == 0
    (specs / ".cp" / "simulator" / "sim.json").unlink()  # started afresh: ids from 1000 again
    write_specs(specs, [*docs, workload("later", "chem", gpus=3)])
    later = "2026-11-25T10:00:00Z"
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", later).code == 0
    rows = {
        j["id"]: j
        for j in cp(capsys, "get", "jobs", specs, "--now", later, "-o", "json").json()["items"]
    }
    assert (rows["1000"]["workload"], rows["1000"]["gpus"]) == ("chem/later", 3)
    assert list(rows)[:2] == ["1000 (earlier)", "1000"]  # side by side (trial X)
    earlier = rows["1000 (earlier)"]
    assert (earlier["workload"], earlier["gpus"]) == ("chem/done", 2)
    assert earlier["startedAt"].startswith("2026-11-22T10:00:00")


def test_a_workload_the_plan_starts_shows_what_the_plan_gives_it(
    tmp_path: Path, capsys: Capsys
) -> None:
    """A pending elastic workload showed its minimum (2 GPUs) beside its next action, a
    submit of 4 x 1 GPU (trial X): what the plan starts it with is what it will hold."""
    specs = write_specs(
        tmp_path / "specs",
        [
            cluster(),
            project("chem", gpus=8),
            workload("grows", "chem", gpus=1, replicas=4, minReplicas=2),
        ],
    )
    [row] = cp(capsys, "get", "workloads", specs, "-o", "json").json()["items"]
    assert (row["state"], row["next"]["op"]) == ("pending", "submit")
    assert row["gpus"] == 4
