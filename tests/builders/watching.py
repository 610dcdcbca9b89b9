"""A `cp watch` (or any long-running command) in a child process, and the lines it prints
(stdout and stderr together), read as they come by a thread of their own."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path


class Child:
    """The process ``argv`` starts, and what it has said so far (``seen``)."""

    def __init__(self, argv: list[str], cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            cwd=cwd,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, test: Callable[[str], bool], timeout: float = 30) -> str:
        """The first line from now on that passes ``test``; fails if the process ends or
        ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None, f"the process exited: {self.seen[-8:]}"
                continue
            self.seen.append(line)
            if test(line):
                return line
        raise AssertionError(f"no such line in {timeout:g}s; last lines: {self.seen[-8:]}")

    def stop(self) -> int:
        """SIGTERM, and its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)

    def ended(self, timeout: float) -> tuple[int, str]:
        """The exit code and everything said, once the process has ended by itself within
        ``timeout`` seconds (killed, and the test failed, otherwise)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"the process still ran {timeout:g}s later; said: {self.seen[-8:]}"
            ) from None
        time.sleep(0.2)  # the reader thread takes the last lines
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code, "\n".join(self.seen)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
