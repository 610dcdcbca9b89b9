"""The ``cp`` / ``controlplane`` command line.

Terraform-like: ``plan`` shows what would change and why, ``apply`` does it, every plan and
action is stored. Exit codes: 0 success; 1 an error (bad specs, stale plan, failed action);
2 a usage error (a mistyped command or option), or from ``plan --detailed-exitcode`` when
the plan has changes.

Layout: :mod:`~controlplane.cli.passthrough` (hand plain ``cp a b`` to coreutils, decided
before anything heavy is imported: keep this module's imports to the standard library's
``sys``, ``os``, ``atexit``, ``contextlib`` and ``signal``, and that one), :mod:`~controlplane.cli.app` (the typer app,
shared options, error handling), :mod:`~controlplane.cli.commands` (thin command bodies
over controlplane/workflow.py), :mod:`~controlplane.cli.views` (human and JSON output).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from types import FrameType

from controlplane.cli.passthrough import hand_off, is_ours, typo

_finished: list[int] = []  # the exit code of a command that returned


def main() -> None:
    # registered first, so it runs after every exit function registered later
    atexit.register(_end_without_teardown)
    # SIGTERM (a CI job cancelled as it starts) ends the start as Ctrl-C does: Python's
    # default would end the process at once, with no word and no --json document
    before = signal.signal(signal.SIGTERM, _terminated)
    if is_ours(sys.argv[1:], sys.argv[0]):  # (a plain copy imports nothing more of ours)
        from controlplane.cli import outlet

        outlet.install()  # a reader that leaves early (`cp apply | head -1`) stops nothing
    try:
        code = run(sys.argv[1:], sys.argv[0])
    except KeyboardInterrupt:  # a signal before the command's own handling is in place
        code = _interrupted_early(sys.argv[1:])
    finally:
        signal.signal(signal.SIGTERM, before)
    _finished.append(code)
    sys.exit(code)


def _terminated(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _interrupted_early(args: list[str]) -> int:
    """Ctrl-C while the program was still starting (importing its modules): nothing was
    done; said in a line, and with ``--json`` in a document, not a traceback."""
    said = "interrupted: nothing was applied"
    _document(args, "interrupted", said)
    sys.stderr.write(said[0].upper() + said[1:] + ".\n")
    return 130


def _document(args: list[str], kind: str, said: str) -> None:
    """With ``--json`` (or ``-o json``), an error that comes before the command runs is
    a document on stdout too, laid out as every other (app.write_json: indent 2)."""
    import itertools  # the standard library's, as json: only for this document
    import json

    if "--json" in args or any(
        a in ("-o", "--output") and b == "json" for a, b in itertools.pairwise(args)
    ):
        doc = {"ok": False, "error": {"kind": kind, "message": said}}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def _end_without_teardown() -> None:
    """End a finished command once every other exit function has run, without tearing
    the interpreter down: freeing what a large plan built, object by object, is only
    waiting (0.4 s after a 1,000-node plan, 1.6 s after a 10,000-node one). Everything the
    command writes is written and closed by then. An exception on its way out (no code
    recorded) ends as Python ends it, and so does a process measured for coverage: exit
    functions registered before the command started would not run (coverage's, from a
    ``.pth`` file, would be one)."""
    if not _finished or "coverage" in sys.modules:
        return
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe (`cp plan | head`): nothing left to keep
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(_finished[0])


def run(args: list[str], argv0: str = "cp") -> int:
    """Run the command line with ``args``; return the exit code (tests call this in-process)."""
    meant = typo(args)  # a near miss of a command that is no file: say which was meant
    if meant is not None:
        prog = "cp" if argv0.rsplit("/", 1)[-1] == "cp" else "controlplane"
        said = f"unknown command '{args[0]}'; did you mean '{meant}'?"
        _document(args, "usage", said)
        sys.stderr.write(f"{prog}: {said}\n")
        return 2
    if not is_ours(args, argv0):
        hand_off(args)  # not ours: behave exactly like coreutils cp
    from controlplane.cli.app import invoke

    return invoke(args, argv0)
