"""The typer app: shared options, the root callback, and how errors reach the user.

The CLI catches the project's own exceptions (spec diagnostics, ControlPlaneError,
AdapterError) and prints them as one-line errors; anything else is a bug and shows a
traceback.
"""

from __future__ import annotations

import itertools
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import pydantic_core
import typer

try:  # recent typer carries its own copy of click; its exceptions are that copy's
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer uses click itself
    import click  # type: ignore[no-redef]
from rich.console import Console
from rich.text import Text

from adapters.base import AdapterError
from controlplane import __version__, activity, workflow
from controlplane.cli import completion, interrupts
from controlplane.cli.progress import Spinner
from controlplane.cli.views import problems
from controlplane.errors import ControlPlaneError
from specs.diagnostics import SpecError, sort_diagnostics
from specs.durations import TooLong, parse_duration
from specs.loader import LoadResult

# `cp -h` lists the commands in the order people meet them, not the order they register
WORKFLOW = (
    "validate",
    "plan",
    "apply",
    "watch",
    "status",
    "get",
    "explain",
    "history",
    "show",
    "usage",
    "cost",
    "observe",
    "schema",
    "completion",
    "store",
)


class _InWorkflowOrder(typer.core.TyperGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: (WORKFLOW.index(n) if n in WORKFLOW else 99, n))


app = typer.Typer(
    cls=_InWorkflowOrder,
    name="cp",
    help="controlplane: declarative GPU quota, placement and preemption for Slurm, "
    "Kubernetes and a built-in simulator. Specs in git, plans you can review.",
    no_args_is_help=True,
    add_completion=False,
    # click's own layout: at 80 columns rich's panels squeezed the help into a narrow
    # column and cut long option names short ("--detailed-exitc…")
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
out = Console()
err = Console(stderr=True)

DirArg = Annotated[Path, typer.Argument(help="spec directory (a git repo of YAML specs)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output")]
# commands that name a workload or a plan first take the spec directory after it, or as
# --dir (their first form, kept): `cp explain ads/train DIR` reads as `cp plan DIR` does
DirAfterArg = Annotated[
    Path | None,
    typer.Argument(help="spec directory, as --dir gives it [default: .]", show_default=False),
]
DirOpt = Annotated[
    Path | None, typer.Option("--dir", help="spec directory (or DIR)", show_default=False)
]


def output_file(path: Path | None) -> Path | None:
    """A file a command writes, checked before it does any work: its folder exists, it is
    not a folder, and it is not a spec document (YAML) that it would replace."""
    if path is None:
        return None
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a directory; give a file name")
    if not path.parent.is_dir():
        raise typer.BadParameter(f"the folder {path.parent} does not exist; create it first")
    if path.is_file() and path.suffix.lower() in (".yaml", ".yml"):
        raise typer.BadParameter(f"{path} is not a plan file (a spec?); it is left as it is")
    return path


def plan_file(path: Path | None) -> Path | None:
    """Where `--out` saves a plan: an output file that is new, or an older plan file."""
    path = output_file(path)
    if path is not None and path.is_file() and path.stat().st_size:
        try:
            doc = json.loads(path.read_bytes())
        except (ValueError, UnicodeDecodeError):
            doc = None
        if not (isinstance(doc, dict) and "id" in doc and "actions" in doc):
            raise typer.BadParameter(f"{path} is not a plan file; it is left as it is")
    return path


def spec_dir_of(given: Path | None, option: Path | None) -> Path:
    """The spec directory from DIR or --dir (the same one when both are given)."""
    if given is not None and option is not None and given.resolve() != option.resolve():
        raise typer.BadParameter(
            f"two spec directories, {given} and --dir {option}: give one", param_hint="--dir"
        )
    return given or option or Path(".")


DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db", help="SQLAlchemy URL of the store [default: sqlite under DIR/.cp/]", envvar="CP_DB"
    ),
]
ForecastOpt = Annotated[
    bool,
    typer.Option(
        "--forecast/--no-forecast",
        help="ask the clusters when fan-out candidates would start "
        "(Slurm: sbatch --test-only, one job id each); without, candidates rank by cost",
    ),
]


def parse_time(text: str) -> datetime:
    """An ISO 8601 time (``2026-11-22T10:00:00+00:00``, ``2026-11-22T10:00Z``, or a date),
    within the calendar a plan's dates must fit in."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not an ISO 8601 time; write e.g. 2026-11-22T10:00:00+00:00"
        ) from None
    if not 1970 <= value.year <= 9000:
        raise typer.BadParameter("give a time between the years 1970 and 9000")
    return value


NowOpt = Annotated[
    datetime | None,
    typer.Option(
        "--now",
        help="plan as of this ISO 8601 time (e.g. 2026-11-22T10:00:00+00:00; no zone: UTC); "
        "default: the clock",
        metavar="TIME",
        parser=parse_time,
    ),
]
# observe and apply act: on the simulator --now is where its clock goes, which never runs back
ActingNowOpt = Annotated[
    datetime | None,
    typer.Option(
        "--now",
        help="as of this ISO 8601 time (e.g. 2026-11-22T10:00:00+00:00; no zone: UTC); "
        "a simulated cluster's clock moves to it, never back (an earlier time is refused); "
        "default: the clock",
        metavar="TIME",
        parser=parse_time,
    ),
]


def _no_negative_seconds(value: float) -> float:
    if not value >= 0:  # NaN too; 0: cut every step short, and say so
        raise typer.BadParameter("give a number of seconds, 0 or more")
    return value


# the plan's bound, for every command that makes plans of its own (plan, apply of a spec
# directory, watch); each gives DEFAULT_POLICY.time_limit as its default
TimeLimitOpt = Annotated[
    float,
    typer.Option(
        help="seconds for the whole plan: when they run out, the plan reached so far is "
        "shown and says which steps were cut short",
        callback=_no_negative_seconds,
    ),
]
ObservedOpt = Annotated[
    Path | None,
    typer.Option(help="plan against this snapshot (JSON/YAML) instead of observing the clusters"),
]


def age(text: str | None) -> str | None:
    """An option's age, written as specs write a duration (``90d``, ``12h``): checked."""
    if text is None:
        return None
    if text.strip().isdigit():  # minutes to Slurm, days to someone else: a unit, please
        raise typer.BadParameter(f"{text!r} has no unit; write e.g. 90d or 12h")
    try:
        if parse_duration(text) <= 0:
            raise ValueError("it is not after zero")
    except (TooLong, ValueError) as exc:
        raise typer.BadParameter(f"{text!r} is not an age ({exc}); write e.g. 90d or 12h") from None
    return text


def examples(*commands: str) -> str:
    """A command's epilog: the command lines shown under "Example:" in its --help, one
    per line (click's ``\\b`` keeps the paragraph from being rewrapped)."""
    head = "Example:" if len(commands) == 1 else "Examples:"
    return "\n".join(["\b", head, *(f"  {c}" for c in commands)])


def load(spec_dir: Path) -> LoadResult:
    """Load and validate; warnings go to stderr, errors raise (every one, file:line:col)."""
    result = workflow.load(spec_dir)
    for w in result.warnings:  # one line each, whatever the width: file:line:col stays whole
        err.print(Text(str(w), style="yellow"), highlight=False, soft_wrap=True)
    return result


def load_to_plan(spec_dir: Path) -> LoadResult:
    """:func:`load`, for a command that plans: specs without a cluster are an error, not
    "no changes" (a wrong or empty folder, which CI would read as nothing to do)."""
    result = load(spec_dir)
    if not result.desired.clusters:
        raise ControlPlaneError(
            f"no clusters in the specs of {spec_dir}: nothing to plan (is it the spec "
            "directory? every plan needs at least one Cluster document)"
        )
    return result


def _version_callback(value: bool) -> None:
    if value:
        out.print(f"controlplane {__version__}")
        raise typer.Exit()


def _show_completion(ctx: typer.Context, value: bool) -> None:
    if value:
        script = completion.script(_login_shell(), _prog(ctx))
        out.print(script, end="", markup=False, highlight=False, soft_wrap=True)  # never wrapped
        raise typer.Exit()


def _install_completion(ctx: typer.Context, value: bool) -> None:
    if value:
        done = completion.install(_login_shell(), _prog(ctx), Path.home())
        out.print(f"wrote {done.script}", highlight=False, soft_wrap=True)
        if done.rc is not None:
            out.print(f"{done.rc} sources it", highlight=False, soft_wrap=True)
        out.print("Completion takes effect in new shells.")
        raise typer.Exit()


def _login_shell() -> str:
    shell = completion.login_shell()
    if shell is None:
        raise typer.BadParameter(
            "cannot tell the shell from $SHELL; use bash, zsh or fish: "
            "`cp completion bash|zsh|fish` prints the script"
        )
    return shell


def _prog(ctx: typer.Context) -> str:
    return ctx.find_root().info_name or "cp"


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="show the version"
        ),
    ] = False,
    show_completion: Annotated[
        bool,
        typer.Option(
            "--show-completion",
            callback=_show_completion,
            is_eager=True,
            help="print the completion script for your shell ($SHELL: bash, zsh or fish)",
        ),
    ] = False,
    install_completion: Annotated[
        bool,
        typer.Option(
            "--install-completion",
            callback=_install_completion,
            is_eager=True,
            help="install completion for your shell ($SHELL: bash, zsh or fish)",
        ),
    ] = False,
) -> None:
    pass


HELP_OPTIONS = ["-h", "--help"]
WARNINGS_BESIDE_ERRORS = 20  # spec warnings printed with errors; --json has every one


def _tidy_help(command: click.Command) -> None:
    """No type column for flags: ``--json <bool>`` reads as if the flag took a value.

    click makes each command's ``--help`` option on first use and keeps it; making it
    here lets it be tidied with the rest."""
    helper = command.get_help_option(click.Context(command, help_option_names=HELP_OPTIONS))
    for param in [*command.params, *([helper] if helper else [])]:
        if param.param_type_name == "option" and getattr(param, "is_flag", False):
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _tidy_help(sub)


def invoke(args: list[str], argv0: str) -> int:
    """Run the app with ``args``; the project's own errors become messages and exit 1."""
    from controlplane.cli import commands  # noqa: F401  (registers every command on ``app``)

    command = typer.main.get_command(app)
    _tidy_help(command)
    invoked_as = Path(argv0).name
    prog = invoked_as if invoked_as in ("cp", "controlplane") else "cp"
    completion.enable()  # a shell asking for completions sets _CP_COMPLETE and no args
    answer = completion.copy_answer(command, prog)
    if answer is not None:  # completing a copy: file names are the shell's business
        sys.stdout.write(answer + "\n" if answer else "")
        return 0
    as_json = wants_json(args)
    try:
        # slow steps get a spinner on a terminal
        with activity.reporting(Spinner(err)), interrupts.interrupting():
            code = command.main(args=args, prog_name=prog, standalone_mode=False)
    except interrupts.Interrupted as exc:  # an apply that acts stops after its action instead
        code = _ended("interrupted", exc.message, as_json, 130)
    except ImportError as exc:  # a signal while a module was being imported
        signalled = interrupts.interrupted_by(exc)
        if signalled is None:
            raise
        code = _ended("interrupted", signalled.message, as_json, 130)
    except click.ClickException as exc:  # usage errors: click words them
        if as_json:
            write_json(problems.error_json(exc, kind="usage"))
        else:
            exc.show()
        code = exc.exit_code
    except typer.Abort:  # a question without an answer (stdin closed: a script)
        said = "aborted: no answer to the question (give --auto-approve where nobody answers)"
        code = _ended("aborted", said, as_json, 1)
    except SpecError as exc:
        if as_json:
            write_json(problems.error_json(exc))
        # the warnings too, as --json lists them, but not so many that the errors drown
        first = sort_diagnostics(exc.warnings)[:WARNINGS_BESIDE_ERRORS]
        for d in sort_diagnostics([*exc.diagnostics, *first]):
            err.print(str(d), highlight=False, soft_wrap=True, markup=False)
        if (left := len(exc.warnings) - len(first)) > 0:
            more = f"{left:,} more warning{'s' if left != 1 else ''}"
            err.print(f"… and {more} (--json lists them all)", highlight=False)
        err.print(f"[red]{problems.spec_error_summary(exc)}[/]", highlight=False)
        for note in getattr(exc, "__notes__", ()):  # what the command knows of the cause
            err.print(note, highlight=False, soft_wrap=True, markup=False)
        code = 1
    except (ControlPlaneError, AdapterError) as exc:
        if as_json:
            write_json(problems.error_json(exc))
        err.print(Text.assemble(("error:", "red"), f" {exc}"), highlight=False, soft_wrap=True)
        code = 1
    return code if isinstance(code, int) else 0


def _ended(kind: str, said: str, as_json: bool, code: int) -> int:
    """A command that ended without an answer: the line, and with --json the document."""
    if as_json:
        write_json({"ok": False, "error": {"kind": kind, "message": said}})
    err.print(said[0].upper() + said[1:] + ".", highlight=False, soft_wrap=True)
    return code


def wants_json(args: list[str]) -> bool:
    """Whether the command line asked for JSON (``--json``, or ``-o json``): errors are then
    a JSON document on stdout too."""
    if "--json" in args:
        return True
    return any(a in ("-o", "--output") and b == "json" for a, b in itertools.pairwise(args))


def write_json(doc: object) -> None:
    """One JSON document on stdout, as is (rich would wrap long strings at the width), in
    UTF-8. pydantic's serializer, not the json module's: with an indent, that one encodes in
    Python (0.3 s for a 4,000-node plan, against 0.05 s)."""
    sys.stdout.flush()  # anything written before it comes first
    sys.stdout.buffer.write(pydantic_core.to_json(doc, indent=2) + b"\n")
    sys.stdout.buffer.flush()
