"""Help people can read: flags without a type column, times described as ISO 8601 (not
strptime patterns), and an example in every command's help."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import cluster, project, workload
from tests.builders.cli import cp, write_specs


def _command_paths() -> list[list[str]]:
    import typer

    from controlplane.cli import commands  # noqa: F401  (registers every command)
    from controlplane.cli.app import app

    paths: list[list[str]] = []

    def walk(command: object, prefix: list[str]) -> None:
        subs = getattr(command, "commands", None)
        if subs is None:
            paths.append(prefix)
            return
        for name, sub in sorted(subs.items()):
            walk(sub, [*prefix, name])

    walk(typer.main.get_command(app), [])
    return paths


COMMAND_PATHS = _command_paths()


def test_every_command_is_walked() -> None:
    names = {" ".join(p) for p in COMMAND_PATHS}
    assert {"plan", "apply", "store init", "completion"} <= names


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda p: " ".join(p))
def test_help_is_uncluttered_and_shows_an_example(
    path: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    res = cp(capsys, *path, "--help")
    assert res.code == 0, res.err
    assert "<bool>" not in res.out
    assert "%Y" not in res.out and "%H" not in res.out
    assert "Example" in res.out
    # the example runs the command it documents
    examples = res.out.split("Example", 1)[1]
    assert f"cp {' '.join(path)} " in examples


def test_root_help_offers_completion_and_h(capsys: pytest.CaptureFixture[str]) -> None:
    res = cp(capsys, "-h")
    assert res.code == 0 and "--install-completion" in res.out and "<bool>" not in res.out


def test_now_is_an_iso_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_specs(tmp_path, [cluster(), project("p", gpus=2), workload("w", "p", gpus=1)])
    bad = cp(capsys, "status", tmp_path, "--now", "yesterday")
    assert bad.code == 2 and "ISO 8601" in bad.err and "%Y" not in bad.err
    for when in ("2026-11-22T10:00:00+00:00", "2026-11-22T10:00Z", "2026-11-22"):
        assert cp(capsys, "status", tmp_path, "--now", when, "--json").code == 0, when
    far = cp(capsys, "status", tmp_path, "--now", "9999-01-01")
    assert far.code == 2 and "between the years 1970 and 9000" in far.err


def test_the_readme_documents_every_command_with_an_example() -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    reference = readme.split("## CLI reference", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in reference.splitlines() if line.startswith("| `cp ")]
    block = reference.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    for path in COMMAND_PATHS:
        command = f"cp {' '.join(path)}"
        assert any(row.startswith(f"| `{command}") for row in rows), f"{command}: no table row"
        assert any(line.startswith(f"{command} ") for line in block), f"{command}: no example"


def test_every_option_says_what_it_does() -> None:
    """`cp status --help` listed --observed with no words at all."""
    import typer

    from controlplane.cli.app import app

    root = typer.main.get_command(app)
    silent = []
    for path in COMMAND_PATHS:
        command = root
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        silent += [
            f"cp {' '.join(path)} {param.opts[0]}"
            for param in command.params
            if param.param_type_name == "option"
            and not getattr(param, "hidden", False)
            and not getattr(param, "help", None)
        ]
    assert COMMAND_PATHS and silent == []


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda p: " ".join(p))
def test_help_fits_80_columns_with_every_option_whole(
    path: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 80 columns rich's panels cut `--detailed-exitcode` to `--detailed-exitc…` and
    squeezed each option's words into a column a dozen characters wide (six lines for
    "plan against this snapshot (JSON/YAML) instead of observing the clusters")."""
    import typer

    from controlplane.cli.app import app

    monkeypatch.setenv("COLUMNS", "80")
    res = cp(capsys, *path, "--help")
    assert res.code == 0, res.err
    lines = res.out.split("Example", 1)[0].splitlines()  # the examples name options too
    assert max(len(line) for line in lines) <= 80
    assert not any(line.rstrip().endswith("…") for line in lines)
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    shown = [
        p
        for p in command.params
        if p.param_type_name == "option" and not getattr(p, "hidden", False)
    ]
    words = [w.strip(",") for w in "\n".join(lines).split()]
    for param in shown:
        for opt in [*param.opts, *param.secondary_opts]:
            assert opt in words, f"{opt} is not whole in cp {' '.join(path)} --help"
    start = next(i for i, line in enumerate(lines) if line.startswith("Options"))
    options = [line for line in lines[start + 1 :] if line.strip()]
    assert len(options) <= 3 * len(shown) + 1, "\n".join(options)  # a few lines each, -h


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["plan", "--time-limit", "-1"], "--time-limit"),
        (["watch", "--time-limit", "-1", "--once"], "--time-limit"),
        (["plan", "--time-limit", "nan"], "--time-limit"),
        (["watch", "--interval", "0", "--once"], "--interval"),
        (["watch", "--quiet", "-1", "--once"], "--quiet"),
    ],
)
def test_seconds_below_zero_are_refused(
    args: list[str], option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--time-limit -1` was taken (a plan cut short before it began)."""
    write_specs(tmp_path, [cluster(), project("p", gpus=2), workload("w", "p", gpus=1)])
    res = cp(capsys, args[0], tmp_path, *args[1:])
    assert res.code == 2 and option in res.err, res.err


def test_the_root_help_lists_commands_in_the_order_people_meet_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """They came in the order their modules registered them (apply, watch, explain, …,
    validate near the end: user trial); every command has its place in the order."""
    from controlplane.cli.app import WORKFLOW

    res = cp(capsys, "-h")
    listed = [line.split()[0] for line in res.out.split("Commands:", 1)[1].splitlines() if line]
    assert listed == list(WORKFLOW)
    assert {p[0] for p in COMMAND_PATHS} == set(WORKFLOW)


@pytest.mark.parametrize("command", ["observe", "apply"])
def test_now_of_the_commands_that_act_says_it_moves_the_simulator(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cp observe --help`` said ``--now`` was "plan as of this time"; on the simulator it
    moves the cluster's clock, never back, and an earlier time is refused (user trial)."""
    monkeypatch.setenv("COLUMNS", "200")
    said = " ".join(cp(capsys, command, "--help").out.split())
    assert "--now TIME as of this ISO 8601 time" in said, said
    assert "simulated cluster" in said and "never back" in said, said
    plan = " ".join(cp(capsys, "plan", "--help").out.split())
    assert "--now TIME plan as of this ISO 8601 time" in plan  # plans only look
