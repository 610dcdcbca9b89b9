"""The container side of checkpointing (adapters/kubernetes/manifests.py), run with /bin/sh.

A pod's command is exactly this argv; no kubelet is needed to see the segment wrapper stop
a command at its checkpoint (exit 0), pass a preemption's signal on, and hand a command's
own exit code through, or the preStop hook signal PID 1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from adapters.kubernetes import manifests
from tests.builders.programs import SAVES

ENV = {"PATH": "/usr/bin:/bin"}


def wrapped(command: list[str], after: int = 1, sig: str = "USR1") -> list[str]:
    return ["/bin/sh", "-c", manifests.SEGMENT_WRAPPER, "cp-segment", sig, str(after), *command]


def test_a_segment_is_stopped_at_its_checkpoint_and_counts_as_done(tmp_path: Path) -> None:
    state = tmp_path / "state"
    started = time.monotonic()
    done = subprocess.run(
        wrapped(["python3", "-c", SAVES, str(state)]), env=ENV, timeout=30, check=False
    )
    assert done.returncode == 0 and 0.9 < time.monotonic() - started < 5
    assert state.read_text() == "start\nsaved\n"


def test_a_command_that_ends_first_keeps_its_exit_code(tmp_path: Path) -> None:
    done = subprocess.run(
        wrapped(["sh", "-c", 'echo "$0 $1"; exit 3', "a b", "$HOME"], after=30),
        env=ENV,
        timeout=30,
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3 and done.stdout == "a b $HOME\n", "argv verbatim, no shell"


def test_a_preemption_signal_reaches_the_command(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = subprocess.Popen(wrapped(["python3", "-c", SAVES, str(state)], after=60), env=ENV)
    deadline = time.monotonic() + 10
    while not state.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGUSR1)  # what the preStop hook sends to PID 1
    assert proc.wait(timeout=10) != 0 or state.read_text().endswith("saved\n")
    assert state.read_text() == "start\nsaved\n"
