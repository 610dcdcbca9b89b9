"""``cp history --workload`` takes a workload's name, ``PROJECT/NAME``: ``cp history
--workload garbage`` printed ``[]`` with exit 0, as if a workload of that name had no
past, where a name of the wrong form is a mistake to point out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders.cli import cp

Capsys = pytest.CaptureFixture[str]


@pytest.mark.parametrize("name", ["garbage", "nlp/", "/llm-finetune", "nlp/llm/finetune", ""])
def test_a_workload_not_of_the_form_project_name_is_a_usage_error(
    name: str, quickstart: Path, capsys: Capsys
) -> None:
    res = cp(capsys, "history", quickstart, "--workload", name, "--json")
    assert res.code == 2, (res.out, res.err)
    doc = res.json()
    assert doc["error"]["kind"] == "usage" and "PROJECT/NAME" in doc["error"]["message"], doc
    text = cp(capsys, "history", quickstart, "--workload", name)
    assert text.code == 2 and "PROJECT/NAME" in text.err and text.out == "", text


def test_a_workload_without_a_past_is_no_error(quickstart: Path, capsys: Capsys) -> None:
    res = cp(capsys, "history", quickstart, "--workload", "nlp/never-ran", "--json")
    assert res.code == 0 and res.json() == []


def test_history_says_its_times_are_utc(quickstart: Path, capsys: Capsys) -> None:
    """The text showed "2026-03-02 09:01:00" with no zone (user trial); JSON has its offset."""
    assert (
        cp(capsys, "apply", quickstart, "--auto-approve", "--now", "2026-03-02T09:01:00Z").code == 0
    )
    text = cp(capsys, "history", quickstart).out
    assert "2026-03-02 09:01:00 UTC" in text, text


def test_a_name_with_no_past_close_to_one_with_a_past_is_pointed_out(
    quickstart: Path, capsys: Capsys
) -> None:
    """`cp history --workload vision/vit-trian` said "No applied actions" with no hint that
    vision/vit-train has a past (user trial). Still no error: a name may have no past."""
    assert cp(capsys, "apply", quickstart, "--auto-approve").code == 0
    res = cp(capsys, "history", quickstart, "--workload", "vision/vit-trian")
    assert res.code == 0
    assert "No applied actions for vision/vit-trian" in res.out
    assert "did you mean 'vision/vit-train'?" in " ".join(res.out.split()), res.out
    assert "did you mean" not in cp(capsys, "history", quickstart, "--workload", "x/y").out
