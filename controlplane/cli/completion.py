"""Shell completion for ``cp`` and ``controlplane``: the scripts, and where shells find them.

typer (click underneath) writes the scripts: on TAB the shell runs the program with
``_CP_COMPLETE`` set and click answers with the commands and options that match. We add
one rule: ``cp`` is also coreutils' copy command, so a script must leave file names to the
shell whenever we have nothing to offer. bash's script does (``complete -o default``),
zsh's falls back to ``_files``, fish's ``--no-files`` is dropped; and once the first word
is not ours (``cp notes.txt <TAB>``), :func:`copy_answer` answers instead of click, which
would offer our commands again.

``--install-completion`` writes the script to a file of its own and, for bash and zsh,
adds one ``source`` line to the shell's rc file (once, however often it runs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from controlplane.cli.passthrough import COMMANDS, OPTIONS

if TYPE_CHECKING:
    from typer._click import Command

SHELLS = ("bash", "zsh", "fish")


def complete_var(prog: str) -> str:
    """The environment variable the scripts set to ask ``prog`` for completions."""
    return "_{}_COMPLETE".format(prog.replace("-", "_").upper())


def enable() -> None:
    """Let click answer the scripts' requests (registers typer's completion classes)."""
    from typer._completion_classes import completion_init

    completion_init()


def script(shell: str, prog: str) -> str:
    """The completion script of ``prog`` for ``shell`` (one of :data:`SHELLS`)."""
    from typer._completion_shared import get_completion_script

    enable()
    text = get_completion_script(prog_name=prog, complete_var=complete_var(prog), shell=shell)
    if shell == "fish":
        text = text.replace(" --no-files", "")
    return text.strip() + "\n"


def copy_answer(command: Command, prog: str) -> str | None:
    """When a shell asks ``cp`` for completions of a copy (its first word is not one of
    ours), the answer that leaves file names to the shell; None otherwise (click answers)."""
    instruction = os.environ.get(complete_var(prog), "")
    if prog != "cp" or not instruction:
        return None
    from typer._click.shell_completion import get_completion_class

    shell = instruction.partition("_")[2]
    kind = get_completion_class(shell)
    if kind is None:
        return None
    args, _ = kind(command, {}, prog, complete_var(prog)).get_completion_args()
    if not args or args[0] in COMMANDS or args[0] in OPTIONS:
        return None
    return "_files" if shell == "zsh" else ""


def login_shell() -> str | None:
    """The user's shell from ``$SHELL``, if it is one we write scripts for."""
    name = os.path.basename(os.environ.get("SHELL", ""))
    return name if name in SHELLS else None


@dataclass(frozen=True)
class Installed:
    script: Path  # where the script was written
    rc: Path | None  # the rc file that sources it (fish needs none)


def install(shell: str, prog: str, home: Path) -> Installed:
    """Write the script where ``shell`` will load it; idempotent."""
    if shell == "fish":  # fish loads completions/<prog>.fish by itself
        path = home / ".config" / "fish" / "completions" / f"{prog}.fish"
        _write(path, script(shell, prog))
        return Installed(path, None)
    folder, rc = {"bash": (".bash_completions", ".bashrc"), "zsh": (".zsh_completions", ".zshrc")}[
        shell
    ]
    path = home / folder / f"{prog}.{shell}" if shell == "zsh" else home / folder / f"{prog}.sh"
    _write(path, script(shell, prog))
    line = f"source '{path}'"
    if shell == "zsh":  # compdef needs compinit to have run
        line = f"(( $+functions[compdef] )) || {{ autoload -Uz compinit && compinit }}; {line}"
    rc_path = home / rc
    existing = rc_path.read_text() if rc_path.exists() else ""
    if line not in existing.splitlines():
        with rc_path.open("a") as f:
            f.write(("" if not existing or existing.endswith("\n") else "\n") + line + "\n")
    return Installed(path, rc_path)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
