"""A spinner on stderr while a slow step runs, only on a terminal and only after a second:
pipes, CI logs and quick commands stay clean."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from rich.console import Console

from controlplane import activity
from controlplane.cli import progress
from controlplane.cli.progress import Spinner
from tests.builders.cli import cp

ROOT = Path(__file__).resolve().parents[3]


def _terminal() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=80), buffer


def test_a_slow_step_shows_a_spinner_with_its_words() -> None:
    console, buffer = _terminal()
    spinner = Spinner(console, delay=0.05)
    with spinner("observing cluster rivanna"):
        time.sleep(0.4)
    assert "observing cluster rivanna" in buffer.getvalue()
    assert spinner.status is None and spinner.timer is None, "gone when the step ends"


def test_a_quick_step_shows_nothing() -> None:
    console, buffer = _terminal()
    spinner = Spinner(console, delay=0.5)
    with spinner("planning 3 workloads"):
        pass
    time.sleep(0.7)  # the timer was cancelled, not merely late
    assert buffer.getvalue() == ""


def test_nothing_on_a_non_terminal() -> None:
    buffer = io.StringIO()
    spinner = Spinner(Console(file=buffer, width=80), delay=0.0)
    with spinner("observing cluster rivanna"):
        time.sleep(0.2)
    assert buffer.getvalue() == ""


def test_nested_steps_show_the_innermost() -> None:
    console, buffer = _terminal()
    spinner = Spinner(console, delay=0.0)
    with spinner("applying plan"):
        time.sleep(0.2)
        with spinner("submit nlp/llm-finetune on sim"):
            time.sleep(0.3)
    assert "submit nlp/llm-finetune on sim" in buffer.getvalue()
    assert spinner.status is None


def test_without_a_reporter_busy_does_nothing() -> None:
    with activity.busy("planning"):
        pass


def test_the_commands_announce_their_slow_steps(
    quickstart: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wired end to end: with no delay, a plan on a terminal names each step it takes."""
    from controlplane.cli import app

    console, buffer = _terminal()
    monkeypatch.setattr(app, "err", console)
    monkeypatch.setattr(progress, "DELAY", 0.0)
    noted: list[str] = []
    told = Spinner.note

    def note(self: Spinner, detail: str) -> None:
        noted.append(detail)
        told(self, detail)

    monkeypatch.setattr(Spinner, "note", note)
    res = cp(capsys, "apply", quickstart, "--auto-approve")
    assert "round 1, allocating" in noted  # what is drawn depends on the spinner's refresh
    assert res.code == 0
    shown = buffer.getvalue()
    assert "observing cluster sim" in shown and "planning 12 workloads" in shown
    assert "planning 12 workloads (round " in shown, "the plan tells its round and step"
    assert "submit nlp/llm-finetune on sim" in shown
    assert "\x1b" not in res.out, "stdout untouched"


def test_stderr_stays_clean_when_it_is_not_a_terminal(
    quickstart: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "DELAY", 0.0)
    res = cp(capsys, "plan", quickstart, "--json")
    assert res.code == 0
    assert "planning" not in res.err and "\x1b" not in res.err


def test_a_step_shows_where_it_stands() -> None:
    console, buffer = _terminal()
    spinner = Spinner(console, delay=0.0)
    spinner.note("round 1, reclaim")  # no step yet: nothing to add it to
    with spinner("planning 3 workloads"):
        time.sleep(0.2)
        spinner.note("round 1, reclaim: 250 of 330 waiting jobs")
        time.sleep(0.2)
        with spinner("asking cluster sim"):  # a new step starts without the note
            time.sleep(0.2)
            assert spinner.detail == ""
    shown = buffer.getvalue()
    assert "planning 3 workloads (round 1, reclaim: 250 of 330 waiting jobs)" in shown
    assert spinner.status is None


def test_a_note_without_a_reporter_does_nothing() -> None:
    activity.note("round 1, allocating")
