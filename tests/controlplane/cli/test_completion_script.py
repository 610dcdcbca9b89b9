"""Completion scripts come out as they are, whatever the terminal's width: zsh's and
fish's were wrapped at 80 columns, and a line break inside shell code broke them."""

from __future__ import annotations

import pytest

from controlplane.cli import completion
from tests.builders.cli import cp


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_is_never_wrapped(
    shell: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    res = cp(capsys, "completion", shell)
    assert res.code == 0, res.err
    assert res.out == completion.script(shell, "controlplane")
    assert max(len(line) for line in res.out.splitlines()) > 40  # it would have wrapped
    monkeypatch.setenv("SHELL", f"/usr/bin/{shell}")
    shown = cp(capsys, "--show-completion")
    assert shown.code == 0, shown.err
    assert shown.out == res.out
