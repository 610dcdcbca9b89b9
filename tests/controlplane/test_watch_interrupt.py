"""Ctrl-C (or SIGTERM) to `cp watch`, in a real process: the first one ends the loop after
the step in flight, as it always did; a second one ends it at once, as a second one ends
`cp apply` (soak trial: a watch whose cycle was planning or acting ignored every Ctrl-C
after the first until that step was over, up to the plan's time limit or a slow action).

The process is the command line itself, with one step made slow by a hook that says on
stderr when the step begins: the signals arrive in that step, not sooner."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, write_specs
from tests.builders.watching import Child
from tests.controlplane.test_concurrency import active_jobs

ROOT = Path(__file__).resolve().parents[2]
SLOW = 60.0  # long enough that only a signal ends the step in a test's time

# the command line, with `step` (an action, or planning) announced on stderr and slowed down
HOOK = """
import sys, time
from adapters.simulator import SimulatorAdapter
from controlplane import workflow
step, seconds = sys.argv[1], float(sys.argv[2])
def slowly(real):
    def slow(*args, **kwargs):
        sys.stderr.write(f"[test] {step} begins\\n")
        sys.stderr.flush()
        time.sleep(seconds)
        return real(*args, **kwargs)
    return slow
if step == "acting":
    SimulatorAdapter.execute = slowly(SimulatorAdapter.execute)
else:
    workflow.plan_for = slowly(workflow.plan_for)
from controlplane.cli import main
sys.argv = ["cp", *sys.argv[3:]]
main()
"""


class Loop(Child):
    """`cp watch --auto-approve` in a child process whose ``step`` takes ``seconds``."""

    def __init__(self, specs: Path, step: str, seconds: float) -> None:
        argv = ["watch", str(specs), "--auto-approve", "--interval", "1", "--quiet", "0"]
        super().__init__([sys.executable, "-c", HOOK, step, str(seconds), *argv], cwd=ROOT)


def signalled(
    specs: Path, step: str, seconds: float, signals: int, timeout: float
) -> tuple[int, str]:
    """A loop whose ``step`` takes ``seconds``, given ``signals`` Ctrl-C a second apart once
    that step has begun: its exit code and what it said once it ended by itself."""
    loop = Loop(specs, step, seconds)
    try:
        loop.wait_for(lambda line: f"[test] {step} begins" in line, timeout=60)
        for n in range(signals):
            if n:
                time.sleep(1.0)
            loop.proc.send_signal(signal.SIGINT)
        return loop.ended(timeout=timeout)
    finally:
        loop.kill()


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    pools = [{"name": "a100", "gpuType": "a100_80", "gpusPerNode": 8, "nodes": 2}]
    docs = [cluster(pools=pools), project("p", gpus=16)]
    return write_specs(tmp_path / "specs", [*docs, *(workload(f"w{i}", "p") for i in range(3))])


def test_a_second_signal_ends_a_watch_at_once_while_an_action_runs(
    specs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, said = signalled(specs, "acting", SLOW, 2, timeout=15)
    assert code == 130, said  # as `cp apply` ends on a second signal
    assert "stopping after the action in flight (again to stop at once)" in said, said
    assert "Interrupted while an action ran" in said and "nothing is done twice" in said, said
    assert "Traceback" not in said, said
    # what was cut short is resumable: an apply (or the next watch) finishes it, once each
    assert cp(capsys, "apply", specs, "--auto-approve").code == 0
    assert cp(capsys, "plan", specs, "--detailed-exitcode").code == 0, "nothing lost"
    assert active_jobs(specs) == {f"p/w{i}": 1 for i in range(3)}, "none submitted twice"


def test_a_second_signal_ends_a_watch_at_once_while_it_plans(specs: Path) -> None:
    code, said = signalled(specs, "planning", SLOW, 2, timeout=15)
    assert code == 130, said
    assert "(again to stop at once)" in said, said
    assert "Interrupted: no action was under way" in said, said
    assert "Traceback" not in said, said


def test_one_signal_still_ends_the_watch_after_the_action_in_flight(specs: Path) -> None:
    """The first signal keeps its meaning: the action in flight ends, the loop stops after
    it, the plan is left resumable, exit 0 (a stopped service is no failure)."""
    code, said = signalled(specs, "acting", 2.0, 1, timeout=30)
    assert code == 0, said
    assert "stopped on request: 1 done" in said, said
