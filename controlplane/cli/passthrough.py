"""``cp`` is also coreutils' copy command: hand it every invocation that is not ours.

When the virtualenv is active our ``cp`` shadows ``/bin/cp``, so activating it must never
break copying files, nor make it slow: a copy through the wrapper should cost little more
than starting the interpreter. So the decision is made from the first argument alone,
before anything heavy is imported, and this module needs only ``os`` and ``sys`` (not even
``pathlib``, which alone costs several milliseconds to import). The console script's
import chain (``controlplane/__init__``, ``controlplane/cli/__init__``, this module) must
stay that small; tests/controlplane/cli/test_passthrough.py checks it.

A first argument that is neither ours nor an existing path, but close to one of our
commands (``cp stauts .``), is a typo, not a copy: coreutils would only say "cannot stat
'stauts'", so we name the command that was meant instead.
"""

from __future__ import annotations

import os
import sys

# Every subcommand of the typer app (tests check the two lists agree); ours to run.
COMMANDS = frozenset(
    {
        "validate",
        "schema",
        "observe",
        "plan",
        "apply",
        "history",
        "show",
        "status",
        "get",
        "usage",
        "explain",
        "cost",
        "watch",
        "store",
        "completion",
    }
)
OPTIONS = frozenset({"--help", "-h", "--version", "--install-completion", "--show-completion"})

# How alike (difflib's ratio) a word must be to a command to be taken for a typo of it:
# "pln"/"plan" is 0.86, "stauts"/"status" 0.83; "data"/"data" paths never get this far.
_CUTOFF = 0.75


def is_ours(args: list[str], argv0: str) -> bool:
    """Whether ``argv0 args`` is a controlplane invocation rather than a file copy."""
    if os.path.basename(argv0) != "cp":
        return True  # invoked as ``controlplane``: always ours
    return not args or args[0] in COMMANDS or args[0] in OPTIONS


def suggestion(word: str) -> str | None:
    """The command ``word`` was probably meant to be, if it looks like a mistyped command
    word (lowercase letters and dashes only: never a path with a dot or slash, never an
    option) and is close enough to one."""
    if not word or word in COMMANDS or not all(c.islower() or c == "-" for c in word):
        return None
    if word.startswith("-"):
        return None
    import difflib  # only on this rare path: it costs milliseconds to import

    close = difflib.get_close_matches(word, sorted(COMMANDS), n=1, cutoff=_CUTOFF)
    return close[0] if close else None


def typo(args: list[str]) -> str | None:
    """The command meant by a first argument that is a near miss of one and not an
    existing file (a file named ``stauts`` is copied, as asked)."""
    if not args or os.path.lexists(args[0]):
        return None
    return suggestion(args[0])


def system_cp() -> str:
    """coreutils' cp: the first ``cp`` on PATH that is not this program."""
    me = os.path.realpath(sys.argv[0])
    for d in os.environ.get("PATH", "").split(os.pathsep):
        cand = os.path.join(d, "cp")
        if os.path.isfile(cand) and os.access(cand, os.X_OK) and os.path.realpath(cand) != me:
            return cand
    return "/bin/cp"


def hand_off(args: list[str]) -> None:
    """Become coreutils cp with ``args`` (never returns)."""
    os.execv(system_cp(), ["cp", *args])
