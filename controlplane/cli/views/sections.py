"""A pull-request comment bounded to a size: collapsible sections of table rows, cut
where they must be with "… and N more".

A GitHub comment holds 65,536 characters; a plan of 3,000 workloads is several hundred
thousand. So a comment is built from :class:`Section` values (a title, a table, its
rows) and :func:`render` fits them into ``max_chars``: sections small beside it (a
twentieth) whole, within a quarter of it, then the open sections, then the folded ones;
among each, sections small enough are shown whole, and what is left is shared equally
among the larger ones, each cut with "… and N more" saying how many of its rows were
left out, and a line at the top saying how many in all. What the sections hold is the
callers' business (views/markdown.py: a plan's actions, waiting work, warnings and
quotas; views/policy.py: a policy diff). Plain text only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_MAX_CHARS = 60_000  # GitHub's comment limit is 65,536; room for a bot's own words


@dataclass(frozen=True)
class Section:
    """One collapsible part of the comment: ``title`` shows while collapsed; ``rows`` are
    whole Markdown table rows under ``columns`` (the cut never splits a row); ``noun``
    names them in "… and 12 more {noun}"."""

    title: str
    columns: Sequence[str]
    rows: Sequence[str]
    noun: str = "rows"
    align: Sequence[str] = ()  # per column: "---" (default) or "---:"
    note: str = ""  # a line under the title, before the table
    open: bool = False  # shown unfolded: what a reviewer must not miss

    def head(self, table: bool = True) -> str:
        """The title and note, then the table's head (``table``: some rows follow)."""
        align = list(self.align) or ["---"] * len(self.columns)
        return (
            f"<details{' open' if self.open else ''}><summary>{self.title}</summary>\n\n"
            + (f"{self.note}\n\n" if self.note else "")
            + (f"| {' | '.join(self.columns)} |\n|{'|'.join(align)}|\n" if table else "")
        )

    @staticmethod
    def tail(left_out: int, noun: str) -> str:
        if left_out == 1 and noun.endswith("s"):  # "1 more warning"
            noun = noun[:-1]
        more = f"\n… and {left_out:,} more {noun}\n" if left_out else ""
        return f"{more}\n</details>\n\n"


def render(
    top: str,
    sections: Sequence[Section],
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    full: str | None = None,
) -> str:
    """``top`` (the summary line first), then ``sections``, within ``max_chars`` (0: no
    bound). ``full`` says where the whole plan is, for the line that says what was cut."""
    whole = _assemble(top, sections, [len(s.rows) for s in sections], "")
    if max_chars <= 0 or len(whole) <= max_chars:
        return whole
    where = f" The full plan is in `{full}`." if full else ""
    cut_note = "_This comment is cut to {limit:,} characters: {left:,} rows left out.{where}_\n\n"
    # the worst case of every fixed part: titles, table heads, "… and N more" lines, the note
    fixed = len(top) + len(cut_note.format(limit=max_chars, left=10**9, where=where))
    fixed += sum(len(s.head()) + len(Section.tail(10**9, s.noun)) for s in sections)
    if fixed > max_chars:  # not even the sections' titles fit: the summary alone
        alone = f"{top}_This comment is cut to {max_chars:,} characters: its sections are left out.{where}_\n"
        return _first_lines(alone, max_chars)
    budget = max_chars - fixed
    sizes = [sum(len(r) + 1 for r in s.rows) for s in sections]
    counts = [0] * len(sections)
    # a section small beside the bound (a twentieth) is shown whole first, open or folded,
    # smallest first, within a quarter of the room: a 1.3 KB fair-share table showed no
    # row beside a plan's 58 KB of actions
    room = budget // 4
    for i in sorted(range(len(sections)), key=lambda i: (sizes[i], i)):
        if sizes[i] <= max_chars // 20 and sizes[i] <= room:
            counts[i], room, budget = len(sections[i].rows), room - sizes[i], budget - sizes[i]
    # then the open sections (what a reviewer must not miss) share the room, the folded
    # ones what they leave
    for unfolded in (True, False):
        chosen = [i for i, s in enumerate(sections) if s.open is unfolded and not counts[i]]
        got = _share(budget, [[len(r) + 1 for r in sections[i].rows] for i in chosen])
        for i, n in zip(chosen, got, strict=True):
            counts[i] = n
            budget -= sum(len(r) + 1 for r in sections[i].rows[:n])
    left = sum(len(s.rows) for s in sections) - sum(counts)
    note = cut_note.format(limit=max_chars, left=left, where=where)
    return _assemble(top, sections, counts, note)


def _first_lines(text: str, limit: int) -> str:
    """The whole lines of ``text`` that fit in ``limit`` characters (the first line cut
    short if not even it fits)."""
    if len(text) <= limit:
        return text
    kept = text[:limit]
    return kept[: kept.rfind("\n") + 1] or kept


def _share(budget: int, sizes: list[list[int]]) -> list[int]:
    """How many leading rows of each section fit: the smallest sections whole first, then
    an equal share of what is left for each larger one (water-filling)."""
    counts = [0] * len(sizes)
    order = sorted(range(len(sizes)), key=lambda i: (sum(sizes[i]), i))
    for place, i in enumerate(order):
        share = budget // (len(order) - place)
        used = 0
        for size in sizes[i]:
            if used + size > share:
                break
            used += size
            counts[i] += 1
        budget -= used
    return counts


def _assemble(top: str, sections: Sequence[Section], counts: list[int], note: str) -> str:
    parts = [top, note]
    for s, shown in zip(sections, counts, strict=True):
        parts.append(s.head(table=shown > 0 or not s.rows))  # no empty table over "… N more"
        parts.extend(f"{row}\n" for row in s.rows[:shown])
        parts.append(Section.tail(len(s.rows) - shown, s.noun))
    return "".join(parts)


def cell(text: str) -> str:
    """Text safe inside a table cell: no pipes breaking columns, no newlines, and no HTML
    (a spec value such as ``</details>`` would close a section, ``<h1>`` make a heading)."""
    return (
        text.replace("\\", "\\\\")
        .replace("|", "\\|")
        .replace("\n", " ")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
    )
