"""``cp completion``: the shell completion script, to source or to save."""

from __future__ import annotations

from typing import Annotated

import typer

from controlplane.cli import completion
from controlplane.cli.app import app, examples, out


@app.command(
    "completion",
    epilog=examples(
        "cp completion bash > ~/.bash_completions/cp.sh", "source <(cp completion zsh)"
    ),
)
def completion_cmd(
    ctx: typer.Context,
    shell: Annotated[str, typer.Argument(help="bash, zsh or fish", metavar="SHELL")],
) -> None:
    """Print the shell completion script (commands and options complete; file names are
    left to the shell, since cp is also the copy command)."""
    if shell not in completion.SHELLS:
        raise typer.BadParameter(f"use {', '.join(completion.SHELLS)}", param_hint="SHELL")
    prog = ctx.find_root().info_name or "cp"
    # as is, never wrapped at the terminal width: a break inside shell code breaks it
    out.print(completion.script(shell, prog), end="", markup=False, highlight=False, soft_wrap=True)
