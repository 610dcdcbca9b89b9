"""The checkpoint segment wrapper (adapters/slurm/script.py), run directly with bash.

No Slurm is needed: outside a job the wrapper uses the limit it was given, so a few-second
segment shows the signal stopping the command, a command that ignores it being killed,
the signal of a cancel passed on by the script's shell, and the argv arriving verbatim.
tests/integration/slurm/test_checkpoint.py runs segments on the real local Slurm.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from adapters.slurm.script import (
    BatchRequest,
    command_of,
    forwards_signal,
    render_script,
    sbatch_options,
    segment_of,
)
from tests.builders.programs import SAVES


def segment(command: list[str], walltime: int = 3, grace: int = 1) -> BatchRequest:
    return BatchRequest(
        workload="p/seg",
        plan_id="t",
        nodes=(None,),
        gpus_per_node=1,
        walltime=walltime,
        command=tuple(command),
        checkpoint_signal="USR1",
        checkpoint_grace=grace,
        segment=1,
    )


def run_script(req: BatchRequest, tmp_path: Path) -> tuple[int, float]:
    script = tmp_path / "job.sh"
    script.write_text(render_script(req))
    started = time.monotonic()
    done = subprocess.run(
        ["bash", str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin"},
    )
    return done.returncode, time.monotonic() - started


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


def signalled_script(req: BatchRequest, tmp_path: Path, started: Path) -> tuple[int, float]:
    """Run the script and, once ``started`` exists, send its shell the checkpoint signal
    (as ``scancel --batch --signal=USR1`` does); its exit code, and the seconds from the
    signal to its end."""
    script = tmp_path / "job.sh"
    script.write_text(render_script(req))
    shell = subprocess.Popen(["bash", str(script)], env={"PATH": "/usr/bin:/bin"})
    deadline = time.monotonic() + 10
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    signalled = time.monotonic()
    shell.send_signal(signal.SIGUSR1)
    code = shell.wait(timeout=30)
    return code, time.monotonic() - signalled


def test_the_shell_passes_a_cancels_signal_on_to_the_command(tmp_path: Path) -> None:
    """A cancel signals the batch shell: without passing it on, the shell died of it and
    the command was killed without saving."""
    state = tmp_path / "state"
    req = segment(["python3", "-c", SAVES, str(state)], walltime=60, grace=5)
    code, took = signalled_script(req, tmp_path, state)
    assert code == 0 and took < 3  # long before its checkpoint time (55 s)
    assert state.read_text() == "start\nsaved\n"


def test_a_cancelled_command_that_ignores_the_signal_is_killed_after_the_grace(
    tmp_path: Path,
) -> None:
    started = tmp_path / "started"
    ignores = ["bash", "-c", "trap '' USR1; touch \"$0\"; sleep 60", str(started)]
    code, took = signalled_script(segment(ignores, walltime=60, grace=2), tmp_path, started)
    assert code == 137 and 1.5 < took < 4


def test_only_scripts_that_pass_the_signal_on_say_so() -> None:
    script = render_script(segment(["true"]))
    assert forwards_signal(script)
    # a segment script written before the shell passed the signal on
    assert not forwards_signal(script.replace("trap forward USR1\n", ""))
    plain = BatchRequest(workload="p/x", plan_id="t", nodes=(None,), gpus_per_node=1)
    assert not forwards_signal(render_script(plain))


def test_the_argv_reaches_the_command_verbatim(tmp_path: Path) -> None:
    hostile = ["a b", "it's", '"$(touch pwned)"', "x\ny", "*", "", "--tag=a;b|c&"]
    out = tmp_path / "argv.json"
    code = [
        "python3",
        "-c",
        "import json,sys; open(sys.argv[1],'w').write(json.dumps(sys.argv[2:]))",
        str(out),
        *hostile,
    ]
    req = segment(code, walltime=20, grace=5)
    assert run_script(req, tmp_path)[0] == 0
    assert json.loads(out.read_text()) == hostile
    assert not (tmp_path / "pwned").exists()
    assert command_of(render_script(req)) == tuple(code)


def test_segment_options() -> None:
    req = segment(["true"], walltime=3600, grace=300)
    opts = sbatch_options(req, work_dir="/w")
    assert "--time=0-01:00:00" in opts
    assert not any(o.startswith("--signal") for o in opts)  # the script signals itself
    assert "ckpt=USR1@300" in next(o for o in opts if o.startswith("--comment="))
    # a move re-creates a segment from Slurm's copy of its script
    assert segment_of(render_script(req)) == 1
    plain = BatchRequest(workload="p/x", plan_id="t", nodes=(None,), gpus_per_node=1)
    assert segment_of(render_script(plain)) is None


# Writes its pid and process group, then exits 0 on SIGUSR1.
_SHOWS_ITSELF = """import os, signal, sys, time
open(sys.argv[1] + ".tmp", "w").write(f"{os.getpid()} {os.getpgrp()}")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
signal.signal(signal.SIGUSR1, lambda *_: sys.exit(0))
time.sleep(60)
"""
_KILL = re.compile(r"^(\d+)\s+kill\((-?\d+), SIGUSR1\)", re.M)


def signals_sent_to_the_command(req: BatchRequest, tmp_path: Path, *, cancel: bool) -> int:
    """Run the script under strace and count the checkpoint signals sent to the command's
    process: to its pid, or to its process group (``kill(0)`` from the group's leader,
    ``kill(-pgid)``). Counted as sent, not as received: the kernel merges a signal that
    arrives while the same one is pending, so how many the command sees is a race."""
    ids, trace, script = tmp_path / "ids", tmp_path / "trace", tmp_path / "job.sh"
    script.write_text(render_script(req))
    traced = ["strace", "-f", "-qq", "-e", "trace=kill", "-e", "signal=none", "-o", str(trace)]
    tracer = subprocess.Popen([*traced, "bash", str(script)], env={"PATH": "/usr/bin:/bin"})
    deadline = time.monotonic() + 10
    while not ids.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if cancel:  # as scancel --batch --signal=USR1 does: the batch shell, strace's child
        [shell] = Path(f"/proc/{tracer.pid}/task/{tracer.pid}/children").read_text().split()
        os.kill(int(shell), signal.SIGUSR1)
    assert tracer.wait(timeout=30) == 0
    pid, pgid = (int(n) for n in ids.read_text().split())
    return sum(
        1
        for sender, target in ((int(s), int(t)) for s, t in _KILL.findall(trace.read_text()))
        if target in (pid, -pgid) or (target == 0 and sender == pgid)
    )


@pytest.mark.parametrize("cancel", [False, True], ids=["at-its-checkpoint", "cancelled"])
def test_the_command_is_sent_its_checkpoint_signal_once(tmp_path: Path, cancel: bool) -> None:
    """``timeout`` sends its signal to the command and then to its own process group, which
    the command is in: the command was sent it twice. A handler that saved and exited saved
    twice when the second came in while it ran (seen on the real Slurm in CI), and srun
    passed both on to a gang's tasks. ``timeout --foreground`` signals the command alone."""
    command = ["python3", "-c", _SHOWS_ITSELF, str(tmp_path / "ids")]
    req = segment(command, walltime=60 if cancel else 3, grace=1)
    assert signals_sent_to_the_command(req, tmp_path, cancel=cancel) == 1


def test_a_command_in_a_session_of_its_own_still_saves_at_its_checkpoint(tmp_path: Path) -> None:
    """A command that leaves timeout's process group (``setsid``, a launcher that makes its
    own) is reached only by timeout's direct signal: it must still get it (review: a shell
    between timeout and the command took it, and the command was killed unsaved)."""
    state = tmp_path / "state"
    req = segment(["setsid", "python3", "-c", SAVES, str(state)])
    code, took = run_script(req, tmp_path)
    assert code == 0 and 1.5 < took < 3
    assert state.read_text() == "start\nsaved\n"
