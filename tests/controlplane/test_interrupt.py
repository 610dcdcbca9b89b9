"""Ctrl-C or SIGTERM (a CI job cancelled) during a command: an apply stops after the
action in flight and says where it stopped, and with --json every command still prints
one document (user trial: exit 130 with nothing on stdout, 155 jobs submitted)."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from adapters.simulator import SimulatorAdapter
from controlplane import workflow
from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[2]
Capsys = pytest.CaptureFixture[str]


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    dst = tmp_path / "q"
    shutil.copytree(ROOT / "examples" / "quickstart", dst, ignore=shutil.ignore_patterns(".cp"))
    return dst


def signal_during(monkeypatch: pytest.MonkeyPatch, sig: int, action: int) -> None:
    """The signal arrives while the simulator carries out the ``action``-th action."""
    execute = SimulatorAdapter.execute
    calls: list[int] = []

    def signalled(self: SimulatorAdapter, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == action:
            os.kill(os.getpid(), sig)
        return execute(self, *args, **kwargs)

    monkeypatch.setattr(SimulatorAdapter, "execute", signalled)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_apply_stops_after_the_action_in_flight(
    quickstart: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch, sig: int
) -> None:
    signal_during(monkeypatch, sig, action=2)
    res = cp(capsys, "apply", quickstart, "--auto-approve", "--json")
    assert res.code == 130
    doc = res.json()
    assert doc["stopped"] is True and doc["ok"] is False
    assert [a["status"] for a in doc["actions"]] == ["done", "done"]
    assert "stopping after the action in flight" in res.err
    store = workflow.open_store(quickstart, None)
    assert store.plan_status(doc["plan"]) == "interrupted"
    monkeypatch.undo()
    text = cp(capsys, "apply", quickstart, "--auto-approve")
    assert text.code == 0 and "Apply complete" in text.out
    assert cp(capsys, "plan", quickstart, "--detailed-exitcode").code == 0, "nothing lost"


def test_the_text_of_a_stopped_apply_says_how_to_go_on(
    quickstart: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    signal_during(monkeypatch, signal.SIGINT, action=1)
    res = cp(capsys, "apply", quickstart, "--auto-approve")
    assert res.code == 130
    assert "Apply stopped on request: 1 done" in res.out and "cp apply" in res.out


def test_a_command_interrupted_before_it_acts_prints_a_document(
    quickstart: Path, capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_args: Any, **_kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while it plans
        raise AssertionError("the signal ends the command")

    monkeypatch.setattr(workflow, "build_plan", interrupted)
    res = cp(capsys, "plan", quickstart, "--json")
    assert res.code == 130
    assert res.json() == {
        "ok": False,
        "error": {"kind": "interrupted", "message": "interrupted: nothing was applied"},
    }
    assert "Interrupted" in cp(capsys, "plan", quickstart).err


def test_ctrl_c_while_the_program_starts_is_no_traceback(
    capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the first second, while modules load, printed a KeyboardInterrupt
    traceback and no JSON (re-check by a helper)."""
    import json
    import sys

    import controlplane.cli as cli

    def starting(*_args: Any) -> int:
        raise KeyboardInterrupt  # as an import half-way through would

    monkeypatch.setattr(cli, "run", starting)
    monkeypatch.setattr(sys, "argv", ["cp", "plan", ".", "--json"])
    monkeypatch.setattr(cli, "_finished", [])
    with pytest.raises(SystemExit) as ended:
        cli.main()
    assert ended.value.code == 130
    out, err = capsys.readouterr()
    assert json.loads(out)["error"]["kind"] == "interrupted"
    assert out == json.dumps(json.loads(out), indent=2) + "\n", "laid out as every document"
    assert "Traceback" not in err and "Interrupted" in err


def test_sigterm_while_the_program_starts_prints_a_document(
    capsys: Capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM in the first half second (a CI job cancelled as it starts) ended the process
    at once, Python's default, with nothing on stdout under --json (user trial). From the
    command's first line it ends as Ctrl-C does, and what it went to before is restored."""
    import json
    import sys

    import controlplane.cli as cli

    def starting(*_args: Any) -> int:
        os.kill(os.getpid(), signal.SIGTERM)  # while its modules load
        raise AssertionError("the signal ends the command")

    monkeypatch.setattr(cli, "run", starting)
    monkeypatch.setattr(sys, "argv", ["cp", "apply", ".", "--json"])
    monkeypatch.setattr(cli, "_finished", [])
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as ended:
        cli.main()
    assert ended.value.code == 130
    out, err = capsys.readouterr()
    assert json.loads(out)["error"]["kind"] == "interrupted"
    assert "Traceback" not in err and "Interrupted" in err
    assert signal.getsignal(signal.SIGTERM) == before


HOOK = """
import os, signal, sys, importlib.abc
armed = []
class SignalInsideAnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "ortools.sat.python.cp_model_helper":
            armed.append(name)  # the compiled module starts to initialise
        elif len(armed) == 1:
            armed.append(name)
            sys.stderr.write("[test] SIGINT inside the compiled module's initialisation\\n")
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, SignalInsideAnImport())
from controlplane.cli import main
sys.argv = ["cp", *sys.argv[1:]]
main()
"""


def test_ctrl_c_while_a_compiled_module_initialises_is_no_traceback(quickstart: Path) -> None:
    """A Ctrl-C while OR-Tools' compiled module initialised (CP-SAT is imported when the
    first plan needs it) ended as "ImportError: initialization failed" with a traceback
    and nothing on stdout under --json (user trial). The import error caused by the
    signal is an interruption like any other. A real process: the module must not be
    loaded yet."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", HOOK, "apply", str(quickstart), "--auto-approve", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert "[test] SIGINT" in done.stderr, "the hook never fired: " + done.stderr[-500:]
    assert done.returncode == 130, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert json.loads(done.stdout)["error"]["kind"] == "interrupted"
