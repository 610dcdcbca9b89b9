"""Usage from Slurm's accounting, on a real cluster with slurmdbd: exact run times, a
requeued job's every run, and jobs Slurm forgot before anyone observed them."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.slurm.localcluster import LocalSlurm
from tests.builders.cli import cp, ok, write_specs

pytestmark = pytest.mark.slurm
Capsys = pytest.CaptureFixture[str]


def slurm(cluster: LocalSlurm, *argv: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {
        "SLURM_CONF": str(cluster.slurm_conf),
        "TZ": "UTC",
        "SLURM_TIME_FORMAT": "%s",
    }
    return subprocess.run(
        list(argv), capture_output=True, text=True, env=env, check=False, timeout=60
    )


def wait_for(predicate: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.3)
    return value


def runs_in_sacct(cluster: LocalSlurm, job: str) -> list[tuple[int, int]]:
    """(start, end) of every finished run of ``job``, straight from sacct."""
    out = slurm(cluster, "sacct", "-X", "-D", "-n", "-P", "-j", job, "--format=Start,End").stdout
    return [
        (int(s), int(e))
        for s, e in (line.split("|") for line in out.split())
        if s.isdigit() and e.isdigit()
    ]


def _cluster(accounting_slurm: LocalSlurm, tmp_path: Path) -> dict[str, Any]:
    return {
        "apiVersion": "controlplane/v1",
        "kind": "Cluster",
        "metadata": {"name": "acct"},
        "spec": {
            "adapter": "slurm",
            "slurm": {
                "slurmConf": str(accounting_slurm.slurm_conf),
                "accounting": True,
                "workDir": str(tmp_path / "work"),
                "account": "cp-test",
            },
            "gpuTypes": {"a100_80": {"memoryGiB": 80}, "v100": {"memoryGiB": 32}},
            "nodePools": [
                {"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "partition": "gpu-a100"},
                {"name": "v100", "gpuType": "v100", "gpusPerNode": 4, "partition": "gpu-v100"},
            ],
        },
    }


def work(name: str, gpus: int, seconds: int, command: list[str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "controlplane/v1",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "project": "p",
            "gpus": gpus,
            "gpuTypes": ["a100_80"],
            "walltime": "1h",
            "command": command or ["sleep", str(seconds)],
        },
    }


PROJECT = {
    "apiVersion": "controlplane/v1",
    "kind": "Project",
    "metadata": {"name": "p"},
    "spec": {"quota": {"gpus": 8}},
}


def test_usage_from_sacct_equals_the_jobs_real_run_times(
    accounting_slurm: LocalSlurm, tmp_path: Path, capsys: Capsys
) -> None:
    cluster = _cluster(accounting_slurm, tmp_path)
    specs = write_specs(
        tmp_path / "specs", [cluster, PROJECT, work("short", 2, 3), work("requeued", 1, 600)]
    )
    applied = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()
    jobs = {a["workload"]: a["job"] for a in applied["actions"]}

    # the long one is requeued by an admin once it runs, and cancelled in its second run
    def state(job: str) -> str:
        out = slurm(accounting_slurm, "squeue", "-h", "-j", job, "-o", "%T").stdout
        return out.strip()

    wait_for(lambda: state(jobs["p/requeued"]) == "RUNNING")
    time.sleep(2)
    assert slurm(accounting_slurm, "scontrol", "requeue", jobs["p/requeued"]).returncode == 0
    wait_for(lambda: len(runs_in_sacct(accounting_slurm, jobs["p/requeued"])) >= 1)
    wait_for(lambda: state(jobs["p/requeued"]) == "RUNNING", timeout=90)
    time.sleep(2)
    slurm(accounting_slurm, "scancel", jobs["p/requeued"])
    wait_for(lambda: len(runs_in_sacct(accounting_slurm, jobs["p/requeued"])) == 2)
    wait_for(lambda: runs_in_sacct(accounting_slurm, jobs["p/short"]))
    # slurmctld forgets ended jobs after 2 s: only accounting knows them now
    wait_for(lambda: not state(jobs["p/short"]), timeout=120)

    snap = ok(cp(capsys, "observe", specs)).json()
    got = sum(u["gpuHours"] for u in snap["usage"] if u["project"] == "p")
    expected = (
        sum(
            gpus * (end - start)
            for workload, gpus in (("p/short", 2), ("p/requeued", 1))
            for start, end in runs_in_sacct(accounting_slurm, jobs[workload])
        )
        / 3600
    )
    # the snapshot rounds each usage row to 1e-6 h; one GPU-second off would be 2.8e-4 h
    assert got == pytest.approx(expected, abs=1e-5) and expected > 0
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        runs = db.execute("SELECT job, gpus, gpu_type FROM runs ORDER BY started_at").fetchall()
    assert sorted(runs) == sorted(
        [
            (jobs["p/short"], 2, "a100_80"),
            (jobs["p/requeued"], 1, "a100_80"),
            (jobs["p/requeued"], 1, "a100_80"),
        ]
    )
    # the store kept them: a later observation counts them again, once
    again = ok(cp(capsys, "observe", specs)).json()
    assert sum(u["gpuHours"] for u in again["usage"]) == pytest.approx(expected, abs=1e-5)


def test_jobs_that_ended_unseen_are_not_run_again(
    accounting_slurm: LocalSlurm, tmp_path: Path, capsys: Capsys
) -> None:
    """A job that completed (or failed) and left squeue (MinJobAge) before anyone observed
    it was submitted again, accounting or not: the placeholder's grace ran out and the
    workload looked never run (user trial; with Slurm's default 300 s, any apply more than
    five minutes after a job ended). With accounting its end is known: a completed
    workload does not run again, and a failed one waits out its retry backoff."""
    cluster = _cluster(accounting_slurm, tmp_path)
    specs = write_specs(
        tmp_path / "specs",
        [cluster, PROJECT, work("quick", 1, 10), work("bad", 1, 0, command=["false"])],
    )
    applied = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()
    jobs = {a["workload"]: a["job"] for a in applied["actions"]}
    for job in jobs.values():  # ended, and forgotten by slurmctld: only accounting knows
        wait_for(lambda job=job: runs_in_sacct(accounting_slurm, job), timeout=120)
        wait_for(  # -t all: squeue shows an ended job until slurmctld forgets it
            lambda job=job: (
                not slurm(accounting_slurm, "squeue", "-h", "-t", "all", "-j", job).stdout.strip()
            ),
            timeout=120,
        )
    # observed once the placeholders' grace (2 minutes) is over: the first failure's
    # backoff (1 minute) is over too
    later = (datetime.now(UTC) + timedelta(minutes=2, seconds=30)).isoformat()
    ok(cp(capsys, "observe", specs, "--now", later))
    plan = ok(cp(capsys, "plan", specs, "--json", "--now", later)).json()
    assert [(a["op"], a["workload"]) for a in plan["actions"]] == [("submit", "p/bad")]
    with sqlite3.connect(specs / ".cp" / "controlplane.db") as db:
        streaks = db.execute("SELECT workload, count, job FROM failures").fetchall()
        done = db.execute("SELECT workload, job FROM completions").fetchall()
    assert streaks == [("p/bad", 1, jobs["p/bad"])], streaks
    assert done == [("p/quick", jobs["p/quick"])], done
