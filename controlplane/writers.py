"""Which spec files a process holds open for writing: files still being written.

``cp watch`` reads the specs once their files have been quiet for ``--quiet`` seconds,
which is enough for an editor's save or a ``git pull``. A writer that pauses for longer
while it holds the file open (``scp`` or ``rsync --inplace`` over a slow link, ``cat >
file`` while somebody pastes, a script writing in steps) left a half-written file that
looked quiet: it loaded, and the workloads of the missing half were pruned (user trial).
On Linux, /proc says which process has a file open and how (``flags`` in fdinfo), so a
cycle can wait for the writer to close it. Elsewhere, and for processes this user may not
inspect, nothing is known and nothing is waited for.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
_ACCESS_MODE = 0o3  # O_ACCMODE: O_RDONLY 0, O_WRONLY 1, O_RDWR 2


@dataclass(frozen=True)
class Writer:
    path: str  # as the caller named it
    pid: int
    command: str  # the process's name, as ps shows it


def writers(paths: Iterable[str], proc: Path = PROC) -> list[Writer]:
    """The processes (but this one) holding one of ``paths`` open for writing, by path."""
    wanted: dict[str, str] = {}
    for path in paths:
        try:
            wanted[os.path.realpath(path)] = path
        except OSError:
            continue
    if not wanted or not proc.is_dir():
        return []
    found = []
    for entry in _processes(proc):
        for fd, target in _open_files(entry):
            if target in wanted and _writable(entry / "fdinfo" / fd):
                found.append(Writer(wanted[target], int(entry.name), _command(entry)))
    return sorted(found, key=lambda w: (w.path, w.pid))


def _processes(proc: Path) -> Iterable[Path]:
    me = str(os.getpid())
    try:
        return [p for p in proc.iterdir() if p.name.isdigit() and p.name != me]
    except OSError:
        return []


def _open_files(process: Path) -> Iterable[tuple[str, str]]:
    """(fd, the path it has open) of a process; none where it may not be looked at, or
    it ended meanwhile."""
    try:
        fds = os.listdir(process / "fd")
    except OSError:
        return []
    opened = []
    for fd in fds:
        try:
            opened.append((fd, os.readlink(process / "fd" / fd)))
        except OSError:
            continue
    return opened


def _writable(fdinfo: Path) -> bool:
    try:
        for line in fdinfo.read_text().splitlines():
            if line.startswith("flags:"):
                return int(line.split()[1], 8) & _ACCESS_MODE != os.O_RDONLY
    except (OSError, ValueError, IndexError):
        pass
    return False


def _command(process: Path) -> str:
    try:
        return (process / "comm").read_text().strip() or "?"
    except OSError:
        return "?"
