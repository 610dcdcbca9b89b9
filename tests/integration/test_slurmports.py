"""Two test suites on one host get different ports for their local Slurm clusters."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.integration import slurmports

ROOT = Path(__file__).resolve().parents[2]
CLAIM = "from tests.integration import slurmports as p; print(p.plain_base(), flush=True)"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CP_TEST_SLURM_")}
    return env | {"PYTHONPATH": str(ROOT)}


def _holder() -> tuple[subprocess.Popen[str], int]:
    """A suite that claimed a slot and is still running: its plain cluster's base."""
    holder = subprocess.Popen(
        [sys.executable, "-c", CLAIM + "; import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    assert holder.stdout is not None
    return holder, int(holder.stdout.readline())


def _claim() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLAIM],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_a_second_suite_takes_another_slot_while_the_first_runs() -> None:
    holder, first = _holder()
    try:
        second = _claim()
        assert second.returncode == 0, second.stderr
        assert int(second.stdout) != first
        assert (int(second.stdout) - slurmports.PLAIN) % slurmports.SLOT_STEP == 0
    finally:
        holder.communicate("")


def test_a_slot_whose_ports_are_taken_is_passed_over() -> None:
    holder, first = _holder()
    with contextlib.ExitStack() as listening:
        for slot in range(slurmports.SLOTS):  # every slot but the holder's: a port in use
            base = slurmports.PLAIN + slurmports.SLOT_STEP * slot
            if base == first:
                continue
            s = listening.enter_context(socket.socket())
            with contextlib.suppress(OSError):  # already in use: taken all the same
                s.bind(("127.0.0.1", base + 3))
                s.listen()
        try:
            refused = _claim()
        finally:
            holder.communicate("")
    assert refused.returncode != 0
    assert "no free port slot" in refused.stderr
    # the holder gone, its slot is free again: the first free one is at most that
    again = _claim()
    assert again.returncode == 0, again.stderr
    assert int(again.stdout) <= first
