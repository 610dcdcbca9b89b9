"""The checkpoint segment wrapper (adapters/slurm/script.py), run directly with bash.

No Slurm is needed: outside a job the wrapper uses the limit it was given, so a few-second
segment shows the signal stopping the command, a command that ignores it being killed,
and the argv arriving verbatim. tests/integration/slurm/test_checkpoint.py runs segments
on the real local Slurm.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from adapters.slurm.script import (
    BatchRequest,
    command_of,
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
    opts = sbatch_options(req, output="o")
    assert "--time=0-01:00:00" in opts
    assert not any(o.startswith("--signal") for o in opts)  # the script signals itself
    assert "ckpt=USR1@300" in next(o for o in opts if o.startswith("--comment="))
    # a move re-creates a segment from Slurm's copy of its script
    assert segment_of(render_script(req)) == 1
    plain = BatchRequest(workload="p/x", plan_id="t", nodes=(None,), gpus_per_node=1)
    assert segment_of(render_script(plain)) is None
