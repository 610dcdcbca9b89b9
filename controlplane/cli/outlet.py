"""Standard output whose reader may leave before the command ends (``cp apply | head -1``).

Python gets a ``BrokenPipeError`` for the first write after the reader closed the pipe,
and click ended the command there, silently, with exit 1: an apply stopped between two
actions with part of its plan done, and nobody was told. What a command writes is for
people; what it does must not depend on whether they are still reading. So the first
broken write points standard output at ``/dev/null``, and the command goes on, with its
own exit code. A loop asks itself to stop then (:func:`on_gone`): nobody reads its lines.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, TextIO

_listeners: list[Callable[[], None]] = []


def install() -> None:
    """Guard ``sys.stdout`` for the rest of the process (the command line's entry point)."""
    if not isinstance(sys.stdout, _Outlet):
        sys.stdout = _Outlet(sys.stdout)


@contextlib.contextmanager
def on_gone(listener: Callable[[], None]) -> Iterator[None]:
    """Within the block, call ``listener`` once if the reader of standard output goes."""
    _listeners.append(listener)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            _listeners.remove(listener)


def _gone(stream: TextIO) -> None:
    """Standard output goes to /dev/null from now on; whatever was buffered with it too."""
    try:
        sink = os.open(os.devnull, os.O_WRONLY)
        os.dup2(sink, stream.fileno())
        os.close(sink)
    except (OSError, ValueError):
        return
    while _listeners:
        with contextlib.suppress(OSError):  # (standard error may be the same closed pipe)
            _listeners.pop(0)()


class _Buffer:
    """The binary side of standard output (``--json`` writes through it), guarded alike."""

    def __init__(self, outlet: _Outlet) -> None:
        self._outlet = outlet
        self._raw: BinaryIO = outlet._stream.buffer

    def write(self, data: bytes) -> int:
        try:
            return self._raw.write(data)
        except BrokenPipeError:
            _gone(self._outlet._stream)
            return len(data)

    def flush(self) -> None:
        try:
            self._raw.flush()
        except BrokenPipeError:
            _gone(self._outlet._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class _Outlet:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    @property
    def buffer(self) -> _Buffer:
        return _Buffer(self)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            _gone(self._stream)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            _gone(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
