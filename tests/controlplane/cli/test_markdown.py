"""Plans as pull-request comments: the summary first, sections collapsed, never above the
size a comment can hold, saying what was left out, with the whole plan in a file."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controlplane.cli.views.sections import DEFAULT_MAX_CHARS, Section, cell, render
from tests.builders import cluster, department, pool, project, workload
from tests.builders.cli import cp, write_specs

Capsys = pytest.CaptureFixture[str]
GITHUB_LIMIT = 65_536
NOW = "2026-11-22T10:00:00+00:00"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,000 workloads over 12 projects, far more than 400 GPUs can hold."""
    rng = random.Random(12)
    docs = [
        cluster(
            pools=[pool("a100", nodes=40), pool("v100", gpu_type="v100", gpus_per_node=4, nodes=20)]
        ),
        *(department(f"dept-{d}", gpus=120) for d in range(3)),
        *(project(f"team-{p:02d}", gpus=30, department=f"dept-{p % 3}") for p in range(12)),
    ]
    for i in range(3000):
        docs.append(
            workload(
                f"experiment-{i:04d}",
                f"team-{i % 12:02d}",
                gpus=rng.choice([1, 1, 2, 4, 8]),
                walltime="6h",
            )
        )
    return write_specs(tmp_path_factory.mktemp("big"), docs)


def test_a_3000_workload_plan_fits_a_comment_and_says_what_it_left_out(
    big: Path, capsys: Capsys
) -> None:
    full = big / "full-plan.md"
    res = cp(
        capsys, "plan", big, "--markdown", "--engine", "kai", "--now", NOW, "--full-plan", full
    )
    assert res.code == 0, res.err
    comment = res.out
    assert len(comment) <= DEFAULT_MAX_CHARS < GITHUB_LIMIT
    assert comment.startswith("**Plan: ") and "to submit" in comment.splitlines()[0]
    assert "\x1b" not in comment, "no terminal colours"
    assert comment.count("<details") == comment.count("</details>") >= 3

    plan = cp(capsys, "plan", big, "--json", "--engine", "kai", "--now", NOW).json()
    waiting, submits = len(plan["pending"]), len(plan["actions"])
    assert waiting + submits == 3000
    # each section: the rows shown plus "… and N more" add up to all of them
    shown_waiting = len(re.findall(r"^\| `team-\d+/experiment-\d+` \| \*\*", comment, re.M))
    shown_submits = len(re.findall(r"^\| `team-\d+/experiment-\d+` \| sim/", comment, re.M))
    more = {
        m[1]: int(m[0].replace(",", "")) for m in re.findall(r"… and ([\d,]+) more (.+)", comment)
    }
    assert shown_waiting + more["waiting"] == waiting
    assert shown_submits + more.get("to submit", 0) == submits
    left = int(
        re.search(r"cut to 60,000 characters: ([\d,]+) rows left out", comment)[1].replace(",", "")
    )  # type: ignore[index]
    assert left == more["waiting"] + more.get("to submit", 0)
    # the file's name, which CI attaches to the run: the runner's own path means nothing
    # to a reviewer (user trial: "The full plan: /tmp/…/work/full.md.")
    assert "The full plan is in `full-plan.md`." in comment
    assert str(big) not in comment
    assert "Quota after the plan (12 projects, 3 departments)" in comment
    assert "| team-11 | dept-2 |" in comment, "the small quota table is whole"

    whole = full.read_text()
    assert len(whole) > GITHUB_LIMIT and "… and" not in whole
    assert all(f"experiment-{i:04d}`" in whole for i in range(3000))


def test_a_small_plan_is_whole_and_unchanged_by_the_bound(big: Path, capsys: Capsys) -> None:
    small = write_specs(
        big.parent / "small", [cluster(), project("p", gpus=4), workload("w", "p", gpus=1)]
    )
    bounded = cp(capsys, "plan", small, "--markdown", "--now", NOW).out
    unbounded = cp(capsys, "plan", small, "--markdown", "--now", NOW, "--max-chars", "0").out
    assert bounded == unbounded and "more" not in bounded and "cut to" not in bounded


def _sections(sizes: list[int]) -> list[Section]:
    return [
        Section(
            title=f"Section {i} ({size})",
            columns=["row", "text"],
            rows=[f"| {i}-{j} | {'x' * (j % 37)} |" for j in range(size)],
            noun=f"of section {i}",
        )
        for i, size in enumerate(sizes)
    ]


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=400), min_size=1, max_size=5),
    max_chars=st.integers(min_value=3_000, max_value=40_000),
)
def test_render_never_exceeds_the_bound_and_counts_what_it_cuts(
    sizes: list[int], max_chars: int
) -> None:
    sections = _sections(sizes)
    text = render("**Plan: test.**\n\n", sections, max_chars=max_chars)
    assert len(text) <= max_chars
    for i, size in enumerate(sizes):
        shown = len(re.findall(rf"^\| {i}-\d+ \|", text, re.M))
        cut = re.search(rf"… and ([\d,]+) more of section {i}\n", text)
        assert shown + (int(cut[1].replace(",", "")) if cut else 0) == size
        assert re.findall(rf"^\| {i}-(\d+) \|", text, re.M) == [str(j) for j in range(shown)]


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=400), min_size=1, max_size=5),
    max_chars=st.integers(min_value=1, max_value=3_000),
)
def test_a_bound_too_small_for_the_sections_is_still_kept(sizes: list[int], max_chars: int) -> None:
    """`--max-chars 300` gave 805 characters (the sections' titles alone did not fit)."""
    text = render("**Plan: test.**\n\n", _sections(sizes), max_chars=max_chars)
    assert 0 < len(text) <= max_chars


def test_what_is_left_when_no_section_fits() -> None:
    text = render("**Plan: test.**\n\n", _sections([50, 50]), max_chars=300, full="plan.md")
    assert text.startswith("**Plan: test.**")
    assert "its sections are left out. The full plan is in `plan.md`." in text
    assert "<details>" not in text


def test_small_sections_stay_whole_when_a_big_one_is_cut() -> None:
    small, big = _sections([5, 2000])
    text = render("top\n\n", [big, small], max_chars=20_000)
    assert len(re.findall(r"^\| 0-\d+ \|", text, re.M)) == 5, "the small one whole"
    assert "more of section 0" not in text and "more of section 1" in text


def test_a_section_cut_to_no_rows_shows_no_empty_table() -> None:
    """Its title and how many rows were left out, not a table head with nothing under it."""
    long = Section(
        title="Spec warnings (3)",
        columns=["where", "warning"],
        noun="warnings",
        rows=[f"| w{i} | {'x' * 3000} |" for i in range(3)],
    )
    small = _sections([3])[0]
    text = render("top\n\n", [small, long], max_chars=2_500)
    assert "<summary>Spec warnings (3)</summary>" in text
    assert "… and 3 more warnings" in text and "| where | warning |" not in text
    assert "| row | text |" in text  # the section with rows keeps its table


def test_an_open_section_is_served_before_the_folded_ones() -> None:
    """With --max-chars 2000 the open "workloads the change affects" section (long rows)
    kept no row while the folded waiting and quota tables kept theirs: the rows shared
    alike, smallest first (user trial). What a reviewer must not miss comes first."""
    affects = Section(
        title="Workloads the change affects (5)",
        columns=["workload", "why"],
        noun="workloads",
        rows=[f"| w{i} | {'because ' * 25} |" for i in range(5)],
        open=True,
    )
    folded = _sections([30, 30])
    text = render("top\n\n", [affects, *folded], max_chars=2_000)
    assert len(text) <= 2_000
    assert len(re.findall(r"^\| w\d \|", text, re.M)) >= 3, text


def test_a_small_folded_section_stays_whole_beside_a_big_open_one() -> None:
    """A quota change's comment: the open actions took every character, and the folded
    fair-share table (1.3 KB of a 60 KB comment) showed no row, only "… and 27 more"
    (trial U). A section small beside the bound (a twentieth of it) is shown whole first."""
    big = Section(
        title="Preempt (2000)",
        columns=["workload", "why"],
        noun="actions",
        rows=[f"| w{i} | {'because ' * 5} |" for i in range(2000)],
        open=True,
    )
    shares = _sections([20])[0]
    text = render("top\n\n", [big, shares], max_chars=20_000)
    assert len(text) <= 20_000
    assert len(re.findall(r"^\| 0-\d+ \|", text, re.M)) == 20, "the fair shares whole"
    assert "more of section 0" not in text and "more actions" in text


def test_a_cut_comment_still_names_every_eviction(tmp_path: Path, capsys: Capsys) -> None:
    """1,500 new workloads: the open "affects" table, sorted by name, took the room, and
    the one-row Preempt section, folded, was cut to "… and 1 more to preempt": no line of
    the comment named the job the change evicts (user trial). The disrupted rows come
    first, and the sections of evictions are open."""
    docs = [
        cluster(pools=[pool("a100", nodes=1)]),
        project("p", gpus=8),
        workload("zz-old", "p", gpus=8, priority=10),
        workload("aa-urgent", "p", gpus=8, priority=90),
        *(workload(f"batch-{i:04d}", "p", gpus=1, priority=5) for i in range(600)),
    ]
    specs = write_specs(tmp_path / "s", [docs[0], docs[1], docs[2]])
    assert cp(capsys, "apply", specs, "--auto-approve", "--now", NOW).code == 0
    write_specs(specs, docs)
    res = cp(capsys, "plan", specs, "--markdown", "--max-chars", "6000", "--now", NOW)
    assert res.code == 0, res.err
    assert "cut to 6,000 characters" in res.out
    assert "<details open><summary>Preempt (1)</summary>" in res.out
    assert "| `p/zz-old` |" in res.out, res.out


def test_spec_values_cannot_write_html_into_the_comment() -> None:
    """A command argument ``</details><h1>LGTM</h1>`` closed a section early and made a
    heading of the rest (user trial)."""
    rows = [f"| `w` | {cell('command: [run, </details><h1>LGTM</h1>]')} |"]
    text = render("top\n\n", [Section(title="Submit (1)", columns=["w", "why"], rows=rows)])
    assert "<h1>" not in text and text.count("<details") == text.count("</details>") == 1
    assert "&lt;/details&gt;&lt;h1&gt;LGTM&lt;/h1&gt;" in text
