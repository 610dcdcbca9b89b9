"""Entries are laid out by offsets and styled from their spans directly: the same output
as wrapping and rendering each line through rich, in colour and without."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from controlplane.cli.views.entries import _breaks, print_entries

STYLES = ["", "bold", "dim", "red", "bold cyan", "yellow"]


@st.composite
def texts(draw: st.DrawFn) -> Text:
    """ASCII text of words and runs of spaces, a style of its own and styled pieces."""
    words = draw(st.lists(st.from_regex(r"[a-z/.:-]{1,30}", fullmatch=True), max_size=14))
    gaps = draw(
        st.lists(st.sampled_from([" ", "  ", "   "]), min_size=len(words), max_size=len(words))
    )
    plain = "".join(w + g for w, g in zip(words, gaps, strict=True))
    text = Text(plain, style=draw(st.sampled_from(STYLES)))
    for _ in range(draw(st.integers(0, 3))):
        a = draw(st.integers(0, len(plain)))
        b = draw(st.integers(a, len(plain)))
        text.stylize(draw(st.sampled_from(STYLES[1:])), a, b)  # may overlap: rich's path
    return text


def _by_rich(console: Console, rows: list[tuple[Text, Text, Text]]) -> None:
    """The layout line by line: each line sliced at the same breaks (the wrap itself is
    the module's) and styled and rendered by rich."""
    indent = max(m.cell_len for m, _, _ in rows) + 1
    width = max(console.width - indent, 24)
    for marker, what, why in rows:
        line = Text(" " * indent)
        line.append_text(_styled(marker)[:indent])
        line = _styled(marker) + Text(" " * (indent - marker.cell_len))
        for i, part in enumerate(_split(what, width)):
            console.print(
                (Text(" " * indent) if i else line) + _styled(part), soft_wrap=True, highlight=False
            )
        for part in _split(why, width):
            console.print(Text(" " * indent) + _styled(part), soft_wrap=True, highlight=False)


def _styled(text: Text) -> Text:
    out = Text()
    out.append_text(text)
    return out


def _split(text: Text, width: int) -> list[Text]:
    plain = text.plain
    if len(plain) <= width:
        return [text]
    out = []
    for a, b in _breaks(plain, width):
        part = text[a:b]
        part.rstrip()
        out.append(part)
    return out


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["  + submit ", "  ~"]), texts(), texts()), min_size=1, max_size=5
    ),
    width=st.integers(30, 120),
    colour=st.booleans(),
)
def test_entries_print_as_rich_would(
    rows: list[tuple[str, Text, Text]], width: int, colour: bool
) -> None:
    entries = [(Text(m, style="green"), what, why) for m, what, why in rows]
    consoles = [
        Console(
            file=io.StringIO(),
            width=width,
            force_terminal=colour,
            color_system="truecolor" if colour else None,
        )
        for _ in range(2)
    ]
    print_entries(consoles[0], entries)
    _by_rich(consoles[1], entries)
    fast, slow = (c.file.getvalue() for c in consoles)  # type: ignore[attr-defined]
    assert fast == slow


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.text(alphabet="ab  é日本\n", max_size=60), st.text(alphabet="cd  ü語\n", max_size=90)
        ),
        min_size=1,
        max_size=4,
    ),
    width=st.integers(30, 90),
)
def test_entries_without_styles_drawn_are_the_same_text(
    rows: list[tuple[str, str]], width: int
) -> None:
    # where no style is drawn the entries are joined as plain text; wide characters and
    # line breaks go through rich's own wrap there too: the text of the styled output
    entries = [(Text("  ~"), Text(what), Text(why)) for what, why in rows]
    plain, drawn = (
        Console(file=io.StringIO(), width=width, force_terminal=colour, color_system=system)
        for colour, system in ((False, None), (True, "truecolor"))
    )
    print_entries(plain, entries)
    print_entries(drawn, entries)  # no style in these entries: no escape codes either
    assert plain.file.getvalue() == drawn.file.getvalue()  # type: ignore[attr-defined]
