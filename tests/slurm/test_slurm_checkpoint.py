"""Checkpoint segments and retry backoff, from the job script up to a real Slurm.

The segment wrapper (adapters/slurm/script.py) is first run directly with bash and a
few-second timeout (no Slurm needed: outside a job it uses the limit it was given); then
a workload on the real cluster runs in two segments, each stopped by its checkpoint
signal, and completes; and a failing workload waits out its backoff.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.slurm.script import (
    JobRequest,
    command_of,
    render_script,
    sbatch_options,
    segment_of,
)
from tests.cli_helpers import Result, cp, write_specs

Helper = Callable[..., Any]
Capsys = pytest.CaptureFixture[str]

# saves on the checkpoint signal, as a real training loop would
SAVES = """import signal, sys, time
path = sys.argv[1]
open(path, "a").write("start\\n")
def save(*_):
    open(path, "a").write("saved\\n")
    sys.exit(0)
signal.signal(signal.SIGUSR1, save)
time.sleep(300)
"""


def segment(command: list[str], walltime: int = 3, grace: int = 1) -> JobRequest:
    return JobRequest(workload="p/seg", plan_id="t", nodes=(None,), gpus_per_node=1,
                      walltime=walltime, command=tuple(command), checkpoint_signal="USR1",
                      checkpoint_grace=grace, segment=1)


def run_script(req: JobRequest, tmp_path: Path) -> tuple[int, float]:
    script = tmp_path / "job.sh"
    script.write_text(render_script(req))
    started = time.monotonic()
    done = subprocess.run(["bash", str(script)], check=False, capture_output=True, text=True,
                          timeout=30, env={"PATH": "/usr/bin:/bin"})
    return done.returncode, time.monotonic() - started


# ------------------------------------------------------------------ the wrapper, no Slurm


def test_a_segment_stopped_by_its_signal_exits_zero(tmp_path: Path) -> None:
    state = tmp_path / "state"
    code, took = run_script(segment(["python3", "-c", SAVES, str(state)]), tmp_path)
    assert code == 0 and 1.5 < took < 3  # signalled at walltime - grace = 2 s
    assert state.read_text() == "start\nsaved\n"


def test_a_command_that_ignores_the_signal_is_killed_and_fails(tmp_path: Path) -> None:
    code, took = run_script(segment(["bash", "-c", "trap '' USR1; sleep 30"]), tmp_path)
    assert code == 137 and 2.5 < took < 5  # killed after the grace


def test_a_command_that_ends_by_itself_keeps_its_exit_code(tmp_path: Path) -> None:
    assert run_script(segment(["true"]), tmp_path)[0] == 0
    assert run_script(segment(["bash", "-c", "exit 3"]), tmp_path)[0] == 3


def test_the_argv_reaches_the_command_verbatim(tmp_path: Path) -> None:
    hostile = ["a b", "it's", '"$(touch pwned)"', "x\ny", "*", "", "--tag=a;b|c&"]
    out = tmp_path / "argv.json"
    code = ["python3", "-c", "import json,sys; open(sys.argv[1],'w').write(json.dumps(sys.argv[2:]))",
            str(out), *hostile]
    req = segment(code, walltime=20, grace=5)
    assert run_script(req, tmp_path)[0] == 0
    assert json.loads(out.read_text()) == hostile
    assert not (tmp_path / "pwned").exists()
    assert command_of(render_script(req)) == tuple(code)


def test_segment_options() -> None:
    req = segment(["true"], walltime=3600, grace=300)
    opts = sbatch_options(req, output="o")
    assert "--time=0-01:00:00" in opts
    assert not any(o.startswith("--signal") for o in opts)  # the script signals itself
    assert "ckpt=USR1@300" in next(o for o in opts if o.startswith("--comment="))
    # a move re-creates a segment from Slurm's copy of its script
    assert segment_of(render_script(req)) == 1
    plain = JobRequest(workload="p/x", plan_id="t", nodes=(None,), gpus_per_node=1)
    assert segment_of(render_script(plain)) is None


# ------------------------------------------------------------------ on a real Slurm


def ok(result: Result) -> Result:
    assert result.code == 0, result.out + result.err
    return result


def doc(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "controlplane/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def show_job(slurm: Helper, job_id: str) -> dict[str, str]:
    out = slurm("scontrol", "-o", "show", "job", job_id).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def ours(squeue: Helper, workload: str) -> list[Any]:
    return [j for j in squeue() if j.workload == workload]


@pytest.mark.slurm
def test_a_workload_runs_in_two_segments_and_completes(
    clean_slurm: Any, cluster_doc: dict[str, Any], tmp_path: Path, capsys: Capsys,
    slurm: Helper, squeue: Helper, wait_for: Helper,
) -> None:
    """16 s of work in segments of at most 15 s, checkpoint signal 5 s before each end: a
    10 s segment, then one for what is left."""
    state = tmp_path / "state"
    work = doc("Workload", "long", project="p", gpus=1, gpuTypes=["v100"], walltime="15s",
               checkpoint={"signal": "USR1", "grace": "5s", "total": "16s"},
               command=["python3", "-c", SAVES, str(state)])
    specs = write_specs(tmp_path / "specs", [cluster_doc, doc("Project", "p", quota={"gpus": 4}),
                                             work])
    first = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()
    [one] = [a["job"] for a in first["actions"]]
    wait_for(lambda: show_job(slurm, one).get("JobState") == "COMPLETED", timeout=40)
    assert show_job(slurm, one)["ExitCode"] == "0:0"

    resume = ok(cp(capsys, "plan", specs, "--json")).json()
    [submit] = resume["actions"]
    assert submit["reason"]["code"] == "checkpoint-resume"
    assert submit["reason"]["message"].startswith("segment 2: 1")  # 10s or 11s of 16s done
    assert "of 16s done" in submit["reason"]["message"]
    assert submit["submit"]["segment"] == 2 and submit["submit"]["walltime"] <= 11
    second = ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()
    [two] = [a["job"] for a in second["actions"]]
    assert two != one
    wait_for(lambda: show_job(slurm, two).get("JobState") == "COMPLETED", timeout=40)

    done = ok(cp(capsys, "plan", specs, "--json", "--detailed-exitcode")).json()
    assert done["actions"] == [] and done["pending"] == []  # 16 s reached: complete
    assert state.read_text() == "start\nsaved\nstart\nsaved\n"
    assert sorted(j.id for j in ours(squeue, "p/long")) == sorted([one, two])


@pytest.mark.slurm
def test_a_failed_job_waits_out_its_backoff(
    clean_slurm: Any, cluster_doc: dict[str, Any], tmp_path: Path, capsys: Capsys,
    slurm: Helper, wait_for: Helper,
) -> None:
    failing = doc("Workload", "bad", project="p", gpus=1, gpuTypes=["v100"], walltime="5m",
                  command=["bash", "-c", "exit 3"])
    specs = write_specs(tmp_path / "specs", [cluster_doc, doc("Project", "p", quota={"gpus": 4}),
                                             failing])
    [job] = [a["job"] for a in ok(cp(capsys, "apply", specs, "--auto-approve", "--json")).json()["actions"]]
    wait_for(lambda: show_job(slurm, job).get("JobState") == "FAILED")
    waits = ok(cp(capsys, "plan", specs, "--json")).json()
    assert waits["actions"] == []
    [pending] = waits["pending"]
    assert pending["reason"]["code"] == "failed"
    assert f"job {job} failed (exit 3:0)" in pending["reason"]["message"]
    assert "the 1st failure in a row" in pending["reason"]["message"]
    later = (datetime.now(UTC) + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%S%z")
    retry = ok(cp(capsys, "plan", specs, "--json", "--now", later)).json()
    assert [(a["op"], a["workload"]) for a in retry["actions"]] == [("submit", "p/bad")]
