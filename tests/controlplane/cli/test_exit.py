"""The command line ends a finished command without tearing the interpreter down (freeing
a large plan object by object is only waiting), after every other exit function has run:
what it prints is all there, its exit code is kept, and exit functions registered while it
ran still run. Run as the real entry point, in a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _cp(marker: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import atexit, sys\n"
        "import controlplane.cli as cli\n"
        "marker = sys.argv.pop(1)\n"
        "ran = cli.run\n"
        "def run(args, argv0):\n"
        "    atexit.register(lambda: open(marker, 'w').write('ran'))\n"
        "    return ran(args, argv0)\n"
        "cli.run = run\n"
        "class Last:\n"  # freed only when the interpreter is torn down
        "    def __del__(self, path=marker + '.teardown', open=open):\n"
        "        open(path, 'w').write('torn down')\n"
        "last = Last()\n"
        "sys.argv[0] = 'cp'\n"
        "cli.main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(marker), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_finished_command_prints_everything_and_keeps_its_code(
    quickstart: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "exit-function"
    res = _cp(marker, "plan", quickstart, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["actions"], "the whole JSON document, flushed"
    assert marker.read_text() == "ran", "an exit function registered during the run ran"
    assert not Path(f"{marker}.teardown").exists(), "no teardown: nothing freed one by one"
    assert "Exception ignored" not in res.stderr

    changes = _cp(marker, "plan", quickstart, "--detailed-exitcode")
    assert changes.returncode == 2 and changes.stdout.rstrip().endswith("waiting.")

    broken = _cp(tmp_path / "bad", "validate", tmp_path / "missing")
    assert broken.returncode == 1 and broken.stderr
    assert (tmp_path / "bad").read_text() == "ran"


def test_commands_that_open_no_store_and_solve_nothing_load_neither(quickstart: Path) -> None:
    # the store's sqlalchemy and CP-SAT's OR-Tools (with pandas and numpy) are half of a
    # command's start: `cp validate` and `cp --help` need neither
    code = (
        "import sys\n"
        "from controlplane.cli import run\n"
        "for args in (['validate', sys.argv[1]], ['--help']):\n"
        "    assert run(args, 'cp') == 0\n"
        "print(sorted(m for m in ('sqlalchemy', 'ortools', 'pandas') if m in sys.modules))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(quickstart)], capture_output=True, text=True, check=False
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[]"
