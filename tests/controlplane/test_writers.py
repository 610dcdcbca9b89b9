"""Which process holds a spec file open for writing (controlplane/writers.py), read from
/proc with real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from controlplane.writers import writers


@contextmanager
def holding(path: Path, mode: str) -> Iterator[int]:
    """A child process with ``path`` open in ``mode`` until the block ends; its pid."""
    child = subprocess.Popen(
        [sys.executable, "-c", f"import sys; f = open({str(path)!r}, {mode!r}); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        # it has the file open once /proc shows it (or, for a reader, once it could have)
        for _ in range(200):
            if str(path.resolve()) in _opened(child.pid):
                break
            subprocess.run(["sleep", "0.02"], check=True)
        yield child.pid
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=20)


def _opened(pid: int) -> set[str]:
    """The paths a process has open now; its descriptors come and go while it starts
    (an fd listed may be closed before it is read), so one that vanishes is skipped."""
    targets = set()
    for fd in range(3, 8):
        try:
            targets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return targets


def test_a_writer_is_named_and_a_reader_is_not(tmp_path: Path) -> None:
    spec = tmp_path / "a.yaml"
    other = tmp_path / "b.yaml"
    spec.write_text("x: 1\n")
    other.write_text("y: 1\n")
    paths = [str(spec), str(other), str(tmp_path / "gone.yaml"), str(tmp_path)]
    assert writers(paths) == []
    with holding(spec, "a") as pid:
        [found] = writers(paths)
        assert (found.path, found.pid, found.command) == (
            str(spec),
            pid,
            Path(sys.executable).name[:15],
        )
    assert writers(paths) == []  # closed
    with holding(spec, "r"):
        assert writers(paths) == []
    with holding(other, "r+"):
        assert [w.path for w in writers(paths)] == [str(other)]


def test_without_proc_nothing_is_known(tmp_path: Path) -> None:
    spec = tmp_path / "a.yaml"
    spec.write_text("x: 1\n")
    with holding(spec, "w"):
        assert writers([str(spec)], proc=tmp_path / "no-proc") == []
